"""The verdict under the conditions each run recorded (R2.5), and outlier marks that mean the
same run on every screen (R3.6): the time plot, the throughput plot and the tables."""

from __future__ import annotations

import pytest
from matplotlib.collections import PathCollection

from gpubench_nb.report import figures
from gpubench_nb.report import render as report
from gpubench_nb.report.conditions import RunConditions, over_runs, run_conditions
from gpubench_nb.report.conditions import conditions_check as check_of
from gpubench_nb.report.decision import DecisionView, Option, decision_frame, decision_sentences
from gpubench_nb.report.stats import summarise

B1 = (0.050, 0.066, 0.116, 0.171, 0.126)  # a loaded 2-core machine: b1 min→median ×2.3
B32 = (0.036, 0.018, 0.054, 0.918, 0.083)  # b32: min 18 ms, median 54 ms, one run 918 ms
QUIET_B1 = (0.80, 0.82, 0.81, 0.79, 0.83)
QUIET_B32 = (0.50, 0.52, 0.48, 0.51, 0.49)


def _rows(variant: str, warm: tuple[float, ...], seen: RunConditions | None) -> list[dict]:
    return [
        {"bundle": "box", "variant_id": variant, "phase": "warm", "run_index": i,
         "elapsed_seconds": s, "expected_ids": 1000, "corpus_accepted": True, "conditions": seen}
        for i, s in enumerate(warm, start=1)
    ]  # fmt: skip


def _view(b1: tuple, b32: tuple, seen_b1=None, seen_b32=None) -> DecisionView:
    summary = summarise(_rows("b1", b1, seen_b1) + _rows("b32", b32, seen_b32))
    options = [Option(warm=p) for p in summary.phases]
    check = check_of([o.conditions for o in options if o.conditions])
    return DecisionView(options, decision_sentences(options, check), check)


def _load(load: float, *, fixed: bool = False) -> RunConditions:
    threads = "2 torch thread(s), " + ("OMP_NUM_THREADS=1" if fixed else "OMP/MKL threads unset")
    return RunConditions(load, load, 2, (), None, threads=threads, threads_fixed=fixed)


def _speed(view: DecisionView) -> str:
    return next(s for s in view.sentences if "median warm time per corpus" in s)


def test_heavy_load_with_free_threads_withholds_the_verdict_and_says_what_to_do() -> None:
    busy = _load(8.5)  # three CPU-bound processes beside the run on 2 cores
    view = _view(B1, B32, busy, busy)
    sentence = _speed(view)
    assert sentence.startswith("Verdict withheld: box / b32 has the lowest median warm time")
    assert "no option is shown faster" in sentence and "heavy load" in sentence
    assert "rerun on a quiet machine, or with fixed threads" in sentence
    assert "Median over fastest run: box / b32 3.00×, box / b1 2.32×" in sentence
    assert "Fastest" not in " ".join(view.sentences) and "Faster than" not in sentence
    banner = view.check.banner()
    assert banner and "heavy load" in banner and "No option is named faster" in banner


def test_a_quiet_machine_still_names_the_faster_option() -> None:
    quiet = _load(0.2)
    view = _view(QUIET_B1, QUIET_B32, quiet, quiet)
    assert view.check.banner() is None
    assert _speed(view).startswith("Fastest accepted option: box / b32")
    assert "Faster than box / b1" in _speed(view)


def test_fixed_threads_under_load_give_a_verdict_with_the_banner() -> None:
    fixed = _load(6.0, fixed=True)
    view = _view(QUIET_B1, QUIET_B32, fixed, fixed)
    assert _speed(view).startswith("Fastest accepted option: box / b32")
    assert "threads fixed" in view.check.banner()  # type: ignore[operator]
    assert not view.check.withheld


def test_uneven_load_between_variants_withholds_the_verdict() -> None:
    view = _view(QUIET_B1, QUIET_B32, _load(0.2, fixed=True), _load(1.9, fixed=True))
    assert _speed(view).startswith("Verdict withheld") and "different load" in _speed(view)


def test_a_throttled_gpu_withholds_the_verdict() -> None:
    hot = RunConditions(0.1, 0.1, 2, (), None, throttled=True)
    view = _view(QUIET_B1, QUIET_B32, _load(0.1), hot)
    assert _speed(view).startswith("Verdict withheld") and "throttled" in _speed(view)


def test_minima_that_disagree_with_the_medians_are_discussed() -> None:
    slow_b32 = (0.002, 0.30, 0.31, 0.32, 0.33)  # one fast run, a median above b1's
    view = _view(QUIET_B1 * 1, tuple(v / 4 for v in QUIET_B1), None, None)
    assert not any("minima" in s for s in view.sentences)  # they agree: nothing to say
    view = _view(tuple(v / 4 for v in QUIET_B1), slow_b32)
    said = next(s for s in view.sentences if s.startswith("The minima disagree"))
    assert "box / b32's fastest warm run (2.00 ms) is 98.8× faster than box / b1's" in said


def _marked(fig, phase: str) -> list[float]:
    """The x of every ringed point of a facet (rings are drawn larger than the run dots)."""
    ax = next(a for a in fig.axes if a.get_title() == phase)
    rings = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_sizes()[0] > 18]
    return sorted(round(float(x), 6) for c in rings for x, _ in c.get_offsets())


def test_outlier_marks_are_the_same_runs_on_every_screen() -> None:
    """The throughput plot rings the run whose TIME is an outlier (the slowest, 918 ms: the
    fewest texts/s), never the fastest runs; the tables name the same run."""
    summary = summarise(_rows("b1", QUIET_B1, None) + _rows("b32", B32, None))
    elapsed, throughput = figures.elapsed_figure(summary), figures.throughput_figure(summary)
    assert _marked(elapsed, "warm") == _marked(throughput, "warm") != []
    ax = next(a for a in throughput.axes if a.get_title() == "warm")
    assert [t.get_text() for t in ax.texts] == ["run 4"]
    ring = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_sizes()[0] > 18]
    assert [round(float(y), 1) for c in ring for _, y in c.get_offsets()] == [
        round(1000 / 0.918, 1)
    ]
    table = report.summary_table(summary)
    assert table.loc[("box", "b32", "warm")].iloc[-1] == "run 4 (918 ms)"
    frame = decision_frame(DecisionView([Option(warm=p) for p in summary.phases]))
    assert frame.loc[("box", "b32"), "warm per corpus: median (min – max)"].endswith(
        "outlier: run 4 (kept, R3.6)"
    )


def test_several_outliers_of_one_variant_share_one_label() -> None:
    runs = (0.50, 0.50, 0.51, 0.50, 0.49, 0.50, 3.0, 4.0)
    fig = figures.elapsed_figure(summarise(_rows("b1", runs, None)))
    ax = next(a for a in fig.axes if a.get_title() == "warm")
    assert [t.get_text() for t in ax.texts] == ["runs 7, 8"]  # not two labels on each other


def test_threads_are_read_from_the_run_record() -> None:
    """engine/optimise.apply_threads' record when present, else torch's threads and the
    OMP/MKL variables that environment.numerics captured at the run's start."""
    numerics = {"cpu_threads": 2, "environment": {"OMP_NUM_THREADS": None}}
    old = run_conditions({"environment": {"numerics": numerics}})
    assert (old.threads, old.threads_fixed) == (
        "torch intra-op threads 2, OMP/MKL threads unset",
        False,
    )
    state = {"declared": 1, "intra_op": 1, "inter_op": 1, "OMP_NUM_THREADS": "1"}
    new = run_conditions({"threads": state, "environment": {"numerics": numerics}})
    assert new.threads_fixed is True
    assert new.threads == (
        "torch intra-op threads 1, inter-op 1, OMP_NUM_THREADS=1 (declared threads: 1)"
    )
    assert new.threads in new.text()
    assert run_conditions({}).threads is None  # not recorded: nothing claimed


def test_load_is_compared_per_core_across_machines() -> None:
    """A 64-core box at load 3 is as quiet as a 2-core one at 0.2: no withheld verdict."""
    view = _view(QUIET_B1, QUIET_B32, _load(0.2), RunConditions(3.0, 3.0, 64))
    assert view.check.banner() is None and _speed(view).startswith("Fastest accepted option")


def _surveyed(others: float, *, load: float = 0.2, fixed: bool = False) -> RunConditions:
    """A run whose busy survey saw other processes take ``others`` of the CPUs it may use."""
    return RunConditions(load, load, 2, (), None, threads_fixed=fixed, others=others)


def test_the_tools_own_load_is_not_counted_against_it() -> None:
    """Load 2.1 on 2 cores from its own threads withheld the verdict; the survey saw no other."""
    own = _surveyed(0.0, load=2.1)
    view = _view(QUIET_B1, QUIET_B32, own, own)
    assert view.check.banner() is None and _speed(view).startswith("Fastest accepted option")
    assert _view(QUIET_B1, QUIET_B32, _load(2.1), _load(2.1)).check.withheld  # not surveyed


def test_a_burst_during_one_variant_withholds_the_verdict() -> None:
    """Others took a whole CPU of 2 during b32's runs only, at an unremarkable load average."""
    view = _view(QUIET_B1, QUIET_B32, _surveyed(0.05), _surveyed(1.0))
    sentence = _speed(view)
    assert sentence.startswith("Verdict withheld") and "heavy load: other processes used 25%" in (
        sentence
    )
    assert "box / b32 (5/5 runs), with threads not fixed" in sentence
    assert "others on its CPUs 5/5 runs" in " ".join(o.conditions.text() for o in view.options)
    fixed = _view(QUIET_B1, QUIET_B32, _surveyed(0.05, fixed=True), _surveyed(1.0, fixed=True))
    assert not fixed.check.withheld and "threads fixed" in (fixed.check.banner() or "")


def test_the_survey_counts_the_cpus_the_run_may_use() -> None:
    """Half a CPU of others over the run: nothing on 64 usable CPUs, contention on the one CPU
    that ``taskset -c 0`` leaves; the start's window (from the kernel's start) and the end's
    (the passes) are weighed by their length."""

    def env(share: float, cpus: float) -> dict:
        return {
            "cpu_activity_start": {"others_cpu_share": 0.2 * share, "cpus_usable": cpus,
                                   "window_seconds": 3.0},
            "cpu_activity_end": {"others_cpu_share": 3.4 * share, "cpus_usable": cpus,
                                 "window_seconds": 1.0},
        }  # fmt: skip

    alone = run_conditions({"environment": env(0.5, 1)})
    assert alone.others == pytest.approx(0.5) and "others took 50% of its usable CPUs" in (
        alone.text()
    )
    wide = run_conditions({"environment": env(0.5, 64)})
    assert wide.others == pytest.approx(0.5 / 64)
    checks = [check_of([over_runs("box", v, [c] * 5) for v in ("b1", "b8")]) for c in (alone, wide)]
    assert checks[0].withheld and not checks[1].problems
    assert run_conditions({"environment": {}}).others is None  # an older record: the load rule
