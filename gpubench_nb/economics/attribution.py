"""Which offer earned a cost per accepted corpus: the one whose hardware accepted it (R2.4, R5.7).

Pure functions over what a bundle recorded (its rows and ``environment.json``) and what an offer
names (``gpu_model``, ``gpus_per_lot``, or ``cpu_model`` for CPU-only hardware): nothing is read
from disk here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ATTRIBUTION_RULE = (
    "A cost per accepted corpus belongs to an offer only when the corpus was accepted on that "
    "offer's hardware: the GPU model recorded by the runs matches the offer's gpu_model (same "
    "model code, e.g. H100; same memory size when both state one) and no more GPUs were used "
    "than the package bills, or the bundle declares that offer (pricing.offer) and the recorded "
    "hardware does not contradict it (no GPU model recorded, and not a CPU-only run). A CPU-only "
    "offer (gpus_per_lot: 0) follows the same rule by its cpu_model: the run used no GPU and "
    "environment.json records the same CPU model, or it is the declared offer and no CPU model "
    "was recorded. Any other offer shows its package total and 'not measured on this "
    "hardware' (R2.4, R5.3, R5.7). GPUs billed but not used are stated, not hidden (R2.5)."
)
NOT_MEASURED = "not measured on this hardware"
_VENDOR_WORDS = {"nvidia", "amd", "tesla", "geforce", "radeon", "instinct", "intel"}


@dataclass(frozen=True)
class Hardware:
    """What a bundle recorded about the hardware it ran on (R2.4)."""

    gpu_models: tuple[str, ...]  # distinct recorded GPU models; empty = none recorded
    gpu_count: int | None  # GPUs used (largest over runs); 0 = CPU only; None = not recorded
    device: str | None
    hostname: str | None
    gpu_uuids: tuple[str, ...]  # the GPUs used, as recorded in environment.json
    visible_gpu_uuids: tuple[str, ...]  # every GPU the machine showed (not necessarily used)
    cpu_model: str | None = None  # environment.json's model name of the CPU

    def describe(self) -> str:
        """``NVIDIA H100 80GB HBM3 × 1``, ``the CPU <model> (no GPU used)`` or ``hardware not
        recorded``."""
        if self.gpu_count == 0:
            return f"the CPU{f' {self.cpu_model}' if self.cpu_model else ''} (no GPU used)"
        if self.gpu_models:
            count = f" × {self.gpu_count}" if self.gpu_count else ""
            return f"{' + '.join(self.gpu_models)}{count}"
        if self.gpu_count:
            return f"{self.gpu_count} GPU(s) of unrecorded model"
        return "hardware not recorded"


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def recorded_hardware(
    rows: Sequence[Mapping[str, Any]], environment: Mapping[str, Any] | None
) -> Hardware:
    """The hardware a bundle used: the rows' GPU columns first (per run), else environment.json."""
    env = environment or {}
    models: list[str] = []
    for value in [r.get("gpu_model") for r in rows] or [env.get("gpu_model")]:
        for part in str(value or "").split(" + "):  # environment joins mixed models with " + "
            if part.strip() and part.strip() not in models:
                models.append(part.strip())
    if not models and env.get("gpu_model"):
        models = [p.strip() for p in str(env["gpu_model"]).split(" + ") if p.strip()]
    counts = [c for c in (_int(r.get("gpu_count")) for r in rows) if c is not None]
    count = max(counts) if counts else _int(env.get("gpu_count"))
    devices = list(dict.fromkeys(str(r["device"]) for r in rows if r.get("device")))
    return Hardware(
        gpu_models=tuple(models),
        gpu_count=count,
        device=", ".join(devices) or env.get("device"),
        hostname=env.get("hostname"),
        gpu_uuids=tuple(env.get("gpu_uuids") or ()),
        visible_gpu_uuids=tuple(env.get("visible_gpu_uuids") or ()),
        cpu_model=env.get("cpu_model") or None,
    )


def _tokens(model: str) -> tuple[set[str], set[str], str]:
    words = [w for w in re.findall(r"[a-z0-9]+", model.lower()) if w not in _VENDOR_WORDS]
    memory = {w for w in words if re.fullmatch(r"\d+gb?", w)}
    codes = {w for w in words if w not in memory and re.search(r"\d", w) and re.search("[a-z]", w)}
    return codes, memory, " ".join(words)


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def gpu_models_match(recorded: str, offered: str) -> bool:
    """True when a recorded GPU model is the offer's: its model codes (``h100``) are all in the
    recorded name, and the memory sizes agree where both state one.

    ``NVIDIA H100 80GB HBM3`` (as torch names it) matches an offer's ``NVIDIA H100 80GB``;
    ``NVIDIA H200`` does not match ``NVIDIA H100 80GB``. An offer name without a model code is
    matched only by the same words.
    """
    rec_codes, rec_memory, rec_words = _tokens(recorded)
    off_codes, off_memory, off_words = _tokens(offered)
    if not off_codes:
        return rec_words == off_words and bool(off_words)
    if not off_codes <= rec_codes:
        return False
    return not (rec_memory and off_memory and rec_memory != off_memory)


@dataclass(frozen=True)
class Attribution:
    """Whether ``offer_id`` may carry a cost per accepted corpus measured by one bundle."""

    offer_id: str
    attributable: bool
    basis: str  # "gpu model" | "declared offer" | "none"
    reason: str
    gpus_used: int | None
    gpus_billed: int
    lot_note: str | None  # GPUs billed but not used, stated (R2.5)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attribution:
        """An attribution as economics.json records it (``to_dict``), read back."""
        return cls(
            offer_id=str(data.get("offer_id")),
            attributable=data.get("attributable") is True,
            basis=str(data.get("basis") or "none"),
            reason=str(data.get("reason") or ""),
            gpus_used=_int(data.get("gpus_used")),
            gpus_billed=_int(data.get("gpus_billed")) or 0,
            lot_note=data.get("lot_note"),
        )


def attribute(
    *,
    offer_id: str,
    offer_gpu_model: str,
    gpus_per_lot: int,
    lots: int,
    hardware: Hardware,
    declared_offer_id: str | None,
    offer_cpu_model: str | None = None,
) -> Attribution:
    """Apply ATTRIBUTION_RULE to one offer and one bundle's recorded hardware."""
    billed = gpus_per_lot * lots
    used = hardware.gpu_count
    lot_note = None
    if used is not None and 0 < used < billed:
        lot_note = (
            f"{billed} GPUs billed ({lots} lot(s) of {gpus_per_lot}), {used} used: a package "
            "of several GPUs does not mean the program used them all (R2.5)"
        )

    def result(ok: bool, basis: str, reason: str) -> Attribution:
        return Attribution(offer_id, ok, basis, reason, used, billed, lot_note if ok else None)

    seen = hardware.describe()
    if gpus_per_lot == 0:  # CPU-only hardware: the same rule, by the CPU's model name
        offered = f"the CPU-only {offer_cpu_model}"
        recorded = hardware.cpu_model
        if used == 0 and recorded and _words(recorded) == _words(offer_cpu_model or ""):
            return result(True, "cpu model", f"accepted on {seen}, {offered} without a GPU")
        if used == 0 and not recorded and offer_id == declared_offer_id:
            return result(
                True,
                "declared offer",
                f"the bundle declares this offer and its recorded hardware ({seen}) does not "
                "contradict it",
            )
        return result(False, "none", f"{NOT_MEASURED}: accepted on {seen}, not on {offered}")
    if used == 0:
        return result(
            False, "none", f"{NOT_MEASURED}: accepted on {seen}, not on a {offer_gpu_model}"
        )
    if hardware.gpu_models:
        wrong = [m for m in hardware.gpu_models if not gpu_models_match(m, offer_gpu_model)]
        if wrong:
            return result(
                False, "none", f"{NOT_MEASURED}: accepted on {seen}, not on a {offer_gpu_model}"
            )
        if used is not None and used > billed:
            return result(
                False,
                "none",
                f"{NOT_MEASURED}: {used} GPUs used, more than the {billed} this package bills",
            )
        return result(True, "gpu model", f"accepted on {seen}, the offer's GPU ({offer_gpu_model})")
    if offer_id == declared_offer_id:
        return result(
            True,
            "declared offer",
            f"the bundle declares this offer and its recorded hardware ({seen}) does not "
            "contradict it",
        )
    return result(
        False,
        "none",
        f"{NOT_MEASURED}: no GPU model recorded, and this is not the offer the bundle declares",
    )
