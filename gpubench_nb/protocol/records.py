"""The typed records that cross a stage: ``run.json``, ``environment.json``, ``economics.json``.

Each is read once, validated (a clear error names the file and the key), and written by its one
writer through ``to_dict``. Readers are tolerant of exactly the keys today's bundles hold: a key
added later is optional, an unknown key is kept as written (``to_dict`` gives it back), so a
bundle made before a record grew a field still verifies and reports (R5.6).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import write_json_atomic
from gpubench_nb.errors import BundleError, GpubenchError
from gpubench_nb.protocol.bundle import ECONOMICS_NAME, ENVIRONMENT_NAME, RUN_NAME


class Phase(str, Enum):
    """A run's phase (R3.2): loading, the first pass in a new process, a pass after warm-up.

    A ``str`` enum: ``Phase.COLD == "cold"`` and it is written as ``cold`` (``str``, f-strings,
    JSON, CSV), so CSV cells and JSON values stay byte-identical. (``enum.StrEnum`` would do
    this from Python 3.11; the package supports 3.10.)
    """

    LOAD = "load"
    COLD = "cold"
    WARM = "warm"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


PHASES: tuple[Phase, ...] = (Phase.LOAD, Phase.COLD, Phase.WARM)  # the order tables use
MEASURED_PHASES: tuple[Phase, ...] = (Phase.COLD, Phase.WARM)  # runs that carry acceptance


# -- validation helpers ---------------------------------------------------------------------

_INT = (int,)
_NUMBER = (int, float)
_TEXT = (str,)
_MAP = (dict,)
_LIST = (list,)
_KIND = {_INT: "an integer", _NUMBER: "a number", _TEXT: "text", _MAP: "an object", _LIST: "a list"}


class _Reader:
    """Reads typed keys of one JSON object, naming the file and the key path in every error."""

    def __init__(
        self, data: Any, where: str, error: type[GpubenchError], rule: str, path: str = ""
    ) -> None:
        self.where, self.error, self.rule, self.path = where, error, rule, path
        if not isinstance(data, dict):
            self.fail("", f"expected a JSON object, got {type(data).__name__}")
        self.data: dict[str, Any] = data

    def fail(self, key: str, problem: str) -> None:
        name = f"{self.path}.{key}" if self.path and key else (self.path or key)
        at = f" key {name!r}:" if name else ""
        raise self.error(
            f"{self.where}:{at} {problem}; fix: restore the file from the bundle it came from "
            "(its MANIFEST.sha256 names the original), it is written by gpubench-nb only",
            rule=self.rule,
        )

    def get(self, key: str, kinds: tuple[type, ...], *, required: bool = False) -> Any:
        if key not in self.data:
            if required:
                self.fail(key, "missing")
            return None
        value = self.data[key]
        if value is None:
            if required:
                self.fail(key, "must not be empty")
            return None
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            self.fail(key, f"expected {_KIND.get(kinds, kinds)}, got {value!r}")
        return float(value) if kinds is _NUMBER else value

    def flag(self, key: str) -> bool | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {value!r}")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        values = self.get(key, _LIST) or []
        if not all(isinstance(v, str) for v in values):
            self.fail(key, f"expected a list of text, got {values!r}")
        return tuple(values)

    def each(self, key: str) -> list[_Reader]:
        """A reader per object of the list at ``key`` (key paths ``key[0]``, ``key[1]``, ...)."""
        items = self.get(key, _LIST) or []
        return [self.child(f"{key}[{i}]", item) for i, item in enumerate(items)]

    def child(self, key: str, data: Any) -> _Reader:
        path = f"{self.path}.{key}" if self.path else key
        return _Reader(data, self.where, self.error, self.rule, path)


def _sane_number(text: str) -> float | int:
    """A JSON number a record can hold: at most 40 characters, finite."""
    value = float(text) if len(text) <= 40 and any(c in text for c in ".eE") else None
    if len(text) > 40 or value is not None and not math.isfinite(value):
        raise ValueError(f"the number {text[:24]}... ({len(text)} characters) is out of range")
    return int(text) if value is None else value


def _read_json_file(path: Path, error: type[GpubenchError], rule: str) -> Any | None:
    """The JSON in ``path``; None when absent; ``error`` when unreadable or absurd (a number
    out of range, nesting too deep for the parser)."""
    try:
        return json.loads(
            Path(path).read_text(encoding="utf-8"),
            parse_int=_sane_number,
            parse_float=_sane_number,
            parse_constant=lambda name: math.nan if name == "NaN" else _sane_number("1e999"),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: JSON, UTF-8, numbers
        raise error(
            f"{path}: unreadable JSON ({str(exc)[:200]}); fix: restore it from the bundle it "
            "came from",
            rule=rule,
        ) from None


class _Record:
    """What the three records share: where they live, how they are read and written."""

    NAME = ""  # the bundle file name (protocol.bundle)
    RULE = ""  # the rule a broken file breaks
    data: Mapping[str, Any]

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Any:  # each record validates its own keys
        raise NotImplementedError

    @classmethod
    def from_file(cls, path: Path) -> Any:
        """The record in ``path``, validated; None when there is no such file."""
        data = _read_json_file(path, BundleError, cls.RULE)
        return None if data is None else cls.from_dict(data, str(path))

    @classmethod
    def read(cls, folder: Path) -> Any:
        """``folder/<NAME>``, validated; None when absent."""
        return cls.from_file(Path(folder) / cls.NAME)

    @classmethod
    def write(cls, folder: Path, data: Mapping[str, Any]) -> Any:
        """The one writer: validated first, so no stage writes a record another cannot read;
        atomic, so a kill leaves the previous file whole."""
        path = Path(folder) / cls.NAME
        record = cls.from_dict(dict(data), str(path))
        write_json_atomic(path, record.to_dict())
        return record

    def to_dict(self) -> dict[str, Any]:
        """Every key as read or given, in order (unknown keys kept)."""
        return dict(self.data)


# -- run.json ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord(_Record):
    """``runs/<variant>/<phase>-<n>/run.json``: what one scheduled run applied and measured.

    Typed fields are the ones other stages read (rows, report, ledger, audit); ``data`` is the
    record as written, every key, in order (``to_dict``).
    """

    NAME = RUN_NAME
    RULE = "R3.6"

    variant_id: str | None  # None only in hand-made records: the folder names the run
    phase: Phase | None
    run_index: int | None
    status: str | None
    pid: int | None
    started_utc: str | None
    finished_utc: str | None
    elapsed_seconds: float | None
    load_seconds: float | None
    error: str | None
    precision: str | None
    batch: int | None
    context: int | None
    truncated_texts: int | None
    dropped_tokens: int | None
    tokens_processed: int | None
    off_label_answers: int | None
    # figures kept apart from load_seconds, and what the GPU ran at (engine/clocks.py)
    import_seconds: float | None
    fingerprint_seconds: float | None
    cuda_context_seconds: float | None
    weight_residency_at_load_start: Mapping[str, Any] | None  # engine/residency.py
    gpu_telemetry: GpuTelemetry | None  # the measured pass; None on CPU or in older records
    generation_config_effective: Mapping[str, Any] | None  # causal_lm (R2.5)
    environment: Mapping[str, Any] = field(repr=False)
    data: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Any, where: str = RUN_NAME) -> RunRecord:
        """Validate once; BundleError naming ``where`` and the key (R3.6: a run's own record)."""
        r = _Reader(data, where, BundleError, "R3.6")
        phase = r.get("phase", _TEXT)
        if phase is not None and phase not in PHASES:
            r.fail("phase", f"must be one of {', '.join(PHASES)}, got {phase!r}")
        environment = r.get("environment", _MAP) or {}
        return cls(
            variant_id=r.get("variant_id", _TEXT),
            phase=Phase(phase) if phase is not None else None,
            run_index=r.get("run_index", _INT),
            status=r.get("status", _TEXT),
            pid=r.get("pid", _INT),
            started_utc=r.get("started_utc", _TEXT),
            finished_utc=r.get("finished_utc", _TEXT),
            elapsed_seconds=r.get("elapsed_seconds", _NUMBER),
            load_seconds=r.get("load_seconds", _NUMBER),
            error=r.get("error", _TEXT),
            precision=r.get("precision", _TEXT),
            batch=r.get("batch", _INT),
            context=r.get("context", _INT),
            truncated_texts=r.get("truncated_texts", _INT),
            dropped_tokens=r.get("dropped_tokens", _INT),
            tokens_processed=r.get("tokens_processed", _INT),
            off_label_answers=r.get("off_label_answers", _INT),
            import_seconds=r.get("import_seconds", _NUMBER),
            fingerprint_seconds=r.get("fingerprint_seconds", _NUMBER),
            cuda_context_seconds=r.get("cuda_context_seconds", _NUMBER),
            weight_residency_at_load_start=r.get("weight_residency_at_load_start", _MAP),
            gpu_telemetry=GpuTelemetry.from_reader(r, "gpu_telemetry"),
            generation_config_effective=r.get("generation_config_effective", _MAP),
            environment=EnvironmentRecord.from_dict(environment, f"{where} (environment)").data,
            data=dict(data),
        )


@dataclass(frozen=True)
class GpuTelemetry:
    """run.json ``gpu_telemetry`` (engine/clocks.py): the GPU during the timed pass.

    ``flags`` are the sentences the report shows (throttled, low clock); ``energy_joules`` is
    the energy counter's difference over the pass, None where it was not read."""

    observable: bool
    flags: tuple[str, ...]
    energy_joules: float | None
    throttled: bool | None
    low_clock: bool | None
    data: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_reader(cls, parent: _Reader, key: str) -> GpuTelemetry | None:
        value = parent.get(key, _MAP)
        if value is None:
            return None
        r = parent.child(key, value)
        energy = r.data.get("energy_joules")  # a number, or "not observable"
        if energy is not None and not isinstance(energy, str):
            energy = r.get("energy_joules", _NUMBER)
        return cls(
            observable=bool(r.flag("observable")),
            flags=r.texts("flags"),
            energy_joules=energy if isinstance(energy, float) else None,
            throttled=r.flag("throttled"),
            low_clock=r.flag("low_clock"),
            data=dict(value),
        )


def read_run(run_folder: Path) -> RunRecord | None:
    """``run_folder/run.json`` (protocol.bundle.run_dir), or None when the run left none."""
    return RunRecord.read(run_folder)


def write_run(run_folder: Path, data: Mapping[str, Any]) -> RunRecord:
    """The one writer of run.json (10_measure), validated, atomic."""
    return RunRecord.write(run_folder, data)


# -- environment.json --------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmAllocation:
    """``environment.json`` ``slurm``: the Slurm job a bundle was measured in (R2.4, R2.5).

    From the job's ``SLURM_*`` variables (engine/allocation.py); ``gpus_requested`` is what the
    campaign target asked for (0: a CPU partition, no GPU requested), ``gpus_allocated`` what
    Slurm bound to the job on this node (0 = truly none, R4.3).
    """

    job_id: str
    partition: str | None
    node_list: str | None
    cpus_allocated: int | None
    gpus_allocated: int | None
    gpus_requested: int | None
    restart_count: int | None  # > 0: a requeued job (pre-emption, time limit)

    @classmethod
    def from_reader(cls, r: _Reader) -> SlurmAllocation:
        return cls(
            job_id=r.get("job_id", _TEXT, required=True),
            partition=r.get("partition", _TEXT),
            node_list=r.get("node_list", _TEXT),
            cpus_allocated=r.get("cpus_allocated", _INT),
            gpus_allocated=r.get("gpus_allocated", _INT),
            gpus_requested=r.get("gpus_requested", _INT),
            restart_count=r.get("restart_count", _INT),
        )


@dataclass(frozen=True)
class EnvironmentRecord(_Record):
    """``environment.json`` (and run.json's ``environment``): the machine as observed (R2.4)."""

    NAME = ENVIRONMENT_NAME
    RULE = "R2.4"

    captured_utc: str | None
    gpu_model: str | None
    gpu_count: int | None
    device: str | None
    hostname: str | None
    gpu_uuids: tuple[str, ...]
    visible_gpu_uuids: tuple[str, ...]
    code_revision: str | None
    cuda_module_loading: str | None  # effective, read after CUDA init
    slurm: SlurmAllocation | None  # None: not measured inside a Slurm job (or an older bundle)
    data: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Any, where: str = ENVIRONMENT_NAME) -> EnvironmentRecord:
        r = _Reader(data, where, BundleError, "R2.4")
        numerics = r.child("numerics", r.get("numerics", _MAP) or {})
        loading = numerics.child(
            "cuda_module_loading", numerics.get("cuda_module_loading", _MAP) or {}
        )
        slurm = r.get("slurm", _MAP)
        r.get("cpu_count", _INT)  # typed, not kept: the report prints it as a count of cores
        for part in ("cpu_activity_start", "cpu_activity_end"):
            r.child(part, r.get(part, _MAP) or {}).get("cpu_count", _INT)
        return cls(
            captured_utc=r.get("captured_utc", _TEXT),
            gpu_model=r.get("gpu_model", _TEXT),
            gpu_count=r.get("gpu_count", _INT),
            device=r.get("device", _TEXT),
            hostname=r.get("hostname", _TEXT),
            gpu_uuids=r.texts("gpu_uuids"),
            visible_gpu_uuids=r.texts("visible_gpu_uuids"),
            code_revision=r.get("code_revision", _TEXT),
            cuda_module_loading=loading.get("effective", _TEXT),
            slurm=None if slurm is None else SlurmAllocation.from_reader(r.child("slurm", slurm)),
            data=dict(data),
        )


EMPTY_ENVIRONMENT = EnvironmentRecord(None, None, None, None, None, (), (), None, None, None, {})


def read_environment(bundle_dir: Path) -> EnvironmentRecord:
    """The bundle's environment.json, or an empty record when it has none (older bundles)."""
    found = EnvironmentRecord.read(bundle_dir)
    return found if found is not None else EMPTY_ENVIRONMENT


def write_environment(bundle_dir: Path, data: Mapping[str, Any]) -> EnvironmentRecord:
    """The one writer of environment.json (00_environment), validated, atomic."""
    return EnvironmentRecord.write(bundle_dir, data)


# -- economics.json ----------------------------------------------------------------------------


@dataclass(frozen=True)
class VariantEconomics:
    """``economics.json`` ``variants[]``: the acceptance verdict economics priced (R5.7)."""

    variant_id: str
    status: str  # "accepted" | "not accepted" | "acceptance not recorded"
    accepted: bool
    accepted_unique_corpora: int | None
    reason: str | None

    @property
    def verdict(self) -> bool | None:
        """True, False, or None = acceptance not recorded (R4.3: unknown is not "no")."""
        if self.accepted:
            return True
        return None if self.status == "acceptance not recorded" else False


@dataclass(frozen=True)
class OfferCell:
    """``offers[].variants[]``: the cost per accepted corpus of one variant on one offer."""

    variant_id: str
    accepted_results: int | None
    cost_per_accepted_usd_minor: int | None
    reason: str | None


@dataclass(frozen=True)
class OfferEconomics:
    """``offers[]``: one offer's package total, attribution and costs (R5.1-R5.3, R5.7)."""

    offer_id: str
    gpu_model: str
    gpus_per_lot: int
    days: int | None
    lots: int
    package_total_usd_minor: int | None
    declared: bool
    attribution: Mapping[str, Any] | None  # None in economics.json written before the rule
    cells: tuple[OfferCell, ...]
    # The offers table declares its prices invented examples; false in
    # economics.json written before the field existed.
    placeholder: bool = False

    def cell(self, variant_id: str) -> OfferCell | None:
        return next((c for c in self.cells if c.variant_id == variant_id), None)


@dataclass(frozen=True)
class BreakEvenPair:
    """``break_even.pairs[]``: a threshold, not a forecast (R5.5)."""

    challenger: str
    reference: str
    accepted_corpora_needed: int | None


@dataclass(frozen=True)
class EconomicsRecord(_Record):
    """``economics.json`` (economics.bundle_economics writes it): what report and ledger read."""

    NAME = ECONOMICS_NAME
    RULE = "R5.6"

    variants: tuple[VariantEconomics, ...]
    offers: tuple[OfferEconomics, ...]
    note: str | None
    unit_of_work: str | None
    break_even_pairs: tuple[BreakEvenPair, ...]
    break_even_reason: str | None  # why no threshold was computed
    data: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Any, where: str = ECONOMICS_NAME) -> EconomicsRecord:
        r = _Reader(data, where, BundleError, "R5.6")
        variants = []
        for v in r.each("variants"):
            accepted = v.flag("accepted")
            status = v.get("status", _TEXT) or ("accepted" if accepted else "not accepted")
            variants.append(
                VariantEconomics(
                    variant_id=v.get("variant_id", _TEXT, required=True),
                    status=status,
                    accepted=bool(accepted),
                    accepted_unique_corpora=v.get("accepted_unique_corpora", _INT),
                    reason=v.get("reason", _TEXT),
                )
            )
        offers = []
        for o in r.each("offers"):
            cells = [
                OfferCell(
                    variant_id=c.get("variant_id", _TEXT, required=True),
                    accepted_results=c.get("accepted_results", _INT),
                    cost_per_accepted_usd_minor=c.get("cost_per_accepted_usd_minor", _INT),
                    reason=c.get("reason", _TEXT),
                )
                for c in o.each("variants")
            ]
            per_lot = o.get("gpus_per_lot", _INT)
            offers.append(
                OfferEconomics(
                    offer_id=o.get("offer_id", _TEXT, required=True),
                    gpu_model=o.get("gpu_model", _TEXT) or "",
                    gpus_per_lot=1 if per_lot is None else per_lot,  # 0: CPU-only
                    days=o.get("days", _INT),
                    lots=o.get("lots", _INT) or 1,
                    package_total_usd_minor=o.get("package_total_usd_minor", _INT),
                    declared=bool(o.flag("declared")),
                    attribution=o.get("attribution", _MAP),
                    cells=tuple(cells),
                    placeholder=bool(o.flag("placeholder")),
                )
            )
        block = r.child("break_even", r.get("break_even", _MAP) or {})
        pairs = [
            BreakEvenPair(
                challenger=b.get("challenger", _TEXT, required=True),
                reference=b.get("reference", _TEXT, required=True),
                accepted_corpora_needed=b.get("accepted_corpora_needed", _INT),
            )
            for b in block.each("pairs")
        ]
        return cls(
            variants=tuple(variants),
            offers=tuple(offers),
            note=r.get("note", _TEXT),
            unit_of_work=r.get("unit_of_work", _TEXT),
            break_even_pairs=tuple(pairs),
            break_even_reason=block.get("reason", _TEXT),
            data=dict(data),
        )

    @property
    def declared_offer(self) -> OfferEconomics | None:
        """The experiment's pricing.offer, or None when nothing was priced (R5.5)."""
        return next((o for o in self.offers if o.declared), None)

    def offer(self, offer_id: str) -> OfferEconomics | None:
        return next((o for o in self.offers if o.offer_id == offer_id), None)

    def variant(self, variant_id: str) -> VariantEconomics | None:
        return next((v for v in self.variants if v.variant_id == variant_id), None)


def read_economics(bundle_dir: Path) -> EconomicsRecord | None:
    """The bundle's economics.json, or None when it has none (30_economics not run)."""
    return EconomicsRecord.read(bundle_dir)


def write_economics(bundle_dir: Path, data: Mapping[str, Any]) -> EconomicsRecord:
    """The one writer of economics.json (30_economics), validated, atomic."""
    return EconomicsRecord.write(bundle_dir, data)
