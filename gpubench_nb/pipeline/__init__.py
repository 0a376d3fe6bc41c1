"""papermill orchestration: the schedule, one kernel per run, the rows each run leaves, and the
notebook steps (environment, quality)."""
