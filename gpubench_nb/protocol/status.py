"""The words a phase, a run, a scheduled run and a campaign target are in: enums written as their
value (``running``) in run.json, schedule.json and campaign.json (R3.2, R3.6, R3.7)."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """Equal to, printed and written as its value (``enum.StrEnum`` needs Python 3.11)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class RunStatus(Status):
    """run.json ``status`` (R3.6): running until the run ends; a process that dies leaves it;
    refused: the files read were not the frozen ones (R1.3)."""

    RUNNING, FINISHED, FAILED, REFUSED = "running", "finished", "failed", "refused"


class ScheduleStatus(Status):
    """schedule.json ``runs[].status`` (R3.7)."""

    DONE, PENDING = "done", "pending"


class TargetState(Status):
    """campaign.json ``targets.<id>.state``; manual: run by hand (reach: manual)."""

    PENDING, SUBMITTED, RUNNING = "pending", "submitted", "running"
    COMPLETED, FAILED, MANUAL = "completed", "failed", "manual"


JOB_OUT = (TargetState.SUBMITTED, TargetState.RUNNING)  # a job holds the target: never submit twice
