"""Campaigns: one protocol frozen once, run on several machines (local, Slurm, manual)."""
