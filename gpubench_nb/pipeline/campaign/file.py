"""The campaign file: one experiment, frozen once, measured on several targets (R1.3, R5.1).

Each target stands for one offer (whole package days and lots, R5.1, R5.2) and says how it is
reached: ``local`` (this machine), ``slurm`` (a partition, whole GPUs) or ``manual`` (a rented
box: ``gpubench-nb run --protocol`` there, bundle copied back). Validated like an experiment
YAML: unknown keys name the nearest valid key, and every problem is listed at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from gpubench_nb.economics.offers import load_offers, resolve_offer
from gpubench_nb.errors import GpubenchError, ProtocolError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.experiment_rules import Checker
from gpubench_nb.protocol.experiment_rules import identifier as _identifier
from gpubench_nb.protocol.experiment_spec import PACKAGE_DAYS, Experiment
from gpubench_nb.protocol.yamlio import read_yaml

DEFAULT_LOCAL_LIMIT_MINUTES = 24 * 60
_SETUP = {
    "type": "array",
    "items": schema.text("a shell line"),
    "description": 'lines run before the job, e.g. ["module load cuda/12.4"]',
}
_LIMIT = schema.integer("the job's wall-clock limit")
TARGET = schema.section("one machine or partition, standing for one offer", {
    "id": schema.text("names outputs/<campaign_id>/<id>/", pattern=schema.ID_PATTERN),
    "offer": schema.section("the offer it stands for (R5.1, R5.2)", {
        "id": schema.text("an offer id of the offers table, or its prefix"),
        "days": schema.enum("whole package length", PACKAGE_DAYS),
        "lots": schema.integer("billed lots"),
    }, required=("id", "days", "lots")),
    "local": {**schema.section("this machine; targets run one after the other", {
        "gpus": schema.integer("whole GPUs (CUDA_VISIBLE_DEVICES 0..gpus-1; 0: CPU)", 0),
        "time_limit_minutes": {**_LIMIT, "default": DEFAULT_LOCAL_LIMIT_MINUTES},
        "setup": _SETUP,
    }, required=("gpus",)), "type": ["object", "null"]},
    "slurm": schema.section("a Slurm partition, whole GPUs, one job", {
        "partition": schema.text("the partition holding the GPUs"),
        "account": schema.text("the account charged"),
        "gpus": schema.integer("whole GPUs (0: a CPU partition, no --gres)", 0),
        "gres": schema.text("e.g. gpu:h100:1; must request the same gpus"),
        "time_limit_minutes": _LIMIT,
        "exclusive": schema.flag("a node of its own", default=True),
        "sbatch": {"type": "object", "description": "other long options: qos, mem, ..."},
        "setup": _SETUP,
        "python": schema.text("the interpreter on the nodes (default: this one)"),
    }, required=("partition", "gpus", "time_limit_minutes")),
    "manual": {**schema.section("a rented box: run there with run --protocol, copy back", {
        "host": schema.text("where it is, for the printed instructions")}),
        "type": ["object", "null"]},
}, required=("id", "offer"))  # fmt: skip
TARGET["oneOf"] = [{"required": [reach]} for reach in ("local", "slurm", "manual")]
CAMPAIGN = schema.section(
    "The campaign file (`parameters/campaign-offers.yaml`): one experiment, frozen once, "
    "measured on several targets (R1.3, R5.1).",
    {
        "campaign_id": schema.text("names outputs/<campaign_id>/", pattern=schema.ID_PATTERN),
        "experiment": schema.text("the experiment YAML, relative to this file"),
        "offers": schema.text("the offers table (default: the experiment's pricing.offers)"),
        "notes": {"type": "string", "description": "free text"},
        "targets": {"type": "array", "minItems": 1, "items": TARGET,
                    "description": "one entry per machine"},
    },
    required=("campaign_id", "experiment", "targets"),
)  # fmt: skip
TOP_KEYS = schema.keys(CAMPAIGN)
TARGET_KEYS = schema.keys(TARGET)
REACHES = ("local", "slurm", "manual")
OFFER_KEYS, LOCAL_KEYS, SLURM_KEYS, MANUAL_KEYS = (
    schema.keys(TARGET["properties"][k]) for k in ("offer", *REACHES)
)
# sbatch options the campaign sets itself; an extra option may not contradict them.
SET_BY_CAMPAIGN = ("partition", "account", "gres", "time", "exclusive", "job-name", "output")
SET_BY_CAMPAIGN += ("error", "open-mode", "signal", "gpus", "gpus-per-node")
_GRES = re.compile(r"^gpu(:[A-Za-z0-9_.-]+)?:(\d+)$")
_OPTION = re.compile(r"^[a-z][a-z0-9_-]*$")


@dataclass(frozen=True)
class TargetOffer:
    """The offer a target stands for: an offers-table id, whole package days and lots (R5.1)."""

    offers: Path
    offer: str
    days: int
    lots: int

    def pricing(self) -> dict[str, Any]:
        """What ``run_experiment(pricing=...)`` takes (the 30_economics override)."""
        return {
            "offers": str(self.offers),
            "offer": self.offer,
            "days": self.days,
            "lots": self.lots,
        }


@dataclass(frozen=True)
class Target:
    """One machine or partition of the campaign and how to reach it."""

    id: str
    offer: TargetOffer
    reach: str  # "local" | "slurm" | "manual"
    gpus: int = 0  # whole GPUs given to the job (local: CUDA_VISIBLE_DEVICES 0..gpus-1)
    time_limit_minutes: int = DEFAULT_LOCAL_LIMIT_MINUTES
    setup: tuple[str, ...] = ()
    partition: str | None = None
    account: str | None = None
    gres: str | None = None
    exclusive: bool = True
    sbatch: Mapping[str, Any] = field(default_factory=dict)
    python: str | None = None
    host: str | None = None

    def describe(self) -> dict[str, Any]:
        """The target as plain data (kept in campaign.json, so a changed target is noticed)."""
        data = {"reach": self.reach, **{f.name: getattr(self, f.name) for f in fields(self)}}
        del data["id"]
        return {
            **data,
            "offer": self.offer.pricing(),
            "setup": list(self.setup),
            "sbatch": dict(self.sbatch),
        }


@dataclass(frozen=True)
class Campaign:
    source: Path
    campaign_id: str
    experiment_path: Path
    experiment: Experiment
    notes: str
    targets: tuple[Target, ...]

    def target(self, target_id: str) -> Target:
        found = [target for target in self.targets if target.id == target_id]
        if found:
            return found[0]
        known = ", ".join(t.id for t in self.targets)
        raise ProtocolError(f"{self.source}: no target '{target_id}' (declared: {known})")


def load_campaign(path: str | Path) -> Campaign:
    """Load and validate a campaign file and its experiment; one ProtocolError lists every fault."""
    source = Path(path).resolve()
    # The one YAML reader (R1.3): a key given twice is refused, not "the last one wins", with
    # the experiment file's size, alias and depth limits.
    raw = read_yaml(source, what="campaign", error=ProtocolError, rule="R1.3")
    check = Checker(source, CAMPAIGN)
    top = check.keys("", raw, TOP_KEYS)
    for key in ("campaign_id", "experiment", "targets"):
        if key not in top:
            check.fail(key, "missing", f"declare '{key}' (see docs/CLUSTER.md)")
    if check.problems:
        raise ProtocolError("\n".join(check.problems))
    campaign_id = _identifier(check, "campaign_id", top["campaign_id"])
    experiment_path = check.path("experiment", top["experiment"])
    experiment = load_experiment(experiment_path)  # its own errors, listed by its own checker
    offers_path = _offers_path(check, top.get("offers"), experiment)
    offers = _offers_table(check, offers_path)
    targets = _targets(check, top["targets"], offers_path, offers)
    notes = top.get("notes") or ""
    if not isinstance(notes, str):
        check.fail("notes", "must be free text", "write a string")
    if check.problems:
        raise ProtocolError("\n".join(check.problems))
    return Campaign(
        source=source,
        campaign_id=campaign_id,
        experiment_path=experiment_path,
        experiment=experiment,
        notes=str(notes).strip(),
        targets=tuple(targets),
    )


def _offers_path(check: Checker, value: Any, experiment: Experiment) -> Path | None:
    if value is not None:
        return check.path("offers", value)
    if experiment.pricing is not None:
        return experiment.pricing.offers
    check.fail(
        "offers",
        "missing, and the experiment declares no pricing.offers",
        "name the offers table, e.g. offers: offers.yaml (relative to this file)",
        rule="R5.1",
    )
    return None


def _offers_table(check: Checker, path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return load_offers(path)
    except GpubenchError as exc:  # its message already names R5.1
        check.fail("offers", str(exc), "fix the offers table")
        return {}


def _targets(
    check: Checker, value: Any, offers_path: Path | None, offers: dict[str, Any]
) -> list[Target]:
    if not isinstance(value, list) or not value:
        check.fail("targets", f"must be a non-empty list, got {value!r}", "list one entry per GPU")
        return []
    targets = []
    for index, entry in enumerate(value):
        where = f"targets[{index}]"
        data = check.keys(where, entry, TARGET_KEYS)
        if not isinstance(entry, Mapping):
            continue
        target_id = _identifier(check, f"{where}.id", data.get("id"))
        where = f"targets[{index}] ({target_id})" if target_id else where
        offer = _offer(check, f"{where}.offer", data.get("offer"), offers_path, offers)
        reaches = [r for r in REACHES if r in data]
        if len(reaches) != 1:
            check.fail(
                where,
                f"declares {len(reaches)} ways to reach it ({', '.join(reaches) or 'none'})",
                "give exactly one of local: {gpus: N}, slurm: {...} or manual: {}",
            )
            continue
        reach = reaches[0]
        details = _REACH_READERS[reach](check, f"{where}.{reach}", data[reach])
        if offer is not None:
            targets.append(Target(id=target_id, offer=offer, reach=reach, **details))
    ids = [t.id for t in targets]
    for target_id in sorted({i for i in ids if ids.count(i) > 1}):
        check.fail("targets", f"target id {target_id!r} is used twice", "give each its own id")
    return targets


def _offer(
    check: Checker, where: str, value: Any, offers_path: Path | None, offers: dict[str, Any]
) -> TargetOffer | None:
    data = check.keys(where, value, OFFER_KEYS)
    for key in OFFER_KEYS:
        if key not in data:
            check.fail(f"{where}.{key}", "missing", "the offer id, package days and lots", "R5.1")
    offer_id = check.text(f"{where}.id", data["id"]) if "id" in data else ""
    if offers and offer_id:
        try:
            offer_id = resolve_offer(offers, offer_id).id
        except GpubenchError as exc:  # its message already names R5.1
            check.fail(f"{where}.id", str(exc), f"use an id of {offers_path}")
    days = check.choice(f"{where}.days", data.get("days"), PACKAGE_DAYS) if "days" in data else 0
    lots = check.integer(f"{where}.lots", data["lots"], 1) if "lots" in data else 0
    if offers_path is None or any(key not in data for key in OFFER_KEYS):
        return None
    return TargetOffer(offers=offers_path, offer=offer_id, days=days, lots=lots)


def _setup(check: Checker, where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        check.fail(where, "must be a list of shell lines", 'e.g. ["module load cuda/12.4"]')
        return ()
    return tuple(value)


def _local(check: Checker, where: str, value: Any) -> dict[str, Any]:
    data = check.keys(where, value if value is not None else {}, LOCAL_KEYS)
    if "gpus" not in data:
        check.fail(
            f"{where}.gpus",
            "missing",
            "the number of whole GPUs this target's runs get (0 for a CPU-only run)",
        )
    return {
        "gpus": check.integer(f"{where}.gpus", data.get("gpus", 0), 0),
        "time_limit_minutes": check.integer(
            f"{where}.time_limit_minutes",
            data.get("time_limit_minutes", DEFAULT_LOCAL_LIMIT_MINUTES),
            1,
        ),
        "setup": _setup(check, f"{where}.setup", data.get("setup")),
    }


def _slurm(check: Checker, where: str, value: Any) -> dict[str, Any]:
    data = check.keys(where, value, SLURM_KEYS)
    for key, fix in (
        ("partition", "the Slurm partition holding this target's GPUs"),
        ("gpus", "the number of whole GPUs the job gets (gres gpu:N; 0 for a CPU partition)"),
        ("time_limit_minutes", "the job's wall-clock limit, e.g. 240"),
    ):
        if key not in data:
            check.fail(f"{where}.{key}", "missing", fix)
    # gpus: 0 is a CPU partition: no --gres at all (a gres on a node without GPUs is refused
    # by sbatch); the request is kept in campaign.json and the bundle's environment (R2.4).
    gpus = check.integer(
        f"{where}.gpus",
        data.get("gpus", 1),
        0,
        fix="write a whole number of GPUs, e.g. 1, or 0 for a CPU-only partition",
    )
    gres = data.get("gres")
    if gres is not None:
        match = _GRES.match(str(gres))
        if gpus == 0:
            check.fail(
                f"{where}.gres",
                f"{gres!r} requests GPUs, but gpus is 0 (a CPU-only target)",
                "leave gres out, or set gpus to the number of GPUs it requests",
            )
        elif match is None or int(match.group(2)) != gpus:
            check.fail(
                f"{where}.gres",
                f"{gres!r} does not request the target's {gpus} whole GPU(s)",
                f"write gpu:{gpus} or gpu:<type>:{gpus}, or leave gres out",
            )
    exclusive = data.get("exclusive", True)
    if not isinstance(exclusive, bool):
        check.fail(f"{where}.exclusive", f"must be true or false, got {exclusive!r}", "true")
    raw_sbatch = data.get("sbatch") or {}
    sbatch = check.keys(f"{where}.sbatch", raw_sbatch, tuple(raw_sbatch))
    for option, option_value in sbatch.items():
        name = str(option).replace("_", "-")
        if not _OPTION.match(str(option)) or name in SET_BY_CAMPAIGN:
            check.fail(
                f"{where}.sbatch.{option}",
                "is set by the campaign or is not an sbatch option name",
                f"use slurm.{name.split('-')[0]} if it exists, else a long option name such "
                "as qos, constraint, mem, cpus-per-task",
            )
        if not isinstance(option_value, str | int | float | bool):
            check.fail(f"{where}.sbatch.{option}", "must be a single value", "e.g. qos: normal")

    account = data.get("account")
    python = data.get("python")
    return {
        "gpus": gpus,
        "time_limit_minutes": check.integer(
            f"{where}.time_limit_minutes", data.get("time_limit_minutes", 1), 1
        ),
        "setup": _setup(check, f"{where}.setup", data.get("setup")),
        "partition": check.text(f"{where}.partition", data.get("partition", "-")),
        "account": None if account is None else check.text(f"{where}.account", account),
        "gres": str(gres) if gres is not None else (f"gpu:{gpus}" if gpus else None),
        "exclusive": bool(exclusive),
        "sbatch": dict(sbatch),
        "python": None if python is None else check.text(f"{where}.python", python),
    }


def _manual(check: Checker, where: str, value: Any) -> dict[str, Any]:
    data = check.keys(where, value if value is not None else {}, MANUAL_KEYS)
    host = data.get("host")
    return {"host": None if host is None else check.text(f"{where}.host", host)}


_REACH_READERS = {"local": _local, "slurm": _slurm, "manual": _manual}
