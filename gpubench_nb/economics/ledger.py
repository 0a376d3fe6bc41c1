"""The rental ledger: distinct corpora accepted on one rented machine in one package (R5.3, R5.5).

The count behind ``calcul-forfaits --accepted-results``: bundles made on the rented machine
(recorded GPU UUIDs, else host name, from environment.json) within the package window
``[start, start + days)``, on the offer's hardware (economics.attribution), each distinct
accepted corpus revision counted once. Nothing is estimated or extrapolated: a window still
running is reported "so far".
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from gpubench_nb import formats
from gpubench_nb.atomic import write_json_atomic
from gpubench_nb.economics.attribution import attribute, recorded_hardware
from gpubench_nb.economics.offers import (
    REAL_QUOTE_HOWTO,
    ROUNDING_RULE,
    Offer,
    load_offers,
    package_quote,
    resolve_offer,
)
from gpubench_nb.errors import EconomicsError, GpubenchError
from gpubench_nb.protocol.bundle import CSV_NAME, LOCK_NAME, run_dir
from gpubench_nb.protocol.clock import utc_text
from gpubench_nb.protocol.quality import variant_acceptance
from gpubench_nb.protocol.records import (
    MEASURED_PHASES,
    EnvironmentRecord,
    read_environment,
    read_run,
)
from gpubench_nb.protocol.results import read_rows

FORMATS = ("table", "csv", "json")


def parse_utc(text: str, what: str = "--start") -> datetime:
    """``2026-12-01`` or ``2026-12-01T09:00:00Z`` as an aware UTC datetime (naive = UTC)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise EconomicsError(
            f"{what}: not a date, got {text!r}; fix: write 2026-12-01 or 2026-12-01T09:00:00Z "
            "(UTC), the moment the package started",
            rule="R5.3",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


@dataclass(frozen=True)
class Machine:
    """The rented machine: its host name and GPU UUIDs, and where they were read."""

    hostname: str | None
    gpu_uuids: frozenset[str]
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname,
            "gpu_uuids": sorted(self.gpu_uuids),
            "source": self.source,
        }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError):
        return None


def machine_from(identifiers: Sequence[str]) -> Machine:
    """``--machine`` values: ``GPU-…`` are GPU UUIDs, anything else the host name."""
    uuids = frozenset(i for i in identifiers if i.startswith("GPU-"))
    hosts = [i for i in identifiers if not i.startswith("GPU-")]
    if len(hosts) > 1:
        raise EconomicsError(
            f"--machine: one host name at most, got {hosts}; fix: name the rented machine once",
            rule="R5.3",
        )
    return Machine(hosts[0] if hosts else None, uuids, "--machine")


def machine_of(bundle: Path) -> Machine | None:
    """The machine a bundle recorded (every GPU it saw, used or not), or None if none."""
    try:
        env = read_environment(bundle)
    except GpubenchError:
        return None  # _examine names the unreadable file when it reaches this bundle
    uuids = frozenset(env.gpu_uuids) | frozenset(env.visible_gpu_uuids)
    if not env.hostname and not uuids:
        return None
    return Machine(env.hostname, uuids, f"the first bundle, {bundle}")


def _same_machine(machine: Machine, env: EnvironmentRecord) -> str | None:
    """None when the bundle ran on ``machine``; else why not, in words."""
    used = frozenset(env.gpu_uuids)
    if machine.gpu_uuids and used:
        if used <= machine.gpu_uuids:
            return None
        foreign = ", ".join(sorted(used - machine.gpu_uuids))
        return f"another machine: GPU(s) {foreign} are not the rented machine's"
    host = env.hostname
    if machine.hostname and host:
        return (
            None
            if host == machine.hostname
            else f"another machine: host {host!r}, not {machine.hostname!r}"
        )
    return "machine not recorded: environment.json has neither GPU UUIDs nor a host name to match"


def _times(
    bundle: Path, rows: Sequence[Mapping[str, Any]], env: EnvironmentRecord
) -> list[datetime]:
    """Every recorded moment of the bundle: each run's start and finish, the environment capture."""
    stamps = [env.captured_utc]
    for row in rows:
        if row["phase"] in MEASURED_PHASES and isinstance(row.get("run_index"), int):
            record = read_run(
                run_dir(bundle, str(row["variant_id"]), row["phase"], row["run_index"])
            )
            if record is not None:
                stamps += [record.started_utc, record.finished_utc]
    found = []
    for stamp in stamps:
        if isinstance(stamp, str) and stamp:
            try:
                found.append(parse_utc(stamp, "recorded time"))
            except EconomicsError:
                continue
    return found


def _corpus_revision(bundle: Path, rows: Sequence[Mapping[str, Any]]) -> str | None:
    lock = _read_json(bundle / LOCK_NAME) or {}
    revision = (lock.get("fingerprints") or {}).get("corpus_revision")
    if revision:
        return revision
    seen = {r.get("corpus_revision") for r in rows} - {None, ""}
    return seen.pop() if len(seen) == 1 else None


def ledger_report(
    offers_path: str | Path,
    offer_id: str,
    *,
    days: int,
    lots: int,
    start: str,
    bundle_dirs: Sequence[str | Path],
    machines: Sequence[str] | None = None,
    fmt: str = "table",
    out: str | Path | None = None,
) -> str:
    """`gpubench-nb ledger`: the ledger of ``offer_id`` (or its unique prefix) from the offers
    table, for the package starting at ``start`` (UTC text), written as JSON to ``out`` when
    given (atomically, for ``report --ledger``), returned formatted as ``fmt``."""
    if not Path(offers_path).exists():  # a typed path is read from the current folder (issue 25)
        raise EconomicsError(
            f"--offers {offers_path}: no such file, looked for at {Path(offers_path).resolve()} "
            "(a path you type is relative to the current folder); pass --offers with your "
            "offers table's path",
            rule="R5.1",
        )
    offer = resolve_offer(load_offers(offers_path), offer_id)
    ledger = build_ledger(
        offer,
        days,
        lots,
        parse_utc(start),
        bundle_dirs,
        machine=machine_from(machines) if machines else None,
    )
    if out:
        write_json_atomic(Path(out), ledger)
    return format_ledger(ledger, fmt)


def build_ledger(
    offer: Offer,
    days: int,
    lots: int,
    start: datetime,
    bundle_dirs: Sequence[str | Path],
    *,
    machine: Machine | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Count the distinct corpora accepted on the rented machine within the package window."""
    if not bundle_dirs:
        raise EconomicsError("no bundle given; fix: pass the bundle folders made on the rental")
    paths = [Path(d) for d in bundle_dirs]
    for path in paths:
        if not path.is_dir():
            raise EconomicsError(f"{path}: not a bundle folder; fix: pass outputs/<experiment_id>")
    if len({p.resolve() for p in paths}) != len(paths):
        raise EconomicsError("a bundle folder is passed twice; fix: name each bundle once")
    package_quote(offer, days, lots=lots)  # days and lots checked before any bundle is read
    end = start + timedelta(days=days)
    now = now or datetime.now(timezone.utc)
    if machine is None:
        machine = next((m for m in map(machine_of, paths) if m is not None), None)
        if machine is None:
            raise EconomicsError(
                "no bundle recorded its machine (environment.json: hostname, gpu_uuids); fix: "
                "name the rented machine with --machine HOST or --machine GPU-<uuid>",
                rule="R2.4",
            )
    kept, left_out = [], []
    revisions: dict[str, list[str]] = {}
    for path in paths:
        reason, entry = _examine(path, offer, lots, machine, start, end)
        if reason is not None:
            left_out.append({"bundle": str(path), "reason": reason})
            continue
        kept.append(entry)
        if entry["accepted"]:
            revisions.setdefault(entry["corpus_revision"], []).append(str(path))
    count = len(revisions)
    quote = package_quote(offer, days, lots=lots, accepted_results=count)
    running = now < end
    status = "so far" if running else "closed"
    return {
        "offer_id": offer.id,
        "gpu_model": offer.gpu_model,
        "gpus_per_lot": offer.gpus_per_lot,
        "days": days,
        "lots": lots,
        "window": {
            "start_utc": utc_text(start),
            "end_utc": utc_text(end),
            "status": status,
            "as_of_utc": utc_text(now),
        },
        "machine": machine.to_dict(),
        "package_total_usd_minor": quote.package_total_usd_minor,
        "placeholder": offer.placeholder,  # invented example prices, not a quote (issue 24 §3)
        "accepted_corpora": count,
        "cost_per_accepted_usd_minor": quote.cost_per_accepted_usd_minor,
        "rounding_rule": ROUNDING_RULE,
        "accepted_corpus_revisions": [
            {"corpus_revision": rev, "bundles": where} for rev, where in revisions.items()
        ],
        "kept": kept,
        "left_out": left_out,
        "statement": _statement(
            quote.package_total_usd_minor,
            count,
            quote.cost_per_accepted_usd_minor,
            status,
            offer.id,
            days,
            lots,
            offer.placeholder,
        ),
    }


def _statement(
    total: int,
    count: int,
    cost: int | None,
    status: str,
    offer_id: str,
    days: int,
    lots: int,
    placeholder: bool = False,
) -> str:
    so_far = " so far (the package window is still running)" if status == "so far" else ""
    package = (
        f"{offer_id}, {days} days × {lots} lot(s): {formats.price(total, placeholder=placeholder)}"
    )
    howto = f" The prices are invented examples: {REAL_QUOTE_HOWTO}." if placeholder else ""
    if cost is None:
        return (
            f"{package}; {count} distinct corpora accepted{so_far}: no accepted corpus, so no "
            f"cost per accepted corpus (R5.5).{howto}"
        )
    corpora = "corpus" if count == 1 else "corpora"
    return (
        f"{package}; {count} distinct accepted {corpora}{so_far}, so "
        f"{formats.price(cost, placeholder=placeholder)} per accepted corpus (the same "
        f"arithmetic as calcul-forfaits --accepted-results, R5.3).{howto}"
    )


def _examine(
    path: Path, offer: Offer, lots: int, machine: Machine, start: datetime, end: datetime
) -> tuple[str | None, dict[str, Any]]:
    """(why the bundle is left out, or None; its entry when kept)."""
    if not (path / CSV_NAME).is_file():
        return f"no {CSV_NAME}: nothing was recorded in this bundle", {}
    try:
        rows = read_rows(path / CSV_NAME)
    except GpubenchError as exc:
        return f"unreadable {CSV_NAME}: {' '.join(str(exc).split())}", {}
    try:
        env = read_environment(path)
    except GpubenchError as exc:
        return f"unreadable environment.json: {' '.join(str(exc).split())}", {}
    elsewhere = _same_machine(machine, env)
    if elsewhere is not None:
        return elsewhere, {}
    owner = attribute(
        offer_id=offer.id,
        offer_gpu_model=offer.gpu_model,
        gpus_per_lot=offer.gpus_per_lot,
        lots=lots,
        hardware=recorded_hardware(rows, env.to_dict()),
        declared_offer_id=offer.id,
    )
    if not owner.attributable:
        return owner.reason, {}
    try:
        moments = _times(path, rows, env)
    except GpubenchError as exc:
        return f"unreadable run record: {' '.join(str(exc).split())}", {}
    if not moments:
        return (
            "no recorded time (run.json started_utc/finished_utc, environment.json captured_utc)",
            {},
        )
    first, last = min(moments), max(moments)
    if first < start or last >= end:
        return (
            f"outside the package window [{utc_text(start)}, {utc_text(end)}): made from "
            f"{utc_text(first)} to {utc_text(last)}"
        ), {}
    revision = _corpus_revision(path, rows)
    accepted_variants = [v for v, e in variant_acceptance(rows).items() if e.accepted]
    if revision is None:
        return "corpus revision not recorded (protocol.lock.json fingerprints)", {}
    return None, {
        "bundle": str(path),
        "corpus_revision": revision,
        "accepted": bool(accepted_variants),
        "accepted_variants": accepted_variants,
        "first_utc": utc_text(first),
        "last_utc": utc_text(last),
        "note": owner.lot_note
        or ("" if accepted_variants else "corpus not accepted in this bundle: not counted (R1.5)"),
    }


def format_ledger(ledger: Mapping[str, Any], fmt: str) -> str:
    """The ledger as a readable table, one CSV row per bundle, or JSON."""
    if fmt == "json":
        return json.dumps(ledger, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return _csv(ledger)
    if fmt != "table":
        raise EconomicsError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    window, total = ledger["window"], ledger["package_total_usd_minor"]
    mark = bool(ledger.get("placeholder"))  # ledgers written before issue 24 have no such key
    lines = [
        ledger["statement"],
        f"window      [{window['start_utc']}, {window['end_utc']}) {window['status']}"
        f" (as of {window['as_of_utc']})",
        f"machine     host {ledger['machine']['hostname'] or '—'}; GPUs "
        f"{', '.join(ledger['machine']['gpu_uuids']) or '—'} (from {ledger['machine']['source']})",
        f"package     {total} cents ({formats.price(total, placeholder=mark)})",
        f"accepted    {ledger['accepted_corpora']} distinct corpora (repeats and re-runs of one "
        "corpus count once, R5.3)",
        "cost        "
        + (
            f"{ledger['cost_per_accepted_usd_minor']} cents "
            f"({formats.price(ledger['cost_per_accepted_usd_minor'], placeholder=mark)}) per "
            "accepted corpus"
            if ledger["cost_per_accepted_usd_minor"] is not None
            else "(empty: no accepted corpus, R5.5)"
        ),
        "",
        "kept (on this machine and hardware, in the window):" if ledger["kept"] else "kept: none",
    ]
    for entry in ledger["kept"]:
        state = "accepted" if entry["accepted"] else "not accepted"
        lines.append(
            f"  {entry['bundle']}  corpus {entry['corpus_revision'][:12]}  {state}"
            + (f"  ({entry['note']})" if entry["note"] else "")
        )
    lines.append("left out:" if ledger["left_out"] else "left out: none")
    lines += [f"  {entry['bundle']}  {entry['reason']}" for entry in ledger["left_out"]]
    return "\n".join(lines) + "\n"


def _csv(ledger: Mapping[str, Any]) -> str:
    names = [
        "offer_id", "days", "lots", "window_status", "package_total_usd_minor", "placeholder",
        "accepted_corpora", "cost_per_accepted_usd_minor", "bundle", "kept",
        "corpus_revision", "accepted", "reason",
    ]  # fmt: skip
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    common = {
        "offer_id": ledger["offer_id"],
        "days": ledger["days"],
        "lots": ledger["lots"],
        "window_status": ledger["window"]["status"],
        "package_total_usd_minor": ledger["package_total_usd_minor"],
        "placeholder": str(bool(ledger.get("placeholder"))).lower(),
        "accepted_corpora": ledger["accepted_corpora"],
        "cost_per_accepted_usd_minor": ledger["cost_per_accepted_usd_minor"] or "",
    }
    for entry in ledger["kept"]:
        writer.writerow(
            {
                **common,
                "bundle": entry["bundle"],
                "kept": "true",
                "corpus_revision": entry["corpus_revision"],
                "accepted": str(entry["accepted"]).lower(),
                "reason": entry["note"],
            }
        )
    for entry in ledger["left_out"]:
        writer.writerow(
            {**common, "bundle": entry["bundle"], "kept": "false", "reason": entry["reason"]}
        )
    return buffer.getvalue()


def read_ledger(path: str | Path) -> dict[str, Any]:
    """A ledger written by ``gpubench-nb ledger --out``; EconomicsError when unusable."""
    path = Path(path)
    data = _read_json(path)
    needed = ("offer_id", "accepted_corpora", "package_total_usd_minor", "window", "left_out")
    if not isinstance(data, dict) or any(k not in data for k in needed):
        raise EconomicsError(
            f"{path}: not a ledger written by `gpubench-nb ledger --out` (missing or unreadable); "
            "fix: write one with gpubench-nb ledger ... --out ledger.json",
            rule="R5.3",
        )
    return data
