"""30_economics: whole packages and the cost per accepted corpus into economics.json (R5):
``step(experiment, bundle_dir, pricing)``, pricing a campaign target's offer, else the YAML's."""

from gpubench_nb.economics.reprice import economics_notebook as step

__all__ = ["step"]
