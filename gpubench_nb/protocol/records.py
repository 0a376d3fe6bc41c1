"""The typed records on one base, ``Record``, whose annotations are the schema (R5.6, R1.3); JSON is
read in one place, ``read_json``."""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import operator
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union

from gpubench_nb.atomic import write_json_atomic
from gpubench_nb.errors import BundleError, GpubenchError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.bundle import (
    ECONOMICS_NAME,
    ENVIRONMENT_NAME,
    REFERENCE_NAME,
    RUN_NAME,
    SCHEDULE_NAME,
)
from gpubench_nb.protocol.capabilities import SETTING_SPECS
from gpubench_nb.protocol.status import RunStatus, ScheduleStatus, Status


class Phase(Status):
    """A run's phase (R3.2): loading, the first pass in a new process, a pass after warm-up."""

    LOAD = "load"
    COLD = "cold"
    WARM = "warm"


PHASES: tuple[Phase, ...] = (Phase.LOAD, Phase.COLD, Phase.WARM)  # the order tables use
MEASURED_PHASES: tuple[Phase, ...] = (Phase.COLD, Phase.WARM)  # runs that carry acceptance

# -- one JSON reader --------------------------------------------------------------------------

_RESTORE = "restore it from the bundle it came from (its MANIFEST.sha256 names the original)"
_FIX = f"fix: {_RESTORE}"


def _sane_number(text: str) -> float | int:
    """A JSON number a record can hold: at most 40 characters, finite."""
    value = float(text) if len(text) <= 40 and any(c in text for c in ".eE") else None
    if len(text) > 40 or value is not None and not math.isfinite(value):
        raise ValueError(f"the number {text[:24]}... ({len(text)} characters) is out of range")
    return int(text) if value is None else value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all distinct: a key given twice is refused (R5.6), never the
    last one quietly kept (a forger's second ``elapsed_seconds``)."""
    found = dict(pairs)
    if len(found) < len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise ValueError(f"the key {twice!r} is given twice in one object")
    return found


def read_json(
    path: Path | str,
    error: type[GpubenchError] | None = BundleError,
    rule: str = "R5.6",
    fix: str = _FIX,
) -> Any:
    """The JSON in ``path``; None when absent. Unreadable (a key given twice included):
    ``error`` naming the file and ``fix``, or None where the caller passes ``error=None``."""
    try:
        return json.loads(
            Path(path).read_text(encoding="utf-8"),
            parse_int=_sane_number,
            parse_float=_sane_number,
            parse_constant=lambda name: math.nan if name == "NaN" else _sane_number("1e999"),
            object_pairs_hook=_unique_keys,
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # not JSON, not UTF-8, absurd numbers
        if error is None:
            return None
        raise error(f"{path}: unreadable JSON ({str(exc)[:200]}); {fix}", rule=rule) from None


# -- the record base --------------------------------------------------------------------------

FORMAT_VERSION = 2  # 1: every record written before format_version was stamped

_KINDS = {int: "an integer", float: "a number", str: "text", bool: "true or false", Path: "a path"}
_ACCEPTS = {int: (int,), float: (int, float), str: (str,), bool: (bool,), Path: (str,)}
_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", Path: "string"}
_HINTS = {"integer": int, "number": float, "string": str, "boolean": bool, "object": Mapping}
_BOUNDS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<="}  # JSON Schema's words
_HOLDS = {">=": operator.ge, ">": operator.gt, "<=": operator.le}
# Field metadata that is not JSON Schema: the key read ("a.b"), the rule and fix its errors
# name, the words for a value its pattern refuses, and "code" (set by code, never read).
_OWN = ("at", "rule", "fix", "why", "code")
_BAD: Any = object()  # a value that failed its check; the problem is already recorded


def _economics_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 economics.json variants may lack ``status``: it follows ``accepted``."""
    for v in data.get("variants") or []:
        if isinstance(v, dict) and v.get("status") is None:
            v["status"] = "accepted" if v.get("accepted") is True else "not accepted"
    return data


# (file name, version) -> what makes a record of that version into the next one. A key a
# version lacked and that reads as empty (None, false, ()) needs no entry: it is optional.
UPGRADES: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    (ECONOMICS_NAME, 1): _economics_v1,
}


def key(spec: Mapping[str, Any], default: Any = dataclasses.MISSING, **own: Any) -> Any:
    """A field declared by its JSON Schema ``spec`` (protocol.schema), plus ``_OWN`` entries;
    the schema's default is the field's default."""
    return field(default=spec.get("default", default), metadata={**spec, **own})


class _Where:
    """The file and key path being read; every problem names both, the rule and the fix."""

    def __init__(self, file: str, rule: str, fix: str, found: list | None = None, path: str = ""):
        self.file, self.rule, self.fix, self.path = file, rule, fix, path
        self.found: list[tuple[str, str, str, str]] = [] if found is None else found

    def at(self, key: str, rule: str | None = None, fix: str | None = None) -> _Where:
        sep = "" if not self.path or key.startswith("[") else "."
        path = f"{self.path}{sep}{key}"
        return _Where(self.file, rule or self.rule, fix or self.fix, self.found, path)

    def fail(self, problem: str, fix: str | None = None, rule: str | None = None) -> Any:
        self.found.append((rule or self.rule, self.path, problem, fix or self.fix))
        return _BAD


def _text(spec: Mapping[str, Any], value: str, where: _Where) -> Any:
    """A string against its declaration: not blank, ``pattern`` matched whole, not too long."""
    if spec.get("minLength") and not value.strip():
        return where.fail(f"must be non-empty text, got {value!r}")
    if "pattern" in spec and not re.fullmatch(spec["pattern"], value):
        return where.fail(f"{value!r} {spec.get('why', 'does not match ' + spec['pattern'])}")
    if len(value) > spec.get("maxLength", len(value)):
        most = spec["maxLength"]
        return where.fail(f"{len(value)} characters, longer than {most}", f"shorten it to {most}")
    return value


def _value(hint: Any, spec: Mapping[str, Any], value: Any, where: _Where) -> Any:  # noqa: PLR0911
    """``value`` checked against the annotation ``hint`` and its declaration ``spec`` (R5.6),
    converted to its type; ``_BAD`` once its problem is recorded."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        for kind in kinds[:-1]:  # the first kind that takes it, quietly tried
            if (got := _value(kind, spec, value, _Where("", "", ""))) is not _BAD:
                return got
        return _value(kinds[-1], spec, value, where)
    is_enum = isinstance(hint, type) and issubclass(hint, Enum)
    allowed = spec.get("enum") or is_enum and [m.value for m in hint]
    if allowed and value not in allowed:
        return where.fail(f"must be one of {', '.join(map(str, allowed))}, got {value!r}")
    if hint is Any or "enum" in spec:
        return value
    if is_enum:
        return hint(value)
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint._parse(value, where)
    if origin in (tuple, list):
        least = spec.get("minItems", 0)
        if not isinstance(value, list) or len(value) < least:
            return where.fail(
                f"expected a list{f' of at least {least}' * bool(least)}, got {value!r}"
            )
        items = spec.get("items", {})
        got = [_value(args[0], items, v, where.at(_item(i, v))) for i, v in enumerate(value)]
        if spec.get("uniqueItems") and (twice := {v for v in got if got.count(v) > 1} - {_BAD}):
            where.fail(f"duplicated values {sorted(twice, key=repr)}", "list each value once")
        return origin(None if v is _BAD else v for v in got)  # a bad item: problem recorded
    if hint in _KINDS:
        bounds = [(sign, spec[k]) for k, sign in _BOUNDS.items() if k in spec]
        typed = isinstance(value, bool) == (hint is bool) and isinstance(value, _ACCEPTS[hint])
        if not typed and not bounds:
            return where.fail(f"expected {_KINDS[hint]}, got {value!r}")
        if not typed or not all(_HOLDS[sign](value, limit) for sign, limit in bounds):
            bound = " and ".join(f"{sign} {limit}" for sign, limit in bounds)
            return where.fail(f"must be {_KINDS[hint]} {bound}, got {value!r}")
        if isinstance(value, str) and _text(spec, value, where) is _BAD:
            return _BAD
        return hint(value) if hint in (float, Path) else value
    if not isinstance(value, Mapping):  # Mapping[...]: kept as written, its declared keys checked
        return where.fail(f"expected an object, got {value!r}")
    if "properties" not in spec:
        return value
    within = args[1] if args else Any
    required = spec.get("required", ())
    properties = spec["properties"].items()  # Mapping[str, Any]: each key as it is declared
    declared = [
        (k, k, _hint(s) if within is Any else within, s, k in required) for k, s in properties
    ]
    values, failed = _fields(declared, {str(k): v for k, v in value.items()}, where, closed=True)
    return _BAD if failed else values


def declared_value(spec: Mapping[str, Any], value: Any, path: str) -> tuple[Any, list]:
    """``value`` checked against the JSON Schema declaration ``spec`` alone, as records check
    theirs (``experiment_rules.Checker``): the value (None when refused) and each problem as
    (rule, key path, problem, fix) with rule and fix left empty."""
    where = _Where("", "", "", path=path)
    got = _value(_hint(spec), spec, value, where)
    return None if got is _BAD else got, where.found


def _hint(spec: Mapping[str, Any]) -> Any:
    """The annotation a declaration stands for (the inverse of ``_schema_of``); of a value or
    null, the value's (a null is skipped where it is allowed)."""
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next(t for t in kind if t != "null")
    if kind == "array":
        return tuple[_hint(spec.get("items", {}))]  # type: ignore[misc]
    return _HINTS.get(kind, Any)


def _item(index: int, value: Any) -> str:
    """``[2]``, or ``[2] (b200-test)`` for an entry with an ``id``: the errors name it."""
    label = value.get("id") if isinstance(value, dict) else None
    return f"[{index}] ({label})" if isinstance(label, str) and label.strip() else f"[{index}]"


def _fields(declared: list, data: dict, where: _Where, closed: bool) -> tuple[dict, bool]:
    """The declared (name, key, hint, spec, required) values of ``data``; True when one
    failed. ``closed``: any other key is refused, naming the nearest declared one."""
    names = list(dict.fromkeys(k.split(".")[0] for _, k, *_ in declared))
    for unknown in [k for k in data if closed and str(k) not in names]:
        near = difflib.get_close_matches(str(unknown), names, n=1)
        hint = f"did you mean {near[0]!r}?" if near else f"valid keys: {', '.join(names)}"
        where.at(str(unknown)).fail("unknown key", hint)
    values: dict[str, Any] = {}
    failed = False
    for name, path, hint, spec, required in declared:
        value: Any = data
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        at = where.at(path, spec.get("rule"), spec.get("fix"))
        if value is None and path in data and spec.get("type") == ["object", "null"]:
            value = {}  # `manual:` written empty: a section of defaults
        if value is None:  # a null given where a type is declared: refused, as the schema does
            if required or path in data and "null" not in spec.get("type", "null"):
                about = spec.get("description")
                problem = "missing" if path not in data else "must not be empty"
                at.fail(problem, spec.get("fix") or about and f"declare it: {about}")
                failed = True
            continue
        values[name] = _value(hint, spec, value, at)
        failed = failed or values[name] is _BAD
    return values, failed


def _plain(value: Any) -> Any:
    """A field's value as JSON holds it."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return dict(value) if isinstance(value, Mapping) else value


def _schema_of(hint: Any) -> dict[str, Any]:
    """The JSON Schema an annotation stands for (``Record.schema``)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return _schema_of(next(a for a in args if a is not type(None)))
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.schema()
    if origin in (tuple, list):
        return {"type": "array", "items": _schema_of(args[0])}
    return {"type": _TYPES.get(hint, "object")}


def _public(spec: Any) -> Any:
    """``spec`` without the ``_OWN`` entries, at every depth."""
    if not isinstance(spec, Mapping):
        return spec
    return {k: _public(v) for k, v in spec.items() if k not in _OWN}


R = TypeVar("R", bound="Record")
_CODE = {"code": True}  # a field code sets: never read from the file


@dataclass(frozen=True, kw_only=True)
class Record:
    """A typed JSON or YAML object whose annotations and ``key`` declarations are its schema: no
    default = required; ``"at": "a.b"`` reads a nested key (not written back); ``data`` keeps
    unknown keys for ``to_dict`` (``CLOSED`` refuses them). ``NAME``: the bundle file; ``ERROR``,
    ``FIX``: what a problem raises."""

    NAME: ClassVar[str] = ""
    RULE: ClassVar[str] = "R5.6"
    CLOSED: ClassVar[bool] = False  # a file a user writes: an unknown key is an error
    ERROR: ClassVar[type[GpubenchError]] = BundleError
    FIX: ClassVar[str] = f"{_RESTORE}, it is written by gpubench-nb only"
    SCHEMA: ClassVar[Mapping[str, Any]] = {}  # what the annotations cannot say (oneOf)
    format_version: int = field(default=FORMAT_VERSION, metadata=_CODE)
    data: Mapping[str, Any] | None = field(default=None, repr=False, compare=False, metadata=_CODE)

    @classmethod
    def from_dict(cls: type[R], data: Any, where: str = "", path: str = "") -> R:
        """``data`` as read from ``where`` at key ``path``, upgraded and validated; ``ERROR``
        listing every problem, each naming the file, the key path, the rule and the fix."""
        at = _Where(where or cls.NAME, cls.RULE, cls.FIX, path=path)
        if cls.NAME and isinstance(data, dict):
            data = _upgraded(cls.NAME, at, data)
        record = cls._parse(data, at)
        if at.found:
            rule = at.found[0][0]
            said = (
                f"{r}: {at.file}:{f' key {k!r}:' * bool(k)} {m}; fix: {f}"
                for r, k, m, f in at.found
            )
            raise cls.ERROR("\n".join(said).removeprefix(f"{rule}: "), rule=rule)
        return record

    @classmethod
    def _parse(cls: type[R], data: Any, where: _Where) -> R:
        at = _Where(where.file, cls.RULE, where.fix, where.found, where.path)
        if not isinstance(data, dict):
            return at.fail(f"expected a JSON object, got {type(data).__name__}")
        values, failed = _fields(cls._declared(), data, at, cls.CLOSED)
        return _BAD if failed else cls(**values, data=dict(data))._checked(at)

    @classmethod
    def _declared(cls) -> list[tuple[str, str, Any, Mapping[str, Any], bool]]:
        """(name, key, annotation, declaration, required) of each field read from the file."""
        hints = typing.get_type_hints(cls)
        fields = [f for f in dataclasses.fields(cls) if "code" not in f.metadata]
        needed = {f.name for f in fields if f.default is f.default_factory is dataclasses.MISSING}
        return [
            (f.name, f.metadata.get("at", f.name), hints[f.name], f.metadata, f.name in needed)
            for f in fields
        ]

    def _checked(self: R, where: _Where) -> R:
        """The rules between fields, run once every field is valid; their problems go to
        ``where.fail``. May return the record completed (a default that follows another)."""
        return self

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The JSON Schema of this record, from its annotations (``gpubench-nb schema``)."""
        declared = cls._declared()
        properties = {k: {**_schema_of(hint), **_public(spec)} for _, k, hint, spec, _ in declared}
        required = [k for _, k, _, _, needed in declared if needed]
        doc = " ".join((cls.__doc__ or "").split("\n\n")[0].split())  # its first paragraph
        return {**schema.section(doc, properties, required), **cls.SCHEMA}

    @classmethod
    def read(cls: type[R], folder: Path | str) -> R | None:
        """``folder/<NAME>``, validated; None when absent."""
        return cls.load(Path(folder) / cls.NAME)

    @classmethod
    def load(cls: type[R], path: Path | str, fix: str | None = None) -> R | None:
        """The record in the file ``path`` (read once, here), validated; None when absent;
        ``ERROR`` naming the file, its key and ``fix`` when unreadable or malformed."""
        data = read_json(path, cls.ERROR, cls.RULE, fix or f"fix: {cls.FIX}")
        return None if data is None else cls.from_dict(data, str(path))

    @classmethod
    def write(cls: type[R], folder: Path | str, record: R | Mapping[str, Any]) -> R:
        """``folder/<NAME>`` written by ``save``."""
        return cls.save(Path(folder) / cls.NAME, record)

    @classmethod
    def save(cls: type[R], path: Path | str, record: R | Mapping[str, Any]) -> R:
        """The one writer: validated first, so no stage writes a record another cannot read;
        stamped with ``format_version``; atomic, so a kill leaves the previous file whole."""
        data = record.to_dict() if isinstance(record, Record) else dict(record)
        data["format_version"] = FORMAT_VERSION
        checked = cls.from_dict(data, str(path))
        write_json_atomic(Path(path), data)
        return checked

    def to_dict(self) -> dict[str, Any]:
        """Every key as read (unknown ones kept), with the fields set since; a record built
        in code (no ``data``) writes every field."""
        out = dict(self.data or {})
        for f in dataclasses.fields(self):
            if "code" in f.metadata or "at" in f.metadata:
                continue
            value = getattr(self, f.name)
            if self.data is None or f.name in out or value != f.default:
                out[f.name] = _plain(value)
        return out


def _upgraded(name: str, where: _Where, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` made current through ``UPGRADES``, version by version (R5.6: old bundles read).
    The one version rule of every file: absent = 1 (written before versions were stamped), else
    a whole number from 1 to ``FORMAT_VERSION``; -1, 0, true, 2.0 or a newer one is refused."""
    version = data.get("format_version", 1)
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION:
        newer = type(version) is int and version > FORMAT_VERSION
        where.at("format_version").fail(
            f"expected a version from 1 to {FORMAT_VERSION}, got {json.dumps(version)}"
            + (" (written by a newer gpubench-nb?)" if newer else ""),
            "read it with the gpubench-nb that wrote it" if newer else None,
        )
    elif version < FORMAT_VERSION:
        data = json.loads(json.dumps(data))  # the caller's object is left as it was
        for step in range(version, FORMAT_VERSION):
            data = UPGRADES.get((name, step), lambda d: d)(data)
    return data


# -- run.json ---------------------------------------------------------------------------------

DIED = "the process ended before the run finished (dead kernel, crash or timeout)"


@dataclass(frozen=True, kw_only=True)
class GpuTelemetry(Record):
    """run.json ``gpu_telemetry`` (engine/clocks.py): the GPU during the timed pass; ``flags``
    are the sentences the report shows; ``energy_joules`` a number or "not observable"."""

    RULE = "R3.6"
    observable: bool = False
    flags: tuple[str, ...] = ()
    energy_joules: float | str | None = None
    throttled: bool | None = None
    low_clock: bool | None = None

    @property
    def joules(self) -> float | None:
        return self.energy_joules if isinstance(self.energy_joules, float) else None


@dataclass(frozen=True, kw_only=True)
class SlurmAllocation(Record):
    """``environment.json`` ``slurm``: the job a bundle was measured in (R2.4, R2.5), from its
    ``SLURM_*`` variables; ``gpus_requested``: the target's ask (0: CPU partition);
    ``gpus_allocated``: what Slurm bound on this node (0 = truly none, R4.3)."""

    RULE = "R2.4"
    job_id: str
    partition: str | None = None
    node_list: str | None = None
    cpus_allocated: int | None = None
    gpus_allocated: int | None = None
    gpus_requested: int | None = None
    restart_count: int | None = None  # > 0: a requeued job (pre-emption, time limit)


@dataclass(frozen=True, kw_only=True)
class CpuActivity(Record):
    """``environment.json`` ``cpu_activity_start`` / ``_end`` (engine/environment.py): typed where
    the report counts with it; its other keys are kept as written."""

    RULE = "R2.4"
    cpu_count: int | None = None


@dataclass(frozen=True, kw_only=True)
class EnvironmentRecord(Record):
    """``environment.json`` (and run.json's ``environment``): the machine as observed (R2.4,
    R2.5), every key engine/environment.py writes; an older file lacks some (None)."""

    NAME = ENVIRONMENT_NAME
    RULE = "R2.4"
    captured_utc: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    gpu_devices: tuple[str, ...] = ()  # used, as torch names them ("cuda:0")
    gpu_uuids: tuple[str, ...] = ()  # used (R2.4, R5.3)
    visible_gpu_uuids: tuple[str, ...] = ()
    device: str | None = None
    visible_gpu_count: int | None = None  # seen, not necessarily used (R2.5)
    visible_gpu_models: tuple[str, ...] = ()
    driver_version: str | None = None
    python_version: str | None = None
    torch_version: str | None = None
    runtime_version: str | None = None  # the GPU runtime in use ("cuda 12.4"), None on CPU
    runtime_built: str | None = None  # ... the one torch was built against
    code_revision: str | None = None
    cpu_model: str | None = None  # matched against a CPU offer's model (R5.7)
    cpu_count: int | None = None  # the report prints it as a count of cores
    hostname: str | None = None
    platform: str | None = None
    python_executable: str | None = None
    pid: int | None = None
    slurm: SlurmAllocation | None = None  # None: not measured inside a Slurm job
    cuda_runtime_torch: str | None = None
    cuda_driver_runtime: str | None = None
    gpu_details: tuple[Mapping[str, Any], ...] = ()  # SKU, clocks, power limit (engine/nvml.py)
    numerics: Mapping[str, Any] | None = None  # engine/numerics.py
    # effective, read after CUDA init (engine/numerics.py)
    cuda_module_loading: str | None = field(
        default=None, metadata={"at": "numerics.cuda_module_loading.effective"}
    )
    gpu_processes_start: Any = None  # other processes on the used GPUs (R2.5), or a reason
    gpu_processes_end: Any = None
    gpu_process_survey_start: Mapping[str, Any] | None = None
    gpu_process_survey_end: Mapping[str, Any] | None = None
    load_average_start: tuple[float, ...] | None = None  # 1, 5 and 15 minutes
    load_average_end: tuple[float, ...] | None = None
    cpu_activity_start: CpuActivity | None = None
    cpu_activity_end: CpuActivity | None = None
    onnxruntime: Mapping[str, Any] | None = None  # its versions, providers, export (onnx_runtime)


@dataclass(frozen=True, kw_only=True)
class OnnxRun(Record):
    """run.json ``onnx``: the runtime onnxruntime of a run (engine/backends/onnx_runtime.py):
    its version, the execution providers its session runs (read back, not only asked), threads,
    the memory probe that can see it (R3.9) and the export's record (R1.1); absent: torch."""

    RULE = "R2.1"
    version: str | None = None
    providers: tuple[str, ...] = ()
    requested_providers: tuple[str, ...] = ()
    intra_op_threads: int | None = None  # 0: onnxruntime's own choice
    inter_op_threads: int | None = None
    memory_probe: str | None = None
    export: Mapping[str, Any] | None = None  # onnx/export.json: exporter, seconds, opset, axes


@dataclass(frozen=True, kw_only=True)
class _Observed(Record):
    """What every part of a run may end in: a failure, observed, never a time (R3.6, R5.8)."""

    error: str | None = None
    out_of_memory: bool = False  # R5.8: the failure was the device out of memory


@dataclass(frozen=True, kw_only=True)
class LoadPart(_Observed):
    """run.json's load fields, as engine/phases.py observed them (R1.1, R3.2, R3.8)."""

    load_seconds: float | None = None
    load_memory: Mapping[str, Any] | None = None
    import_seconds: float | None = None  # importing the backend's modules, before the load
    fingerprint_seconds: float | None = None  # SHA-256 of model + tokenizer, outside the load
    cuda_context_seconds: float | None = None  # context creation, outside every timer
    weight_residency_at_load_start: Mapping[str, Any] | None = None  # engine/residency.py
    model_revision: str | None = None
    tokenizer_revision: str | None = None
    backend: Mapping[str, Any] | None = None  # the loaded backend's describe()
    generation_config_effective: Mapping[str, Any] | None = None  # causal_lm (R2.5)
    generation_config_folder_overridden: tuple[str, ...] = ()
    onnx: OnnxRun | None = None  # runtime onnxruntime: its version, providers, export


@dataclass(frozen=True, kw_only=True)
class OptimisationPart(_Observed):
    """run.json's optimisation fields, as engine/optimise.py applied them (R2.1, R3.2)."""

    threads: Any = None  # the CPU threads applied
    optimisation: Mapping[str, Any] | None = None  # what was applied, each timed apart
    recompilations: int | None = None  # graphs compiled during the measured pass (R3.2)
    warmup_recompilations: int | None = None  # ... and during the declared warm-up


@dataclass(frozen=True, kw_only=True)
class PassPart(_Observed):
    """run.json's fields of the measured pass, as engine/measure.py observed it (R3.6, R3.8)."""

    elapsed_seconds: float | None = None
    memory: Mapping[str, Any] | None = None  # the pass's R3.8 readings (engine/memory.py)
    truncated_texts: int | None = None
    dropped_tokens: int | None = None
    item_count: int | None = None
    tokens_processed: int | None = None  # where the backend counts them (tokens/s)
    off_label_answers: int | None = None  # generated answers outside the classes (R1.5)
    predictions: str | None = None
    gpu_telemetry: GpuTelemetry | None = None  # the measured pass; None on CPU


@dataclass(frozen=True, kw_only=True)
class RunRecord(PassPart, OptimisationPart, LoadPart):
    """``runs/<variant>/<phase>-<n>/run.json``: what one scheduled run applied and measured,
    its parts (load, optimisation, pass) composed once by pipeline/run.py, read by rows,
    report, ledger and audit (R3.2, R3.6)."""

    NAME = RUN_NAME
    RULE = "R3.6"
    experiment_id: str | None = None
    variant_id: str | None = None  # None only in hand-made records: the folder names the run
    phase: Phase | None = None
    run_index: int | None = None
    pid: int | None = None
    status: str | None = None  # running, finished, failed, refused
    started_utc: str | None = None
    finished_utc: str | None = None
    scope: str | None = None
    warmup_iterations: int | None = None
    precision: str | None = None
    batch: int | None = None
    context: int | None = None
    batching: str | None = None
    declared_device: str | None = None
    compile: str | None = None  # how the model is run, as declared (R2.1)
    attention: str | None = None
    quantization: str | None = None
    corpus_revision: str | None = None
    generation: Mapping[str, Any] | None = None  # a prompted causal LM's options (R2.5)
    notes: str | None = None
    environment: EnvironmentRecord | None = None
    runtime: str | None = None  # what ran the model, as declared; None: torch (older runs)

    def composed(self, *parts: _Observed | None, **more: Any) -> RunRecord:
        """This record with what each part observed, in order (a value a part left at its
        default adds nothing), then ``more``; the first failure is the run's (R3.6, R5.8)."""
        values: dict[str, Any] = {}
        for part in filter(None, parts):
            for f in dataclasses.fields(part):
                value = getattr(part, f.name)
                if "code" not in f.metadata and value != f.default:
                    kept = f.name == "error" and values.get("error")
                    values[f.name] = values["error"] if kept else value
        failed = values.setdefault("error", None) is not None
        values.setdefault("out_of_memory", False)
        status = RunStatus.FAILED if failed else RunStatus.FINISHED
        return dataclasses.replace(self, **{"status": status, **values, **more})


def running_record(
    run: tuple[str, str, int],
    settings: Any,
    *,
    experiment_id: str,
    scope: str,
    warmups: int,
    corpus_revision: str,
    started: str,
) -> RunRecord:
    """run.json while the run is in progress: the settings it applies, every figure empty and
    the error ``DIED``; if the process dies, this record stays and says so (R3.6)."""
    variant_id, phase, run_index = run
    # each setting an engine function applies is recorded by name (protocol.capabilities)
    applied = (s.name for s in SETTING_SPECS if s.apply)
    declared = ("precision", "batch", "context", "batching", *applied)
    return RunRecord(
        **{name: getattr(settings, name) for name in declared},
        declared_device=settings.device,
        experiment_id=experiment_id,
        variant_id=variant_id,
        phase=Phase(phase),
        run_index=run_index,
        pid=os.getpid(),
        status=RunStatus.RUNNING,
        started_utc=started,
        scope=scope,
        warmup_iterations=warmups,
        corpus_revision=corpus_revision,
        error=DIED,
        notes=DIED,
    )


read_run = RunRecord.read  # run_folder/run.json (protocol.bundle.run_dir), or None
write_run = RunRecord.write  # the one writer of run.json (10_measure), validated, atomic


# -- schedule.json, reference.json ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ScheduledEntry(Record):
    """``schedule.json`` ``runs[]``: one drawn run, its status and the PID it ran in (R3.7)."""

    RULE = "R3.7"
    position: int
    variant_id: str
    phase: Phase
    run_index: int
    status: str = ScheduleStatus.PENDING  # DONE once its rows are in the CSV
    pid: int | None = None
    error: str | None = None
    interrupted: int | None = None  # attempts stopped by a signal, discarded (R3.6)


@dataclass(frozen=True, kw_only=True)
class ScheduleRecord(Record):
    """``schedule.json``: the drawn order of a bundle's runs (R3.4, R3.7), written anew by
    pipeline/orchestrate.py after every run, never changed in place."""

    NAME = SCHEDULE_NAME
    RULE = "R3.7"
    experiment_id: str | None = None
    order: str | None = None
    order_seed: int | None = None
    repeats: int | None = None
    runs: tuple[ScheduledEntry, ...] = ()

    @property
    def runs_done(self) -> int:
        return sum(1 for run in self.runs if run.status == ScheduleStatus.DONE)


@dataclass(frozen=True, kw_only=True)
class ReferenceRecord(Record):
    """``reference.json`` of a classify bundle: the reference quality it was judged against,
    taken from a verified benchmark bundle (R1.3, R1.5)."""

    NAME = REFERENCE_NAME
    RULE = "R1.3"
    reference_variant: str | None = None
    reference_value: float | None = None
    from_bundle: str | None = None


# -- environment.json --------------------------------------------------------------------------


def read_environment(bundle_dir: Path | str) -> EnvironmentRecord:
    """The bundle's environment.json, or an empty record when it has none."""
    return EnvironmentRecord.read(bundle_dir) or EnvironmentRecord.from_dict({})


write_environment = EnvironmentRecord.write  # the one writer (00_environment)


# -- economics.json ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class VariantEconomics(Record):
    """``economics.json`` ``variants[]``: the acceptance verdict economics priced (R5.7)."""

    variant_id: str
    status: str = "not accepted"  # "accepted" | "not accepted" | "acceptance not recorded"
    accepted: bool = False
    accepted_unique_corpora: int | None = None
    reason: str | None = None

    @property
    def verdict(self) -> bool | None:
        """True, False, or None = acceptance not recorded (R4.3: unknown is not "no")."""
        if self.accepted:
            return True
        return None if self.status == "acceptance not recorded" else False


@dataclass(frozen=True, kw_only=True)
class OfferCell(Record):
    """``offers[].variants[]``: the cost per accepted corpus of one variant on one offer."""

    variant_id: str
    accepted_results: int | None = None
    cost_per_accepted_usd_minor: int | None = None
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class OfferEconomics(Record):
    """``offers[]``: one offer's package total, attribution and costs (R5.1-R5.3, R5.7)."""

    offer_id: str
    gpu_model: str = ""
    cpu_model: str | None = None  # a CPU-only offer's hardware (gpus_per_lot 0, R5.7)
    gpus_per_lot: int = 1
    days: int | None = None
    lots: int = 1
    package_total_usd_minor: int | None = None
    declared: bool = False
    attribution: Mapping[str, Any] | None = None  # None: recorded before attribution was
    cells: tuple[OfferCell, ...] = field(default=(), metadata={"at": "variants"})
    placeholder: bool = False  # the offers table declares its prices invented examples

    def cell(self, variant_id: str) -> OfferCell | None:
        return next((c for c in self.cells if c.variant_id == variant_id), None)


@dataclass(frozen=True, kw_only=True)
class BreakEvenPair(Record):
    """``break_even.pairs[]``: a threshold, not a forecast (R5.5)."""

    challenger: str
    reference: str
    accepted_corpora_needed: int | None = None


@dataclass(frozen=True, kw_only=True)
class EconomicsRecord(Record):
    """``economics.json`` (economics.bundle_economics writes it): what report and ledger read."""

    NAME = ECONOMICS_NAME
    variants: tuple[VariantEconomics, ...] = ()
    offers: tuple[OfferEconomics, ...] = ()
    note: str | None = None
    unit_of_work: str | None = None
    break_even_pairs: tuple[BreakEvenPair, ...] = field(
        default=(), metadata={"at": "break_even.pairs"}
    )
    break_even_reason: str | None = field(default=None, metadata={"at": "break_even.reason"})

    @property
    def declared_offer(self) -> OfferEconomics | None:
        """The experiment's pricing.offer, or None when nothing was priced (R5.5)."""
        return next((o for o in self.offers if o.declared), None)


read_economics = EconomicsRecord.read  # None when 30_economics has not run
write_economics = EconomicsRecord.write  # the one writer (30_economics), validated, atomic
