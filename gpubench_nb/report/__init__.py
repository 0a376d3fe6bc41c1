"""The HTML report: reads finished bundles (files only), summarises, plots and renders."""
