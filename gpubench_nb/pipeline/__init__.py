"""papermill orchestration: the schedule, one kernel per run, the rows each run leaves."""
