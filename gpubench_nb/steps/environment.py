"""00_environment: capture the machine as observed into environment.json (R2.4, R2.5)."""

from gpubench_nb.engine.environment import record_environment as step

__all__ = ["step"]
