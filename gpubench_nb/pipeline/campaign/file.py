"""The campaign file: one experiment, frozen once, measured on several targets (R1.3, R5.1),
each standing for one offer (R5.2), reached ``local``ly, through ``slurm`` or by hand
(``manual``: ``run --protocol`` on a rented box). Read as records: every problem listed at once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gpubench_nb.economics.offers import load_offers, resolve_offer
from gpubench_nb.errors import GpubenchError, ProtocolError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.experiment_rules import MAX_ID_LENGTH
from gpubench_nb.protocol.experiment_spec import PACKAGE_DAYS, Experiment
from gpubench_nb.protocol.records import Record, key
from gpubench_nb.protocol.yamlio import read_yaml

DEFAULT_LOCAL_LIMIT_MINUTES = 24 * 60
REACHES = ("local", "slurm", "manual")
_SETUP = {
    "type": "array",
    "items": schema.text("a shell line"),
    "description": 'lines run before the job, e.g. ["module load cuda/12.4"]',
}
_LIMIT = schema.integer("the job's wall-clock limit")
# sbatch options the campaign sets itself; an extra option may not contradict them.
SET_BY_CAMPAIGN = ("partition", "account", "gres", "time", "exclusive", "job-name", "output")
SET_BY_CAMPAIGN += ("error", "open-mode", "signal", "gpus", "gpus-per-node")
_GRES = re.compile(r"^gpu(:[A-Za-z0-9_.-]+)?:(\d+)$")
_OPTION = re.compile(r"^[a-z][a-z0-9_-]*$")


def _id(doc: str) -> Any:
    """An id that names a folder: the experiment identifier rule (R1.3)."""
    return key(
        schema.text(doc, pattern=schema.ID_PATTERN, maxLength=MAX_ID_LENGTH),
        why=schema.ID_WHY,
        fix=f"{schema.ID_FIX}, at most {MAX_ID_LENGTH} characters",
    )


class _Section(Record):
    RULE = "R1.3"
    CLOSED = True
    ERROR = ProtocolError
    FIX = "see docs/CLUSTER.md"


@dataclass(frozen=True, kw_only=True)
class TargetOffer(_Section):
    """The offer it stands for (R5.1, R5.2)."""

    RULE = "R5.1"
    offer: str = key(schema.text("an offer id of the offers table, or its prefix"), at="id")
    days: int = key(schema.enum("whole package length", PACKAGE_DAYS))
    lots: int = key(schema.integer("billed lots"))
    offers: Path | None = key({}, None, code=True)  # the offers table it was resolved in

    def pricing(self) -> dict[str, Any]:
        """What ``run_experiment(pricing=...)`` takes (the 30_economics override)."""
        return dict(offers=str(self.offers), offer=self.offer, days=self.days, lots=self.lots)


@dataclass(frozen=True, kw_only=True)
class LocalReach(_Section):
    """This machine; targets run one after the other."""

    gpus: int = key(schema.integer("whole GPUs (CUDA_VISIBLE_DEVICES 0..gpus-1; 0: CPU)", 0))
    time_limit_minutes: int = key({**_LIMIT, "default": DEFAULT_LOCAL_LIMIT_MINUTES})
    setup: tuple[str, ...] = key(_SETUP, ())


@dataclass(frozen=True, kw_only=True)
class SlurmReach(_Section):
    """A Slurm partition, whole GPUs, one job."""

    partition: str = key(schema.text("the partition holding the GPUs"))
    account: str | None = key(schema.text("the account charged"), None)
    gpus: int = key(
        schema.integer("whole GPUs (0: a CPU partition, no --gres)", 0),
        fix="write a whole number of GPUs, e.g. 1, or 0 for a CPU-only partition",
    )
    gres: str | None = key(schema.text("e.g. gpu:h100:1; must request the same gpus"), None)
    time_limit_minutes: int = key(_LIMIT)
    exclusive: bool = key(schema.flag("a node of its own", default=True))
    sbatch: Mapping[str, Any] = field(
        default_factory=dict,
        metadata={"type": "object", "description": "other long options: qos, mem, ..."},
    )
    setup: tuple[str, ...] = key(_SETUP, ())
    python: str | None = key(schema.text("the interpreter on the nodes (default: this one)"), None)

    def _checked(self, where: Any) -> SlurmReach:
        """A gres requests exactly ``gpus`` (none for a CPU partition: sbatch refuses a gres on
        a node without GPUs); sbatch options do not contradict the campaign's own."""
        match = _GRES.match(self.gres or "")
        if self.gres is not None and not self.gpus:
            where.at("gres").fail(
                f"{self.gres!r} requests GPUs, but gpus is 0 (a CPU-only target)",
                "leave gres out, or set gpus to the number of GPUs it requests",
            )
        elif self.gres is not None and (match is None or int(match.group(2)) != self.gpus):
            where.at("gres").fail(
                f"{self.gres!r} does not request the target's {self.gpus} whole GPU(s)",
                f"write gpu:{self.gpus} or gpu:<type>:{self.gpus}, or leave gres out",
            )
        for option, value in self.sbatch.items():
            name = str(option).replace("_", "-")
            if not _OPTION.match(str(option)) or name in SET_BY_CAMPAIGN:
                where.at(f"sbatch.{option}").fail(
                    "is set by the campaign or is not an sbatch option name",
                    f"use slurm.{name.split('-')[0]} if it exists, else a long option name such "
                    "as qos, constraint, mem, cpus-per-task",
                )
            if not isinstance(value, str | int | float | bool):
                where.at(f"sbatch.{option}").fail("must be a single value", "e.g. qos: normal")
        return replace(self, gres=self.gres or (f"gpu:{self.gpus}" if self.gpus else None))


@dataclass(frozen=True, kw_only=True)
class ManualReach(_Section):
    """A rented box: run there with run --protocol, copy back."""

    host: str | None = key(schema.text("where it is, for the printed instructions"), None)


@dataclass(frozen=True, kw_only=True)
class Target(_Section):
    """One machine or partition, standing for one offer."""

    SCHEMA = {"oneOf": [{"required": [reach]} for reach in REACHES]}
    id: str = _id("names outputs/<campaign_id>/<id>/")
    offer: TargetOffer = key({})
    local: LocalReach | None = key({"type": ["object", "null"]}, None)
    slurm: SlurmReach | None = key({}, None)
    manual: ManualReach | None = key({"type": ["object", "null"]}, None)

    @property
    def reach(self) -> str:
        """``local``, ``slurm`` or ``manual``: how the target is reached."""
        return next(reach for reach in REACHES if getattr(self, reach) is not None)

    def __getattr__(self, name: str) -> Any:
        """The reach's settings read as the target's: ``target.gpus``, ``target.partition``."""
        if name.startswith("_") or name in REACHES:
            raise AttributeError(name)
        return getattr(getattr(self, self.reach), name)

    def describe(self) -> dict[str, Any]:
        """The target as plain data (kept in campaign.json, so a changed target is noticed)."""
        how = asdict(getattr(self, self.reach))
        settings = {k: v for k, v in how.items() if k not in ("data", "format_version")}
        return {"reach": self.reach, **settings, "offer": self.offer.pricing()}

    def _checked(self, where: Any) -> Target:
        reaches = [reach for reach in REACHES if getattr(self, reach) is not None]
        if len(reaches) != 1:
            where.fail(
                f"declares {len(reaches)} ways to reach it ({', '.join(reaches) or 'none'})",
                "give exactly one of local: {gpus: N}, slurm: {...} or manual: {}",
            )
        return self


@dataclass(frozen=True, kw_only=True)
class Campaign(_Section):
    """The campaign file (`parameters/campaign-offers.yaml`): one experiment, frozen once,
    measured on several targets (R1.3, R5.1)."""

    campaign_id: str = _id("names outputs/<campaign_id>/")
    experiment_path: Path = key(
        schema.text("the experiment YAML, relative to this file"), at="experiment"
    )
    offers: Path | None = key(
        schema.text("the offers table (default: the experiment's pricing.offers)"), None
    )
    notes: str = key({"type": "string", "description": "free text"}, "")
    targets: tuple[Target, ...] = key({"minItems": 1, "description": "one entry per machine"})
    source: Path | None = key({}, None, code=True)
    experiment: Experiment | None = key({}, None, code=True)

    def target(self, target_id: str) -> Target:
        for target in self.targets:
            if target.id == target_id:
                return target
        known = ", ".join(t.id for t in self.targets)
        raise ProtocolError(f"{self.source}: no target '{target_id}' (declared: {known})")

    def _checked(self, where: Any) -> Campaign:
        """The files it names read (relative to it), each target's offer resolved to one id
        of the offers table (R5.1), every target id its own."""
        folder = Path(where.file).parent
        experiment_path = (folder / self.experiment_path).resolve()
        experiment = load_experiment(experiment_path)  # its own errors, listed by its own checker
        pricing = experiment.pricing
        offers = (folder / self.offers).resolve() if self.offers else pricing and pricing.offers
        table: dict[str, Any] = {}
        if not offers:
            where.at("offers").fail(
                "missing, and the experiment declares no pricing.offers",
                "name the offers table, e.g. offers: offers.yaml (relative to this file)",
                rule="R5.1",
            )
        else:
            try:
                table = load_offers(offers)
            except GpubenchError as exc:  # its message already names R5.1
                where.at("offers").fail(str(exc), "fix the offers table")
        targets, ids = [], [t.id for t in self.targets if t is not None]
        for target_id in sorted({i for i in ids if ids.count(i) > 1}):
            where.at("targets").fail(
                f"target id {target_id!r} is used twice", "give each its own id"
            )
        for index, target in enumerate(self.targets):
            if target is None:
                continue
            offer = target.offer.offer
            try:
                offer = resolve_offer(table, offer, offers).id if table else offer
            except GpubenchError as exc:  # its message already names R5.1
                at = where.at(f"targets[{index}] ({target.id}).offer.id")
                at.fail(str(exc), f"use an id of {offers}", rule="R5.1")
            targets.append(replace(target, offer=replace(target.offer, offer=offer, offers=offers)))
        return replace(
            self,
            source=Path(where.file),
            experiment_path=experiment_path,
            experiment=experiment,
            offers=offers,
            notes=self.notes.strip(),
            targets=tuple(targets),
        )


def load_campaign(path: str | Path) -> Campaign:
    """Load and validate a campaign file and its experiment; one ProtocolError lists every fault."""
    source = Path(path).resolve()
    # the one YAML reader (R1.3): a key given twice refused; the experiment's size, depth limits
    raw = read_yaml(source, what="campaign", error=ProtocolError, rule="R1.3")
    return Campaign.from_dict(raw, str(source))


CAMPAIGN = Campaign.schema()
