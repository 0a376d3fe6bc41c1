"""The rental ledger: distinct corpora accepted on one rented machine in one package (R5.3, R5.5),
never extrapolated (a running window says "so far")."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from gpubench_nb import formats
from gpubench_nb.economics.attribution import attribute, recorded_hardware
from gpubench_nb.economics.offers import (
    REAL_QUOTE_HOWTO,
    ROUNDING_RULE,
    Offer,
    cost_per_accepted_usd_minor,
    load_offers,
    package_quote,
    resolve_offer,
)
from gpubench_nb.errors import EconomicsError, GpubenchError
from gpubench_nb.protocol.audit import kept_corpus, seal_problems
from gpubench_nb.protocol.bundle import (
    CSV_NAME,
    ENVIRONMENT_NAME,
    MANIFEST_NAME,
    run_dir,
)
from gpubench_nb.protocol.clock import parse_utc, utc_moment, utc_text
from gpubench_nb.protocol.fingerprint import sha256_file
from gpubench_nb.protocol.lock import LockRecord, canonical_sha256
from gpubench_nb.protocol.outputs import check_output
from gpubench_nb.protocol.quality import variant_acceptance
from gpubench_nb.protocol.records import (
    FORMAT_VERSION,
    MEASURED_PHASES,
    EnvironmentRecord,
    Record,
    read_environment,
    read_json,
    read_run,
)
from gpubench_nb.protocol.results import read_rows

LEDGER_SEAL = "ledger_sha256"


def _flat(text: object) -> str:  # a message on one line, whatever the library wrote
    return " ".join(str(text).split())


def _first3(problems: Sequence[object]) -> str:
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    return "; ".join(map(_flat, problems[:3])) + more


def parse_start(text: str) -> datetime:
    """The package's ``--start`` (UTC text) as an aware UTC datetime (protocol.clock)."""
    try:
        return parse_utc(text)
    except ValueError:
        raise EconomicsError(
            f"--start: not a date, got {text!r}; fix: write 2026-12-01 or 2026-12-01T09:00:00Z "
            "(UTC), the moment the package started",
            rule="R5.3",
        ) from None


@dataclass(frozen=True, kw_only=True)
class Machine(Record):
    """The rented machine: its host name and GPU UUIDs, and where they were read."""

    hostname: str | None = None
    gpu_uuids: tuple[str, ...] = ()
    source: str = ""


def machine_from(identifiers: Sequence[str]) -> Machine:
    """``--machine`` values: ``GPU-…`` are GPU UUIDs, anything else the host name."""
    uuids = sorted(i for i in identifiers if i.startswith("GPU-"))
    hosts = [i for i in identifiers if not i.startswith("GPU-")]
    if len(hosts) > 1:
        raise EconomicsError(
            f"--machine: one host name at most, got {hosts}; fix: name the rented machine once",
            rule="R5.3",
        )
    return Machine(hostname=hosts[0] if hosts else None, gpu_uuids=tuple(uuids), source="--machine")


def machine_of(bundle: Path) -> Machine | None:
    """The machine a bundle recorded (every GPU it saw, used or not), or None if none."""
    try:
        env = read_environment(bundle)
    except GpubenchError:
        return None  # _examine names the unreadable file when it reaches this bundle
    uuids = tuple(sorted({*env.gpu_uuids, *env.visible_gpu_uuids}))
    if not env.hostname and not uuids:
        return None
    return Machine(hostname=env.hostname, gpu_uuids=uuids, source=f"the first bundle, {bundle}")


def _same_machine(machine: Machine, env: EnvironmentRecord) -> str | None:
    """None when the bundle ran on ``machine``; else why not, in words."""
    used, host = set(env.gpu_uuids), env.hostname
    foreign = ", ".join(sorted(used - set(machine.gpu_uuids)))
    if machine.gpu_uuids and used:
        return (
            f"another machine: GPU(s) {foreign} are not the rented machine's" if foreign else None
        )
    if machine.hostname and host:
        other = f"another machine: host {host!r}, not {machine.hostname!r}"
        return None if host == machine.hostname else other
    return "machine not recorded: environment.json has neither GPU UUIDs nor a host name to match"


def _times(
    bundle: Path, rows: Sequence[Mapping[str, Any]], env: EnvironmentRecord
) -> tuple[list[datetime], list[str]]:
    """Every recorded moment of the bundle, and why one that should be there cannot be read."""
    stamps: list[tuple[str, Any]] = [(f"{ENVIRONMENT_NAME} captured_utc", env.captured_utc)]
    unreadable = []
    for row in rows:
        if row["phase"] in MEASURED_PHASES and isinstance(row.get("run_index"), int):
            folder = run_dir(bundle, str(row["variant_id"]), row["phase"], row["run_index"])
            where = f"{folder.relative_to(bundle)}/run.json"
            try:
                record = read_run(folder)
            except GpubenchError as exc:
                unreadable.append(f"{where}: {_flat(exc)}")
                continue
            moments = ("started_utc", "finished_utc") if record else ()
            stamps += [(f"{where} {m}", getattr(record, m)) for m in moments] or [(where, None)]
    found = []
    for where, stamp in stamps:
        try:
            found.append(parse_utc(stamp if isinstance(stamp, str) else ""))
        except ValueError:
            unreadable.append(f"{where}: {'missing' if stamp is None else repr(stamp)}")
    return found, unreadable


def sealed_bundle_problems(path: Path) -> str | None:
    """What check-bundle's seal stage finds in the bundle at ``path`` (three at most), or None."""
    try:
        problems = seal_problems(path)
    except GpubenchError as exc:  # no manifest, no folder
        problems = [str(exc)]
    return _first3(problems) if problems else None


def _corpus_identity(bundle: Path, lock: LockRecord) -> str:
    """The bundle's corpus identity (R5.3): its lock's, else (an older lock) its kept corpus's."""
    frozen = lock.corpus_identity
    if isinstance(frozen, str) and frozen:
        return frozen
    return kept_corpus(bundle, dict(lock.declaration or {})).identity


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
    """`gpubench-nb ledger`: the sealed ledger, written to ``out`` (guarded, R5.6), as ``fmt``."""
    if out:
        out = check_output(
            Path(out),
            option="--out",
            inputs=[Path(offers_path), *map(Path, bundle_dirs)],
            instead="name a new file outside every bundle, e.g. --out "
            f"{Path.cwd() / 'ledger.json'}",
        )
    there = read_json(out, error=None) if out and Path(out).exists() else {LEDGER_SEAL: None}
    if not (isinstance(there, dict) and LEDGER_SEAL in there):
        raise EconomicsError(
            f"--out {out} exists and is not a ledger gpubench-nb wrote: writing would destroy it. "
            "Fix: name a new file (an older ledger there is replaced)",
            rule="R5.6",
        )
    if not Path(offers_path).exists():  # a typed path is read from the current folder
        raise EconomicsError(
            f"--offers {offers_path}: no such file, looked for at {Path(offers_path).resolve()} "
            "(a path you type is relative to the current folder); pass --offers with your "
            "offers table's path",
            rule="R5.1",
        )
    offer = resolve_offer(load_offers(offers_path), offer_id, offers_path)
    machine = machine_from(machines) if machines else None
    ledger = build_ledger(offer, days, lots, parse_start(start), bundle_dirs, machine=machine)
    ledger["offers_file"] = str(Path(offers_path).resolve())  # where its price is re-read
    stamped = {
        **ledger,
        "offers_sha256": sha256_file(offers_path),
        "format_version": FORMAT_VERSION,
    }
    ledger = seal_ledger(stamped)  # the seal covers the version too (R1.3)
    if out:
        LedgerRecord.save(out, ledger)
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
    end, now = start + timedelta(days=days), now or utc_moment()
    machine = machine or next((m for m in map(machine_of, paths) if m is not None), None)
    if machine is None:
        raise EconomicsError(
            "no bundle recorded its machine (environment.json: hostname, gpu_uuids); fix: "
            "name the rented machine with --machine HOST or --machine GPU-<uuid>",
            rule="R2.4",
        )
    kept, left_out, revisions = [], [], {}
    for path in paths:
        entry = _examine(path, offer, lots, machine, start, end)
        if isinstance(entry, str):
            left_out.append({"bundle": str(path), "reason": entry})
            continue
        kept.append(entry)
        if entry["accepted"]:
            revisions.setdefault(entry["corpus_identity"], []).append(str(path))
    quote = package_quote(offer, days, lots=lots, accepted_results=len(revisions))
    ledger = {
        "offer_id": offer.id,
        "gpu_model": offer.gpu_model,
        "gpus_per_lot": offer.gpus_per_lot,
        "days": days,
        "lots": lots,
        "window": {
            "start_utc": utc_text(start),
            "end_utc": utc_text(end),
            "status": "not begun" if now < start else "so far" if now < end else "closed",
            "as_of_utc": utc_text(now),
        },
        "machine": machine.to_dict(),
        "package_total_usd_minor": quote.package_total_usd_minor,
        "placeholder": offer.placeholder,  # invented example prices, not a quote
        "accepted_corpora": len(revisions),
        "cost_per_accepted_usd_minor": quote.cost_per_accepted_usd_minor,
        "rounding_rule": ROUNDING_RULE,
        "accepted_corpora_counted_by": "corpus_identity",
        "accepted_corpus_identities": [
            {"corpus_identity": ident, "bundles": where} for ident, where in revisions.items()
        ],
        "kept": kept,
        "left_out": left_out,
    }
    return {**ledger, "statement": _statement(ledger)}


def _statement(ledger: Mapping[str, Any]) -> str:
    """The ledger's one sentence, from its offer, package, count, cost and window status."""
    count, cost = ledger["accepted_corpora"], ledger["cost_per_accepted_usd_minor"]
    mark = bool(ledger.get("placeholder"))
    so_far = {
        "so far": " so far (the package window is still running)",
        "not begun": " (the package window has not begun yet)",
    }.get(ledger["window"]["status"], "")
    total = formats.price(ledger["package_total_usd_minor"], placeholder=mark)
    package = f"{ledger['offer_id']}, {ledger['days']} days × {ledger['lots']} lot(s): {total}"
    howto = f" The prices are invented examples: {REAL_QUOTE_HOWTO}." if mark else ""
    if cost is None:
        return (
            f"{package}; {count} distinct corpora accepted{so_far}: no accepted corpus, so no "
            f"cost per accepted corpus (R5.5).{howto}"
        )
    corpora = "corpus" if count == 1 else "corpora"
    return (
        f"{package}; {count} distinct accepted {corpora}{so_far}, so "
        f"{formats.price(cost, placeholder=mark)} per accepted corpus (the same "
        f"arithmetic as calcul-forfaits --accepted-results, R5.3).{howto}"
    )


def _examine(
    path: Path, offer: Offer, lots: int, machine: Machine, start: datetime, end: datetime
) -> str | dict[str, Any]:
    """The bundle's ledger entry, or why it is left out: its seal must verify first (R5.6)."""
    if not (path / CSV_NAME).is_file():
        return f"no {CSV_NAME}: nothing was recorded in this bundle"
    if not (path / MANIFEST_NAME).is_file():
        return (
            f"no {MANIFEST_NAME}: not a finished bundle, so nothing in it is sealed; not counted "
            "(R5.6). Fix: finish it (rerun the same gpubench-nb command)"
        )
    if problems := sealed_bundle_problems(path):
        return f"its seal does not verify (check-bundle fails), not counted (R5.6): {problems}"
    try:
        rows, env = read_rows(path / CSV_NAME), read_environment(path)
    except GpubenchError as exc:  # its message names the file
        return f"unreadable: {_flat(exc)}"
    owner = attribute(offer, lots, recorded_hardware(rows, env), offer.id)
    if elsewhere := _same_machine(machine, env) or (None if owner.attributable else owner.reason):
        return elsewhere
    moments, unreadable = _times(path, rows, env)
    if unreadable:
        return (
            "recorded time(s) that cannot be read, so the bundle cannot be placed in the "
            f"package window: {_first3(unreadable)}"
        )
    first, last = min(moments), max(moments)
    if first < start or last >= end:
        return (
            f"outside the package window [{utc_text(start)}, {utc_text(end)}): made from "
            f"{utc_text(first)} to {utc_text(last)}"
        )
    try:
        lock = LockRecord.read(path) or LockRecord()
        identity = _corpus_identity(path, lock)
    except (GpubenchError, KeyError, TypeError) as exc:
        return f"corpus identity cannot be read: {_flat(exc)}"
    accepted = [v for v, e in variant_acceptance(rows).items() if e.accepted]
    return {
        "bundle": str(path),
        "corpus_identity": identity,
        "corpus_revision": lock.corpus_revision,
        "accepted": bool(accepted),
        "accepted_variants": accepted,
        "first_utc": utc_text(first),
        "last_utc": utc_text(last),
        "note": owner.lot_note
        or ("" if accepted else "corpus not accepted in this bundle: not counted (R1.5)"),
    }


def format_ledger(ledger: Mapping[str, Any], fmt: str) -> str:
    """The ledger as a readable table, one CSV row per bundle, or JSON."""
    if fmt == "json":
        return json.dumps(ledger, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
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
        names = [*common, "bundle", "kept", "corpus_identity", "accepted", "reason"]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, names, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        for e in ledger["kept"]:
            flags = {"kept": "true", "accepted": str(e["accepted"]).lower(), "reason": e["note"]}
            writer.writerow({**common, **e, **flags})
        for e in ledger["left_out"]:
            writer.writerow({**common, **e, "kept": "false"})
        return buffer.getvalue()
    if fmt != "table":
        raise EconomicsError(f"--format must be one of table, csv, json, got {fmt!r}")
    window, machine = ledger["window"], ledger["machine"]
    mark, total = bool(ledger.get("placeholder")), ledger["package_total_usd_minor"]
    cost = ledger["cost_per_accepted_usd_minor"]
    lines = [
        ledger["statement"],
        f"window      [{window['start_utc']}, {window['end_utc']}) {window['status']}"
        f" (as of {window['as_of_utc']})",
        f"machine     host {machine['hostname'] or '—'}; GPUs "
        f"{', '.join(machine['gpu_uuids']) or '—'} (from {machine['source']})",
        f"package     {total} cents ({formats.price(total, placeholder=mark)})",
        f"accepted    {ledger['accepted_corpora']} distinct corpora (repeats and re-runs of one "
        "corpus count once, R5.3)",
        f"cost        {cost} cents ({formats.price(cost, placeholder=mark)}) per accepted corpus"
        if cost is not None
        else "cost        (empty: no accepted corpus, R5.5)",
        "",
        "kept (on this machine and hardware, in the window):" if ledger["kept"] else "kept: none",
    ]
    for entry in ledger["kept"]:
        state = "accepted" if entry["accepted"] else "not accepted"
        note = f"  ({entry['note']})" if entry["note"] else ""
        lines.append(f"  {entry['bundle']}  corpus {entry['corpus_identity'][:12]}  {state}{note}")
    lines.append("left out:" if ledger["left_out"] else "left out: none")
    lines += [f"  {entry['bundle']}  {entry['reason']}" for entry in ledger["left_out"]]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True)
class LedgerRecord(Record):
    """A ledger written by ``gpubench-nb ledger --out`` (R5.3): its counts are checked against
    its seal, its offers table and itself by ``ledger_problems``."""

    NAME = "ledger"
    RULE = "R5.3"
    ERROR = EconomicsError
    FIX = "write one with gpubench-nb ledger ... --out ledger.json"
    offer_id: Any
    accepted_corpora: Any
    package_total_usd_minor: Any
    window: Any
    left_out: Any


def read_ledger(path: str | Path) -> dict[str, Any]:
    """A ledger written by ``gpubench-nb ledger --out``, refused unless it is sound (R5.3)."""
    try:
        record, why = LedgerRecord.load(path), "missing"
    except EconomicsError as exc:
        record, why = None, str(exc).removeprefix("R5.3: ")
    if record is None:
        raise EconomicsError(
            f"{path}: not a ledger written by `gpubench-nb ledger --out` ({why}); "
            f"fix: {LedgerRecord.FIX}",
            rule="R5.3",
        )
    data = record.to_dict()
    if problems := ledger_problems(data):
        raise EconomicsError(
            f"{path}: the ledger is not consistent with itself, so it was edited after "
            f"`gpubench-nb ledger` wrote it: {'; '.join(problems)}. Fix: write it again with "
            "gpubench-nb ledger ... --out (it re-derives every count from the bundles)",
            rule="R5.3",
        )
    # R5.6: each bundle it counts must still be there and sealed; one that is not is marked
    kept = [e for e in data.get("kept") or [] if isinstance(e, dict)]
    found = [(e.get("bundle"), sealed_bundle_problems(Path(str(e.get("bundle"))))) for e in kept]
    return {**data, "unverified": [f"{bundle}: {why}" for bundle, why in found if why]}


def seal_ledger(ledger: Mapping[str, Any]) -> dict[str, Any]:
    """``ledger`` sealed as a lock is (R1.3): ``ledger_sha256`` covers every other field."""
    body = {k: v for k, v in ledger.items() if k != LEDGER_SEAL}
    return {**body, LEDGER_SEAL: canonical_sha256(body)}


def _price_problems(data: Mapping[str, Any]) -> list[str]:
    """The price and placeholder mark against the very offers table that gave them (R5.1)."""
    path = Path(str(data.get("offers_file")))
    try:
        if sha256_file(path) != data.get("offers_sha256"):
            return []  # moved or edited since: the seal alone vouches for the price
        offer = resolve_offer(load_offers(path), str(data["offer_id"]))
        total = package_quote(offer, data["days"], lots=data["lots"]).package_total_usd_minor
    except (OSError, EconomicsError):
        return []
    if (total, offer.placeholder) != (data["package_total_usd_minor"], data.get("placeholder")):
        return [f"its price or placeholder mark is not the one {path} gives ({total} cents)"]
    return []


def ledger_problems(data: Mapping[str, Any]) -> list[str]:
    """Each way the ledger disagrees with its seal, its offers table, or itself (empty: sound).
    Only a ledger older than both the seal and the placeholder mark may lack the seal."""
    old = LEDGER_SEAL not in data and "placeholder" not in data
    sealed = old or data.get(LEDGER_SEAL) == seal_ledger(data)[LEDGER_SEAL]
    problems = [] if sealed else [f"its {LEDGER_SEAL} is missing or does not match its content"]
    try:
        count, total = data["accepted_corpora"], data["package_total_usd_minor"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (count, total)):
            return ["accepted_corpora and package_total_usd_minor must be whole numbers"]
        listed, key = data.get("accepted_corpus_identities"), "corpus_identity"
        if listed is None:  # a ledger written before corpus identities (counted by revision)
            listed, key = data.get("accepted_corpus_revisions") or [], "corpus_revision"
        distinct = {entry[key] for entry in listed}
        if count != len(distinct) or len(distinct) != len(listed):
            problems.append(
                f"accepted_corpora is {count} but {len(distinct)} distinct accepted corpora "
                "are listed"
            )
        counted = {e.get(key) for e in data.get("kept") or [] if e.get("accepted") and e.get(key)}
        if data.get("kept") is not None and counted != distinct:
            problems.append("the accepted corpora listed differ from the accepted bundles kept")
        cost = cost_per_accepted_usd_minor(total, count)
        if data.get("cost_per_accepted_usd_minor") != cost:
            problems.append(
                f"cost_per_accepted_usd_minor is {data.get('cost_per_accepted_usd_minor')}, "
                f"the package total over {count} gives {cost}"
            )
        if data.get("statement") != _statement({**data, "cost_per_accepted_usd_minor": cost}):
            problems.append("its statement is not the one its numbers give")
        return problems + _price_problems(data)
    except (KeyError, TypeError, AttributeError, EconomicsError) as exc:
        return [*problems, f"a part is missing or malformed ({exc!r})"]
