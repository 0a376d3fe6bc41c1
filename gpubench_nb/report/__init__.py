"""The HTML report: reads finished bundles (files only), summarises, plots and renders.
Never imports the engine or the pipeline."""
