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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from gpubench_nb import formats
from gpubench_nb.atomic import write_json_atomic
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
    LOCK_NAME,
    MANIFEST_NAME,
    run_dir,
)
from gpubench_nb.protocol.clock import parse_utc, utc_moment, utc_text
from gpubench_nb.protocol.fingerprint import sha256_file
from gpubench_nb.protocol.lock import canonical_sha256
from gpubench_nb.protocol.outputs import check_output_file
from gpubench_nb.protocol.quality import variant_acceptance
from gpubench_nb.protocol.records import (
    MEASURED_PHASES,
    EnvironmentRecord,
    read_environment,
    read_json,
    read_run,
)
from gpubench_nb.protocol.results import read_rows

FORMATS = ("table", "csv", "json")


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
) -> tuple[list[datetime], list[str]]:
    """Every recorded moment of the bundle (each run's start and finish, the environment
    capture), and the reasons a moment that should be there cannot be read:
    a missing or malformed time is a stated reason, never silently skipped."""
    stamps: list[tuple[str, Any]] = [(f"{ENVIRONMENT_NAME} captured_utc", env.captured_utc)]
    unreadable = []
    for row in rows:
        if row["phase"] in MEASURED_PHASES and isinstance(row.get("run_index"), int):
            folder = run_dir(bundle, str(row["variant_id"]), row["phase"], row["run_index"])
            where = f"{folder.relative_to(bundle)}/run.json"
            try:
                record = read_run(folder)
            except GpubenchError as exc:
                unreadable.append(f"{where}: {' '.join(str(exc).split())}")
                continue
            if record is None:
                stamps.append((where, None))
                continue
            stamps += [
                (f"{where} started_utc", record.started_utc),
                (f"{where} finished_utc", record.finished_utc),
            ]
    found = []
    for where, stamp in stamps:
        try:
            found.append(parse_utc(stamp if isinstance(stamp, str) else ""))
        except ValueError:
            unreadable.append(f"{where}: {'missing' if stamp is None else repr(stamp)}")
    return found, unreadable


def _corpus_identity(bundle: Path, lock: Mapping[str, Any]) -> str:
    """What the bundle's corpus is (R5.3): the identity its lock froze, else (a bundle frozen
    before identities were recorded) the identity of its kept corpus copy, which the manifest
    check has just verified. Either way the same items in another order, or with IDs equal
    under NFC, are one corpus."""
    frozen = lock.get("corpus_identity")
    if isinstance(frozen, str) and frozen:
        return frozen
    return kept_corpus(bundle, lock["declaration"]).identity


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
    given (atomically, for ``report --ledger``), returned formatted as ``fmt``.

    ``out`` goes through the one output guard before anything is read (R5.6):
    never over the offers table or a file of a bundle, never into a bundle.
    """
    if out:
        out = check_output_file(
            Path(out),
            option="--out",
            inputs=[Path(offers_path), *map(Path, bundle_dirs)],
            instead="name a new file outside every bundle, e.g. --out "
            f"{Path.cwd() / 'ledger.json'}",
        )
    if not Path(offers_path).exists():  # a typed path is read from the current folder
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
        parse_start(start),
        bundle_dirs,
        machine=machine_from(machines) if machines else None,
    )
    offers = {"offers_file": str(Path(offers_path).resolve())}  # where its price is re-read
    ledger = seal_ledger({**ledger, **offers, "offers_sha256": sha256_file(offers_path)})
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
    now = now or utc_moment()
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
            revisions.setdefault(entry["corpus_identity"], []).append(str(path))
    count = len(revisions)
    quote = package_quote(offer, days, lots=lots, accepted_results=count)
    status = window_status(start, end, now)
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
        "placeholder": offer.placeholder,  # invented example prices, not a quote
        "accepted_corpora": count,
        "cost_per_accepted_usd_minor": quote.cost_per_accepted_usd_minor,
        "rounding_rule": ROUNDING_RULE,
        "accepted_corpora_counted_by": "corpus_identity",
        "accepted_corpus_identities": [
            {"corpus_identity": ident, "bundles": where} for ident, where in revisions.items()
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


def window_status(start: datetime, end: datetime, now: datetime) -> str:
    """``not begun`` before the start, ``so far`` while running, ``closed`` after the end."""
    if now < start:
        return "not begun"
    return "so far" if now < end else "closed"


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
    so_far = {
        "so far": " so far (the package window is still running)",
        "not begun": " (the package window has not begun yet)",
    }.get(status, "")
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
    """(why the bundle is left out, or None; its entry when kept).

    A bundle is counted only once its seal verifies as check-bundle verifies it: the manifest,
    the lock's hashes and the CSV schema (R5.3, R5.6); a bundle without a manifest is
    unfinished and not counted.
    """
    if not (path / CSV_NAME).is_file():
        return f"no {CSV_NAME}: nothing was recorded in this bundle", {}
    if not (path / MANIFEST_NAME).is_file():
        return (
            f"no {MANIFEST_NAME}: not a finished bundle, so nothing in it is sealed; not counted "
            "(R5.6). Fix: finish it (rerun the same gpubench-nb command)"
        ), {}
    try:
        problems = seal_problems(path)  # check-bundle's own verification of the seal
    except GpubenchError as exc:
        problems = [str(exc)]
    if problems:
        shown = "; ".join(" ".join(p.split()) for p in problems[:3])
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        return (
            f"its seal does not verify (check-bundle fails), not counted (R5.6): {shown}{more}"
        ), {}
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
        offer_cpu_model=offer.cpu_model,
    )
    if not owner.attributable:
        return owner.reason, {}
    moments, unreadable = _times(path, rows, env)
    if unreadable:
        more = f" (+{len(unreadable) - 3} more)" if len(unreadable) > 3 else ""
        return (
            "recorded time(s) that cannot be read, so the bundle cannot be placed in the "
            f"package window: {'; '.join(unreadable[:3])}{more}"
        ), {}
    first, last = min(moments), max(moments)
    if first < start or last >= end:
        return (
            f"outside the package window [{utc_text(start)}, {utc_text(end)}): made from "
            f"{utc_text(first)} to {utc_text(last)}"
        ), {}
    lock = read_json(path / LOCK_NAME, error=None) or {}
    try:
        identity = _corpus_identity(path, lock)
    except (GpubenchError, KeyError, TypeError) as exc:
        return f"corpus identity cannot be read: {' '.join(str(exc).split())}", {}
    accepted_variants = [v for v, e in variant_acceptance(rows).items() if e.accepted]
    return None, {
        "bundle": str(path),
        "corpus_identity": identity,
        "corpus_revision": (lock.get("fingerprints") or {}).get("corpus_revision"),
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
    mark = bool(ledger.get("placeholder"))  # older ledgers have no such key
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
            f"  {entry['bundle']}  corpus {entry['corpus_identity'][:12]}  {state}"
            + (f"  ({entry['note']})" if entry["note"] else "")
        )
    lines.append("left out:" if ledger["left_out"] else "left out: none")
    lines += [f"  {entry['bundle']}  {entry['reason']}" for entry in ledger["left_out"]]
    return "\n".join(lines) + "\n"


def _csv(ledger: Mapping[str, Any]) -> str:
    names = [
        "offer_id", "days", "lots", "window_status", "package_total_usd_minor", "placeholder",
        "accepted_corpora", "cost_per_accepted_usd_minor", "bundle", "kept",
        "corpus_identity", "accepted", "reason",
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
                "corpus_identity": entry["corpus_identity"],
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
    """A ledger written by ``gpubench-nb ledger --out``, checked for consistency;
    EconomicsError when unusable.

    Its count must be the number of distinct accepted corpora it lists, its cost the arithmetic
    of that count (calcul-forfaits, R5.3), and its statement the one those numbers give: a
    count edited to 999 beside a statement that says 1 is refused, never shown.
    """
    path = Path(path)
    data = read_json(path, error=None)
    needed = ("offer_id", "accepted_corpora", "package_total_usd_minor", "window", "left_out")
    if not isinstance(data, dict) or any(k not in data for k in needed):
        raise EconomicsError(
            f"{path}: not a ledger written by `gpubench-nb ledger --out` (missing or unreadable); "
            "fix: write one with gpubench-nb ledger ... --out ledger.json",
            rule="R5.3",
        )
    problems = ledger_problems(data)
    if problems:
        raise EconomicsError(
            f"{path}: the ledger is not consistent with itself, so it was edited after "
            f"`gpubench-nb ledger` wrote it: {'; '.join(problems)}. Fix: write it again with "
            "gpubench-nb ledger ... --out (it re-derives every count from the bundles)",
            rule="R5.3",
        )
    return data


LEDGER_SEAL = "ledger_sha256"


def seal_ledger(ledger: Mapping[str, Any]) -> dict[str, Any]:
    """``ledger`` with ``ledger_sha256``, the SHA-256 of every other field (as a lock is
    sealed, R1.3): the placeholder mark, the price and the statement are all covered."""
    body = {k: v for k, v in ledger.items() if k != LEDGER_SEAL}
    return {**body, LEDGER_SEAL: canonical_sha256(body)}


def _price_problems(data: Mapping[str, Any]) -> list[str]:
    """The package price and its placeholder mark against the offers table that gave them,
    when that very table (same SHA-256) is still where the ledger says (R5.1)."""
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
    seal = [] if sealed else [f"its {LEDGER_SEAL} is missing or does not match its content"]
    try:
        count, total = data["accepted_corpora"], data["package_total_usd_minor"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (count, total)):
            return ["accepted_corpora and package_total_usd_minor must be whole numbers"]
        listed = data.get("accepted_corpus_identities")
        key = "corpus_identity"
        if listed is None:  # a ledger written before corpus identities (counted by revision)
            listed, key = data.get("accepted_corpus_revisions") or [], "corpus_revision"
        problems = seal
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
        statement = _statement(
            total,
            count,
            cost,
            data["window"]["status"],
            data["offer_id"],
            data["days"],
            data["lots"],
            bool(data.get("placeholder")),
        )
        if data.get("statement") != statement:
            problems.append("its statement is not the one its numbers give")
        return problems + _price_problems(data)
    except (KeyError, TypeError, AttributeError, EconomicsError) as exc:
        return [*seal, f"a part is missing or malformed ({exc!r})"]
