"""What Slurm says about a job, and why a job ended without result: ``sacct`` (where accounting
is on), else ``scontrol show job`` (kept MinJobAge after the end), then ``squeue``; a job none
lists has ended. No tool answering: UNKNOWN, never submitted twice (``--resubmit`` says gone)."""

from __future__ import annotations

import subprocess
import textwrap
import time
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

# Slurm states in which a job may still produce its result: never submit a second one then.
LIVE = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED")
LIVE += ("RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT")
LIVE += ("PREEMPTED",)  # as sacct may show it before the requeue: same id, runs again
# Ended from outside the job's own commands: cancelled, pre-empted, over its limits, node lost.
STOPPED_FROM_OUTSIDE = ("CANCELLED", "PREEMPTED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL")
STOPPED_FROM_OUTSIDE += ("DEADLINE", "OUT_OF_MEMORY", "REVOKED")
ENDED = "ENDED"  # no longer known to the controller, and no accounting to say how it ended
UNKNOWN = "UNKNOWN"
TOOL_TIMEOUT_SECONDS = 30
ERR_TAIL_LINES = 12
UNREACHABLE = "controller unreachable"
REUSE_SECONDS = 10.0  # a controller that is down: each tool waits ~2 MessageTimeout to say so
_DOWN: list[tuple[float, JobState]] = []  # that answer, reused for the other jobs meanwhile


@dataclass(frozen=True)
class JobState:
    """One answer about a job: its state, exit code (``code:signal``), reason, and source."""

    state: str
    exit_code: str | None = None
    reason: str | None = None
    source: str = "none"  # sacct | scontrol | squeue | none
    detail: str | None = None  # why no tool answered (UNKNOWN)
    node: str | None = None  # where it runs, or ran last (scontrol)
    restarts: int = 0  # times Slurm requeued it (a node failure, pre-emption)

    @property
    def live(self) -> bool:
        """May still produce a result: running, queued, or not known at all (never resubmit)."""
        return self.state in LIVE or self.state == UNKNOWN

    def describe(self) -> str:
        """e.g. ``FAILED, exit code 1 (reason NonZeroExitCode; scontrol)``."""
        if self.state == UNKNOWN:
            return f"{UNKNOWN} ({self.detail})"
        parts = []
        # a job still queued or running has no exit code yet (scontrol shows 0:0)
        code, _, sig = ("" if self.live else self.exit_code or "").partition(":")
        if code and (code != "0" or sig in ("", "0")):
            parts.append(f"exit code {code}")
        if sig and sig != "0":
            parts.append(f"signal {sig}")
        extra = [f"reason {self.reason}"] if self.reason and self.reason != "None" else []
        extra.append(self.source)
        head = ", ".join([self.state, *parts])
        return f"{head} ({'; '.join(extra)})"


def _run(command: list[str]) -> tuple[int, str, str]:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, "", f"{type(exc).__name__}: {exc}"
    return done.returncode, done.stdout, done.stderr.strip()


def _from_sacct(job_id: str) -> tuple[JobState | None, bool, str]:
    code, out, err = _run(["sacct", "-j", job_id, "-X", "-P", "-o", "JobID,State,ExitCode"])
    lines = [line for line in out.splitlines() if line.strip()]
    if code != 0 or len(lines) < 2:
        return None, False, f"sacct: {err or 'no record of the job'}"
    header = [h.strip().lower() for h in lines[0].split("|")]
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        if row.get("jobid") == job_id and row.get("state"):
            state = row["state"].split()[0]  # "CANCELLED by 0" -> CANCELLED
            return JobState(state, row.get("exitcode"), None, "sacct"), False, ""
    return None, False, "sacct: no record of the job"


def _from_scontrol(job_id: str) -> tuple[JobState | None, bool, str]:
    code, out, err = _run(["scontrol", "show", "job", "-o", job_id])
    if code != 0:
        return None, "invalid job id" in err.lower(), f"scontrol: {err or f'exit {code}'}"
    fields = dict(token.partition("=")[::2] for token in out.split() if "=" in token)
    if not fields.get("JobState"):
        return None, False, "scontrol: no JobState in its answer"
    found = JobState(fields["JobState"], fields.get("ExitCode"), fields.get("Reason"), "scontrol")
    node = fields.get("BatchHost") or fields.get("NodeList") or None
    restarts = int(fields["Restarts"]) if fields.get("Restarts", "").isdigit() else 0
    return replace(found, node=node, restarts=restarts), False, ""


def _from_squeue(job_id: str) -> tuple[JobState | None, bool, str]:
    code, out, err = _run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T"])
    state = out.strip().splitlines()[0].strip() if out.strip() else ""
    if code == 0 and state:
        return JobState(state, None, None, "squeue"), False, ""
    gone = (code == 0 and not state) or "invalid job id" in err.lower()
    return None, gone, f"squeue: {err or 'no such job'}"


def job_state(job_id: str) -> JobState:
    """Slurm's word on ``job_id``: sacct, else scontrol, else squeue (see the module doc). Each
    asks one tool: (state, gone: the controller no longer knows the job, why no state)."""
    if _DOWN and time.monotonic() - _DOWN[-1][0] < REUSE_SECONDS:
        return _DOWN[-1][1]
    gone, whys = False, []
    for ask in (_from_sacct, _from_scontrol, _from_squeue):
        found, ended, why = ask(job_id)
        if found is not None:
            return found
        gone, whys = gone or ended, [*whys, why]
        if "unable to contact slurm controller" in why.lower():  # the next tool would wait too
            fix = "when `scontrol ping` answers, `campaign status` or `campaign run` again"
            down = JobState(
                UNKNOWN,
                detail=f"{UNREACHABLE} ({why}): the job is neither marked "
                f"failed nor submitted again; {fix} (a waiting run goes on by itself)",
            )
            _DOWN[:] = [(time.monotonic(), down)]
            return down
    if gone:
        return JobState(ENDED, None, "no longer known to the controller", "scontrol/squeue")
    return JobState(UNKNOWN, detail="; ".join(whys))


def node_reason(node: str | None) -> str:
    """What Slurm says of ``node`` now: its state and why it is out of service (``sinfo``)."""
    if not node:
        return "an unknown node"
    out = _run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"])[1].strip().splitlines()
    state, _, reason = (out[0] if out else "unknown|").partition("|")
    return f"node {node} {state}: {reason if reason not in ('', 'none') else 'no reason given'}"


def ended_without_result(entry: dict[str, Any], state: JobState | None) -> str:
    """Why the job of ``entry`` left no result: Slurm's state, how it ended, its .err tail."""
    job_id, stderr_log = entry["job_id"], (entry.get("logs") or {}).get("stderr")
    if state is None:  # a local job: no scheduler to ask
        head = f"job {job_id} ended without a result"
        how = "its process is gone (killed, or it crashed before writing its result)"
    else:
        head = f"Slurm job {job_id} ended without a result: {state.describe()}"
        if state.state in STOPPED_FROM_OUTSIDE:
            how = "stopped from outside (scancel, pre-emption, time limit or node failure)"
            how += f"; {node_reason(state.node)}" if state.node else ""
        elif state.state == ENDED:
            how = "no accounting here to say how it ended; see its log"
        else:
            how = "its own commands failed (a setup line, the python interpreter, or the job)"
    text = ""
    with suppress(OSError):  # the last non-empty lines of the .err log
        text = Path(stderr_log).read_text(encoding="utf-8", errors="replace") if stderr_log else ""
    tail = "\n".join(
        [line.rstrip()[:400] for line in text.splitlines() if line.strip()][-ERR_TAIL_LINES:]
    )
    where = f"\nits .err log ({stderr_log}) ends with:\n{textwrap.indent(tail, '    ')}"
    if not tail:
        where = f"\nits .err log ({stderr_log}) is empty or missing" if stderr_log else ""
    return f"{head}; {how}{where}"
