"""Concurrency on the machine (R2.5): busy foreign processes from a fake /proc, load average,
and what the notes say; numerics (R2.4) in notes so that differing rows say so."""

from __future__ import annotations

from pathlib import Path

import torch

from gpubench_nb.engine.environment import activity_text, cpu_activity
from gpubench_nb.engine.numerics import numeric_settings, numerics_note


def _stat(
    proc: Path, pid: int, name: str, utime: int, stime: int, *, ppid: int = 1, cpu: int = 0
) -> None:
    folder = proc / str(pid)
    folder.mkdir(exist_ok=True)
    fields = ["S", str(ppid)] + ["0"] * 9 + [str(utime), str(stime)] + ["0"] * 23 + [str(cpu)]
    fields += ["0"] * 6  # field 39 (processor): the CPU it last ran on
    (folder / "stat").write_text(f"{pid} ({name}) {' '.join(fields)}\n", encoding="utf-8")


def _window(proc: Path, seconds: float, sleep, **given) -> dict:
    """cpu_activity over a window of ``seconds`` in which ``sleep`` rewrites the fake /proc, as
    pid 10 at 100 ticks per second."""
    now = iter([0.0, seconds])
    clock = lambda: next(now)  # noqa: E731
    return cpu_activity(
        window_seconds=seconds, proc=proc, sleep=sleep, clock=clock, own_pid=10,
        ticks_per_second=100, **given,
    )  # fmt: skip


def test_busy_foreign_processes_are_found_and_self_is_excluded(tmp_path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "self").mkdir()  # non-numeric entries are ignored
    for pid, name in ((10, "me"), (20, "bench (x) y"), (30, "idle"), (40, "half")):
        _stat(proc, pid, name, 100, 100)

    def sleep(seconds: float) -> None:  # two seconds pass; 100 ticks per second
        _stat(proc, 10, "me", 300, 100)  # ourselves, busy: never listed
        _stat(proc, 20, "bench (x) y", 250, 250)  # 300 ticks = 1.5 cores
        _stat(proc, 30, "idle", 101, 100)  # 0.005 core: below 10 %
        _stat(proc, 40, "half", 150, 150)  # 0.5 core
        _stat(proc, 50, "new", 60, 0)  # started during the window: all its ticks are in it

    record = _window(proc, 2.0, sleep, load_average=lambda: 3.5)
    assert record["load_average_1min"] == 3.5
    assert record["busy_processes"] == [
        {"pid": 20, "name": "bench (x) y", "cpu_share": 1.5},
        {"pid": 40, "name": "half", "cpu_share": 0.5},
        {"pid": 50, "name": "new", "cpu_share": 0.3},
    ]
    text = activity_text(record)
    assert text == (
        "load1=3.50 busy_cpu=pid 20 bench (x) y (1.50 core), pid 40 half (0.50 core), pid 50 new "
        "(0.30 core)"
    )


def test_unreadable_proc_is_not_observable_and_quiet_is_none(tmp_path) -> None:
    record = cpu_activity(proc=tmp_path / "absent", sleep=lambda s: None, load_average=lambda: 0.1)
    assert record["busy_processes"] == "not observable"
    assert activity_text(record) == "load1=0.10 busy_cpu=not observable"
    quiet = tmp_path / "proc"
    quiet.mkdir()
    now = iter([0.0, 1.0])
    record = cpu_activity(
        window_seconds=1.0,
        proc=quiet,
        sleep=lambda s: None,
        clock=lambda: next(now),
        load_average=lambda: 0.1,
    )
    assert activity_text(record) == "load1=0.10 busy_cpu=none"


def _no_sleep(seconds: float) -> None:
    raise AssertionError(f"slept {seconds} s on the run's path")


def test_the_run_path_never_sleeps_and_measures_since_the_previous_reading(tmp_path) -> None:
    # Issue 25: two fixed 0.2 s windows per run (0.41 s) are gone; the start's window is the
    # time since the previous reading, the end's the whole run.
    proc = tmp_path / "proc"
    proc.mkdir()
    _stat(proc, 20, "bench", 100, 0)
    _stat(proc, 30, "idle", 100, 0)
    clock = iter([10.0, 10.0, 14.0])
    first = cpu_activity(
        proc=proc, sleep=_no_sleep, clock=lambda: next(clock), ticks_per_second=100
    )
    assert first["busy_processes"] == "not observable"  # no earlier reading: no window yet
    _stat(proc, 20, "bench", 500, 0)  # 400 ticks over 4 s = 1 core
    later = cpu_activity(
        proc=proc, sleep=_no_sleep, clock=lambda: next(clock), ticks_per_second=100
    )
    assert later["window_seconds"] == 4.0
    assert later["busy_processes"] == [{"pid": 20, "name": "bench", "cpu_share": 1.0}]


def test_the_default_reading_on_real_proc_does_not_sleep() -> None:
    record = cpu_activity(sleep=_no_sleep)  # the window since this module's import
    assert record["window_seconds"] > 0
    assert isinstance(record["busy_processes"], list | str)


def test_real_proc_sample_runs_here() -> None:
    record = cpu_activity(window_seconds=0.05)
    assert isinstance(record["busy_processes"], list)
    assert all(p["pid"] != __import__("os").getpid() for p in record["busy_processes"])


def test_numerics_are_read_and_a_changed_setting_changes_the_note(monkeypatch) -> None:
    base = numeric_settings()
    assert base["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert base["cuda_matmul_allow_tf32"] == torch.backends.cuda.matmul.allow_tf32
    assert base["cudnn_allow_tf32"] == torch.backends.cudnn.allow_tf32
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
        changed = numeric_settings()
    finally:
        torch.set_float32_matmul_precision(previous)
    assert changed["float32_matmul_precision"] == "high"
    assert changed["environment"]["NVIDIA_TF32_OVERRIDE"] == "0"
    note, other = numerics_note(base), numerics_note(changed)
    assert note != other and "fp32_matmul=high" in other and "NVIDIA_TF32_OVERRIDE=0" in other


def test_numerics_unreadable_flags_are_not_observable() -> None:
    class Broken:
        def __getattr__(self, name):
            raise RuntimeError("no such flag in this build")

    fake = type(
        "FakeTorch",
        (),
        {
            "backends": type("B", (), {"cuda": Broken(), "cudnn": Broken()})(),
            "get_float32_matmul_precision": staticmethod(lambda: "highest"),
            "are_deterministic_algorithms_enabled": staticmethod(lambda: False),
            "get_num_threads": staticmethod(lambda: 2),
        },
    )
    settings = numeric_settings(fake, environ={})
    assert settings["cuda_matmul_allow_tf32"] == "not observable"
    assert settings["sdpa_backends_enabled"]["flash"] == "not observable"
    assert "sdpa=none (flash/mem_efficient/math/cudnn not observable)" in numerics_note(settings)


def test_only_others_on_my_cpus_count_and_the_tools_own_load_never(tmp_path) -> None:
    """The tool's own processes (this one, the command that started it, those it started) are
    never counted; of the others, those last seen on a CPU this process may use are (R2.5)."""
    proc = tmp_path / "proc"
    proc.mkdir()
    family = {10: ("me", 5, 0), 5: ("gpubench-nb", 1, 0), 11: ("compile-worker", 10, 1)}
    strangers = {20: ("busy-here", 1, 1), 30: ("busy-elsewhere", 1, 3)}
    for pid, (name, parent, cpu) in {**family, **strangers}.items():
        _stat(proc, pid, name, 0, 0, ppid=parent, cpu=cpu)

    def sleep(seconds: float) -> None:  # one second at 100 ticks per second: 1 core each
        for pid, (name, parent, cpu) in {**family, **strangers}.items():
            _stat(proc, pid, name, 100, 0, ppid=parent, cpu=cpu)

    # two CPUs in its affinity, a 1.5-CPU quota
    record = _window(proc, 1.0, sleep, cpus=lambda: (frozenset({0, 1}), 1.5))
    assert sorted(p["pid"] for p in record["busy_processes"]) == [20, 30]
    assert record["others_cpu_share"] == 1.0 and record["cpus_usable"] == 1.5


def test_usable_cpus_are_the_affinity_capped_by_the_cgroup_quota(tmp_path) -> None:
    import os

    from gpubench_nb.engine.environment import usable_cpus

    mine, usable = usable_cpus()
    assert mine == frozenset(os.sched_getaffinity(0)) and 0 < usable <= len(mine)
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/job_7/step_0\n", encoding="utf-8")
    (tmp_path / "sys/fs/cgroup/job_7/step_0").mkdir(parents=True)
    quota = tmp_path / "sys/fs/cgroup/job_7/step_0/cpu.max"
    quota.write_text("50000 100000\n", encoding="utf-8")  # half a CPU
    assert usable_cpus(tmp_path) == (mine, 0.5)
    quota.write_text("max 100000\n", encoding="utf-8")  # no quota: the affinity
    assert usable_cpus(tmp_path) == (mine, len(mine))
