"""The report's input: bundles read from disk, labelled, and refused when unlike (R2.1, R5.6)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench_nb.economics.attribution import Attribution, attribute, recorded_hardware
from gpubench_nb.economics.offers import Offer
from gpubench_nb.errors import BundleError, where_relative
from gpubench_nb.protocol import results
from gpubench_nb.protocol.acceptance import AcceptanceReport
from gpubench_nb.protocol.bundle import CSV_NAME, ECONOMICS_NAME, run_dir
from gpubench_nb.protocol.lock import LockRecord
from gpubench_nb.protocol.records import (
    PHASES,
    EconomicsRecord,
    EnvironmentRecord,
    OfferEconomics,
    read_economics,
    read_environment,
    read_run,
)
from gpubench_nb.protocol.yamlio import parse_yaml
from gpubench_nb.report.conditions import run_conditions
from gpubench_nb.report.stats import Summary, summarise

# R2.1: bundles are merged only when these are equal (or the user says otherwise, visibly).
COMPARED_FIELDS: tuple[str, ...] = (
    "corpus_revision",
    "model_revision",
    "tokenizer_revision",
    "timer_scope",
)


@dataclass(frozen=True)
class Bundle:
    """One bundle as the report reads it: its files, parsed, and its rows, typed (R5.6)."""

    path: Path
    label: str
    lock: LockRecord  # empty when the bundle has none
    environment: EnvironmentRecord
    economics: EconomicsRecord | None  # None: 30_economics never ran in this bundle
    rows: list[dict[str, Any]] = field(hash=False)

    def attribution(self, offer: OfferEconomics) -> Attribution:
        """Whether ``offer`` earned this bundle's cost per accepted corpus (R2.4, R5.7): as
        economics.json records it, else (recorded before attribution) the same rule applied."""
        if offer.attribution is not None:
            where = f"offers[{offer.offer_id}].attribution"
            return Attribution.from_dict(offer.attribution, str(self.path / ECONOMICS_NAME), where)
        declared = self.economics.declared_offer if self.economics is not None else None
        return attribute(
            Offer(
                id=offer.offer_id,
                provider="",
                gpu_model=offer.gpu_model,
                cpu_model=offer.cpu_model,
                gpus_per_lot=offer.gpus_per_lot,
                package_price_usd_minor={},
            ),
            offer.lots,
            recorded_hardware(self.rows, self.environment),
            declared.offer_id if declared is not None else None,
        )

    def declared(self, *keys: str) -> Any:
        """A value of the frozen declaration by key path, or None (lock absent or older)."""
        return self.lock.declared(*keys)

    def compared(self, name: str) -> str | None:
        """A COMPARED_FIELDS value: lock fingerprints first, else the CSV's one value."""
        if name == "timer_scope":
            return self.lock.declared("timing", "scope")
        value = (self.lock.fingerprints or {}).get(name)
        if value is None:
            seen = sorted({str(r[name]) for r in self.rows if r.get(name) is not None})
            value = " | ".join(seen) or None
        return value


def parse_bundle_dirs(value: str | os.PathLike[str] | Sequence[Any]) -> list[str]:
    """Bundle folders from a list, one path, or a list written as text (papermill ``-p``)."""
    if isinstance(value, str) and value.strip().startswith("["):
        value = parse_yaml(value, where=f"bundle_dirs {value!r}", error=BundleError)
    if isinstance(value, str | os.PathLike):
        value = [value]
    if not isinstance(value, Sequence) or not value:
        raise BundleError(f"bundle_dirs: expected one or more bundle folders, got {value!r}")
    return [os.fspath(v) for v in value]


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise BundleError(
            f"{path}: no resultats-bruts.csv; fix: run `gpubench-nb run` for this experiment "
            "first, the report reads the bundle's raw rows",
            rule="R5.6",
        )
    return results.read_rows(path)  # typed; empty cell = None, never 0 (R4.3)


def _with_run_files(bundle_dir: Path, row: dict[str, Any]) -> dict[str, Any]:
    """Add run.json's error and truncation and checks.json's reference comparison to a row."""
    folder = run_dir(bundle_dir, str(row["variant_id"]), row["phase"], row["run_index"])
    run = read_run(folder)
    telemetry = run.gpu_telemetry if run else None
    checks = AcceptanceReport.read(folder)
    return {
        **row,
        **{name: getattr(run, name, None) for name in _RUN_KEYS},
        "out_of_memory": bool(run and run.out_of_memory),  # R5.8
        # what the GPU ran at during the timed pass (engine/clocks.py)
        "gpu_clock_flags": "; ".join(telemetry.flags) if telemetry and telemetry.flags else None,
        "energy_joules": telemetry.joules if telemetry else None,
        **{name: getattr(checks, name, None) for name in _CHECKS_KEYS},
        # load, busy processes, GPU processes, threads, clocks at that moment (R2.5)
        "conditions": run_conditions(run.data if run else None, row.get("notes")),
    }


# run.json's, as typed (tokens_processed where the backend counts them), and checks.json's
_RUN_KEYS = ("error", "truncated_texts", "dropped_tokens", "tokens_processed", "off_label_answers")
_CHECKS_KEYS = ("reference_value", "meets_threshold", "within_tolerance")


def _label(path: Path, lock: LockRecord, rows: list[dict[str, Any]]) -> str:
    experiment = lock.experiment_id or (rows[0]["experiment_id"] if rows else path.name)
    gpus = sorted({r["gpu_model"] for r in rows if r.get("gpu_model")})
    devices = sorted({r["device"] for r in rows if r.get("device")})
    return f"{experiment} · {' + '.join(gpus) or ' + '.join(devices) or 'device not recorded'}"


def _declared_order(lock: LockRecord) -> Any:
    """Sort key: variants as declared (not as drawn, R3.4), then load/cold/warm, then run."""
    declared = [v.get("id") for v in lock.declared("variants") or []]
    rank = {variant: i for i, variant in enumerate(declared)}
    phases = {phase: i for i, phase in enumerate(PHASES)}

    return lambda row: (
        rank.get(str(row["variant_id"]), len(rank)),
        str(row["variant_id"]),
        phases.get(row["phase"], len(phases)),
        row["run_index"] if isinstance(row.get("run_index"), int) else 0,
    )


def load_bundles(bundle_dirs: str | Sequence[Any], *, allow_mismatch: bool = False) -> list[Bundle]:
    """Read each bundle; refuse unlike bundles, naming the differing field (R2.1)."""
    bundles = []
    for raw in parse_bundle_dirs(bundle_dirs):
        path = Path(raw)
        if not path.is_dir():
            raise BundleError(
                f"{path}: not a bundle folder{where_relative(path)}; fix: pass "
                "outputs/<experiment_id>"
            )
        if any(path.resolve() == seen.resolve() for seen, _, _ in bundles):
            raise BundleError(f"{path}: passed twice; fix: name each bundle folder once")
        lock = LockRecord.read(path) or LockRecord()
        rows = [_with_run_files(path, r) for r in _read_rows(path / CSV_NAME)]
        bundles.append((path, lock, sorted(rows, key=_declared_order(lock))))
    labels = [_label(path, lock, rows) for path, lock, rows in bundles]
    # Two bundles of one experiment on one GPU model are told apart by their folder, then path.
    for part in (lambda p: p.name, str):
        labels = [
            f"{label} · {part(path)}" if labels.count(label) > 1 else label
            for label, (path, _, _) in zip(labels, bundles, strict=True)
        ]
    loaded = [
        Bundle(
            path=path,
            label=label,
            lock=lock,
            environment=read_environment(path),
            economics=read_economics(path),
            rows=[{**r, "bundle": label} for r in rows],
        )
        for label, (path, lock, rows) in zip(labels, bundles, strict=True)
    ]
    problems = comparability_problems(loaded)
    if problems and not allow_mismatch:
        raise BundleError(
            f"bundles cannot be merged: {'; '.join(problems)}. Fix: compare bundles of the same "
            "corpus, model, tokenizer and timer scope, or pass allow_mismatch=True (CLI "
            "--allow-mismatch); the report then prints the difference",
            rule="R2.1",
        )
    return loaded


def comparability_problems(bundles: Sequence[Bundle]) -> list[str]:
    """One sentence per COMPARED_FIELDS entry on which the bundles differ (R2.1)."""
    problems = []
    for name in COMPARED_FIELDS:
        values = [b.compared(name) for b in bundles]
        if len(set(values)) > 1:
            listing = ", ".join(f"{b.path} has {v!r}" for b, v in zip(bundles, values, strict=True))
            problems.append(f"{name} differs ({listing})")
    return problems


def summary_of(bundles: Sequence[Bundle]) -> Summary:
    """The report's one summary over every raw row of every bundle (report.stats)."""
    return summarise([row for bundle in bundles for row in bundle.rows])
