"""check-bundle reads every sealed record and re-derives economics; `run` never resumes or
re-seals what it refuses; a lock without its seal is refused unless its format predates seals
(R1.3, R2.4, R3.6, R5.6). Each case is one a hostile sweep reproduced: edit, re-seal the
manifest, and the old check passed (or crashed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gpubench_nb.cli import main
from gpubench_nb.economics.reprice import verify_bundle
from gpubench_nb.errors import BundleError, ProtocolError
from gpubench_nb.pipeline import guard
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.audit import kept_corpus
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import freeze, seal_lock
from tests.support.sealed import MAIN_BUNDLE, resealed


def edit_json(name: str, change: Callable[[object], object]) -> Callable[[Path], None]:
    def edit(bundle: Path) -> None:
        data = json.loads((bundle / name).read_text(encoding="utf-8"))
        (bundle / name).write_text(json.dumps(change(data)), encoding="utf-8")

    return edit


def with_sealed_lock(bundle: Path) -> dict:
    """The fixture's lock as today's versions freeze it: corpus identity and lock_sha256."""
    lock = json.loads((bundle / layout.LOCK_NAME).read_text(encoding="utf-8"))
    lock["corpus_identity"] = kept_corpus(bundle, lock["declaration"]).identity
    lock = seal_lock(lock)
    (bundle / layout.LOCK_NAME).write_text(json.dumps(lock), encoding="utf-8")
    return lock


def _set(data: dict, **values: object) -> dict:
    return {**data, **values}


def _cheap(data: dict) -> dict:
    for offer in data["offers"]:
        offer["package_total_usd_minor"] = 1
        for variant in offer["variants"]:
            if variant["cost_per_accepted_usd_minor"] is not None:
                variant["cost_per_accepted_usd_minor"] = 1
    return data


def _failed_run(bundle: Path) -> Path:
    """A run.json of the bundle whose run failed (no time), else any run.json."""
    records = sorted(bundle.glob("runs/*/*/run.json"))
    failed = [p for p in records if json.loads(p.read_text())["elapsed_seconds"] is None]
    return (failed or records)[0]


CASES = {
    "economics at 1 cent": (edit_json("economics.json", _cheap), "package_total_usd_minor"),
    "economics deleted": (lambda b: (b / "economics.json").unlink(), "economics.json: missing"),
    "environment a list": (
        lambda b: (b / "environment.json").write_text("[]"),
        "expected a JSON object",
    ),
    "gpu_count two": (edit_json("environment.json", lambda d: _set(d, gpu_count="two")), "two"),
    "cpu_count text": (
        edit_json("environment.json", lambda d: _set(d, cpu_count="2")),
        "key 'cpu_count': expected an integer, got '2'",
    ),
    "failed run batch four": (
        lambda b: edit_json(str(_failed_run(b).relative_to(b)), lambda d: _set(d, batch="four"))(b),
        "key 'batch': expected an integer, got 'four'",
    ),
    "5000-digit integer": (
        lambda b: _failed_run(b).write_text('{"batch": ' + "9" * 5000 + "}"),
        "out of range",
    ),
    "100000-deep list": (
        lambda b: (b / "environment.json").write_text("[" * 100_000 + "]" * 100_000),
        "unreadable JSON",
    ),
    "401-digit float": (
        lambda b: (
            edit_json("economics.json", lambda d: d)(b)
            or (b / "economics.json").write_text('{"offers": ' + "1" * 401 + ".0}")
        ),
        "out of range",
    ),
    "checks.json huge number": (
        lambda b: next(b.glob("runs/*/*/checks.json")).write_text('{"x": ' + "9" * 5000 + "}"),
        "checks.json: unreadable JSON",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_check_bundle_finds_each_edit_under_a_new_manifest(tmp_path, capsys, case) -> None:
    edit, expected = CASES[case]
    bundle = resealed(tmp_path, edit)
    assert main(["check-bundle", str(bundle)]) == 1
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    with pytest.raises(BundleError, match="check-bundle refuses"):  # run never re-seals it
        guard.refuse_tampered(bundle)  # what `run` does first with a finished bundle


def test_the_untouched_bundle_still_verifies(tmp_path) -> None:
    assert verify_bundle(resealed(tmp_path, lambda b: None)) == []
    assert verify_bundle(resealed(tmp_path / "s", with_sealed_lock)) == []


@pytest.mark.parametrize("how", ["seal removed", "seal wrong"])
def test_a_lock_edited_outside_its_sha256_is_refused_by_check_and_by_run(tmp_path, how) -> None:
    def forge(bundle: Path) -> None:
        lock = with_sealed_lock(bundle)
        lock["notes"], lock["created_utc"] = "forged", "2019-01-01T00:00:00Z"
        if how == "seal removed":
            del lock["lock_sha256"]
        (bundle / layout.LOCK_NAME).write_text(json.dumps(lock), encoding="utf-8")

    bundle = resealed(tmp_path, forge)
    problems = verify_bundle(bundle)
    assert problems and "R1.3" in problems[0]
    assert ("the seal was removed" if how == "seal removed" else "does not match") in problems[0]
    (bundle / layout.MANIFEST_NAME).unlink()  # an unfinished bundle: `run` would resume it
    lock = json.loads((bundle / layout.LOCK_NAME).read_text(encoding="utf-8"))
    experiment = load_experiment(bundle / "protocol" / "experiment.yaml")
    with pytest.raises(ProtocolError, match="R1.3.*(seal was removed|does not match)"):
        freeze(bundle, experiment, lock["fingerprints"])
    assert json.loads((bundle / layout.LOCK_NAME).read_text(encoding="utf-8")) == lock


def test_a_lock_that_predates_seals_still_verifies(tmp_path) -> None:
    lock = json.loads((MAIN_BUNDLE / layout.LOCK_NAME).read_text(encoding="utf-8"))
    assert "lock_sha256" not in lock and "corpus_identity" not in lock
    assert verify_bundle(resealed(tmp_path, lambda b: None)) == []


def test_every_offer_is_re_priced_from_the_table_that_priced_it(tmp_path) -> None:
    from gpubench_nb.economics.reprice import _pricing, price_bundle

    offers = Path(__file__).resolve().parents[2] / "parameters" / "offers.yaml"
    terms = {"offers": offers, "offer": "h100-example", "days": 7, "lots": 1, "gpus": None}
    bundle = resealed(tmp_path, lambda b: price_bundle(b, _pricing(None, terms)))
    assert verify_bundle(bundle) == []  # priced with this table, checked with this table

    def forge(data: dict) -> dict:
        data["offers"][-1]["package_total_usd_minor"] = 1  # not the declared offer
        return data

    edit_json("economics.json", forge)(bundle)
    layout.write_manifest(bundle)
    assert any("package_total_usd_minor: 1 ->" in p for p in verify_bundle(bundle))


@pytest.mark.parametrize(
    "case", ["cpu_count text", "5000-digit integer", "100000-deep list", "401-digit float"]
)
def test_the_report_refuses_absurd_records_before_any_kernel(tmp_path, case) -> None:
    from gpubench_nb.report.bundles import load_bundles

    edit, _ = CASES[case]
    with pytest.raises(BundleError, match=r"R\d\.\d: .*(out of range|unreadable|cpu_count)"):
        load_bundles([str(resealed(tmp_path, edit))])
