"""Which offer earns a cost per accepted corpus: the one whose hardware accepted it (R2.4, R5.7)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpubench_nb.economics.offers import Offer
from gpubench_nb.protocol.records import EnvironmentRecord, Record

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
    cpu_model: str | None = None  # environment.json's model name of the CPU

    def describe(self) -> str:
        """``NVIDIA H100 80GB HBM3 × 1``, ``the CPU <model> (no GPU used)``, ..., in words."""
        if self.gpu_count == 0:
            return f"the CPU{f' {self.cpu_model}' if self.cpu_model else ''} (no GPU used)"
        if self.gpu_models:
            count = f" × {self.gpu_count}" if self.gpu_count else ""
            return f"{' + '.join(self.gpu_models)}{count}"
        if self.gpu_count:
            return f"{self.gpu_count} GPU(s) of unrecorded model"
        return "hardware not recorded"


def recorded_hardware(
    rows: Sequence[Mapping[str, Any]], environment: EnvironmentRecord | None
) -> Hardware:
    """The hardware a bundle used: the rows' GPU columns (per run), else environment.json's."""
    env = environment or EnvironmentRecord()
    named = [r["gpu_model"] for r in rows if r.get("gpu_model")] or [env.gpu_model or ""]
    models = dict.fromkeys(p.strip() for v in named for p in str(v).split(" + ") if p.strip())
    counts = [r["gpu_count"] for r in rows if r.get("gpu_count") is not None]
    count = max(counts) if counts else env.gpu_count
    return Hardware(tuple(models), count, env.cpu_model or None)


def _tokens(model: str) -> tuple[set[str], set[str], str]:
    words = [w for w in re.findall(r"[a-z0-9]+", model.lower()) if w not in _VENDOR_WORDS]
    memory = {w for w in words if re.fullmatch(r"\d+gb?", w)}
    codes = {w for w in words if w not in memory and re.search(r"\d", w) and re.search("[a-z]", w)}
    return codes, memory, " ".join(words)


def gpu_models_match(recorded: str, offered: str) -> bool:
    """The offer's model codes (``h100``) are in the recorded name and stated memories agree."""
    rec_codes, rec_memory, rec_words = _tokens(recorded)
    off_codes, off_memory, off_words = _tokens(offered)
    if not off_codes:
        return rec_words == off_words and bool(off_words)
    if not off_codes <= rec_codes:
        return False
    return not (rec_memory and off_memory and rec_memory != off_memory)


@dataclass(frozen=True, kw_only=True)
class Attribution(Record):
    """Whether ``offer_id`` may carry one bundle's cost per accepted corpus (economics.json)."""

    offer_id: str
    attributable: bool = False
    basis: str = "none"  # "gpu model" | "cpu model" | "declared offer" | "none"
    reason: str = ""
    gpus_used: int | None = None
    gpus_billed: int = 0
    lot_note: str | None = None  # GPUs billed but not used, stated (R2.5)


def attribute(
    offer: Offer, lots: int, hardware: Hardware, declared_offer_id: str | None
) -> Attribution:
    """Apply ATTRIBUTION_RULE to one offer and one bundle's recorded hardware."""
    billed, used, seen = offer.gpus_per_lot * lots, hardware.gpu_count, hardware.describe()
    lot_note = None
    if used is not None and 0 < used < billed:
        lot_note = (
            f"{billed} GPUs billed ({lots} lot(s) of {offer.gpus_per_lot}), {used} used: a "
            "package of several GPUs does not mean the program used them all (R2.5)"
        )
    common = {"offer_id": offer.id, "gpus_used": used, "gpus_billed": billed}

    def result(ok: bool, basis: str, reason: str) -> Attribution:
        note = lot_note if ok else None
        return Attribution(**common, attributable=ok, basis=basis, reason=reason, lot_note=note)

    declared, wrong = offer.id == declared_offer_id, f"not on a {offer.gpu_model}"
    if offer.gpus_per_lot == 0:  # CPU-only hardware: the same rule, by the CPU's model name
        cpu, offered = hardware.cpu_model, f"the CPU-only {offer.cpu_model}"
        if used == 0 and cpu and cpu.lower().split() == (offer.cpu_model or "").lower().split():
            return result(True, "cpu model", f"accepted on {seen}, {offered} without a GPU")
        if not (used == 0 and not cpu and declared):
            return result(False, "none", f"{NOT_MEASURED}: accepted on {seen}, not on {offered}")
    elif used == 0 or any(not gpu_models_match(m, offer.gpu_model) for m in hardware.gpu_models):
        return result(False, "none", f"{NOT_MEASURED}: accepted on {seen}, {wrong}")
    elif hardware.gpu_models and used is not None and used > billed:
        more = f"{used} GPUs used, more than the {billed} this package bills"
        return result(False, "none", f"{NOT_MEASURED}: {more}")
    elif hardware.gpu_models:
        return result(True, "gpu model", f"accepted on {seen}, the offer's GPU ({offer.gpu_model})")
    elif not declared:
        other = "no GPU model recorded, and this is not the offer the bundle declares"
        return result(False, "none", f"{NOT_MEASURED}: {other}")
    return result(
        True,
        "declared offer",
        f"the bundle declares this offer and its recorded hardware ({seen}) does not contradict it",
    )
