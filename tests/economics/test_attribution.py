"""Attribution of a cost per accepted corpus to the offer whose hardware accepted it (R5.7)."""

from __future__ import annotations

import pytest

from gpubench_nb.economics.attribution import (
    ATTRIBUTION_RULE,
    Hardware,
    attribute,
    gpu_models_match,
    recorded_hardware,
)
from gpubench_nb.economics.offers import Offer
from gpubench_nb.protocol.records import EnvironmentRecord


@pytest.mark.parametrize(
    ("recorded", "offered", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB", True),  # torch's name vs the offer's
        ("NVIDIA H100 PCIe", "NVIDIA H100 80GB", True),  # no memory size recorded: no conflict
        ("NVIDIA H100 NVL 94GB", "NVIDIA H100 80GB", False),  # memory sizes disagree
        ("NVIDIA H200", "NVIDIA H200 141GB", True),
        ("NVIDIA B200", "NVIDIA B200 180GB", True),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H200 141GB", False),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB", False),
        ("cpu", "NVIDIA H100 80GB", False),
        ("Some Cloud GPU", "some cloud gpu", True),  # no model code: the same words only
    ],
)
def test_gpu_models_match(recorded: str, offered: str, expected: bool) -> None:
    assert gpu_models_match(recorded, offered) is expected


def _hw(models=(), count=None) -> Hardware:
    return Hardware(tuple(models), count)


def _attr(hardware: Hardware, *, offer="h100", model="NVIDIA H100 80GB", per_lot=1, declared=None):
    offered = Offer(
        id=offer, provider="test", gpu_model=model, gpus_per_lot=per_lot, package_price_usd_minor={}
    )
    return attribute(offered, 1, hardware, declared)


def test_cpu_bundle_is_never_attributed_to_a_gpu_offer_even_when_declared() -> None:
    got = _attr(_hw(count=0), declared="h100")
    assert not got.attributable and got.basis == "none"
    assert got.reason == (
        "not measured on this hardware: accepted on the CPU (no GPU used), not on a "
        "NVIDIA H100 80GB"
    )


def test_matching_gpu_is_attributed() -> None:
    got = _attr(_hw(["NVIDIA H100 80GB HBM3"], 1))
    assert got.attributable and got.basis == "gpu model" and got.lot_note is None


def test_other_gpu_is_not_attributed_even_when_declared() -> None:
    got = _attr(_hw(["NVIDIA H200"], 1), declared="h100")
    assert not got.attributable and "accepted on NVIDIA H200 × 1" in got.reason


def test_b200_lot_of_two_with_one_gpu_used_is_stated() -> None:
    got = _attr(_hw(["NVIDIA B200"], 1), offer="b200", model="NVIDIA B200 180GB", per_lot=2)
    assert got.attributable and (got.gpus_used, got.gpus_billed) == (1, 2)
    assert got.lot_note.startswith("2 GPUs billed (1 lot(s) of 2), 1 used")  # R2.5


def test_more_gpus_used_than_billed_contradicts_the_offer() -> None:
    got = _attr(_hw(["NVIDIA H100 80GB HBM3"], 2))
    assert not got.attributable and "2 GPUs used, more than the 1" in got.reason


def test_unrecorded_model_is_attributed_only_to_the_declared_offer() -> None:
    assert _attr(_hw(count=None), declared="h100").basis == "declared offer"
    assert not _attr(_hw(count=None), declared="b200").attributable


def test_recorded_hardware_reads_rows_first_then_environment() -> None:
    rows = [{"gpu_model": "NVIDIA B200", "gpu_count": 1, "device": "cuda:0"}] * 3
    env = EnvironmentRecord(gpu_model="NVIDIA H100", hostname="node-7", gpu_uuids=("GPU-1",))
    hw = recorded_hardware(rows, env)
    assert hw.gpu_models == ("NVIDIA B200",) and hw.gpu_count == 1
    cpu = recorded_hardware([{"gpu_model": None, "gpu_count": 0, "device": "cpu"}], None)
    assert cpu.describe() == "the CPU (no GPU used)"
    assert recorded_hardware([], EnvironmentRecord(gpu_model="A + B", gpu_count=2)).gpu_models == (
        "A",
        "B",
    )


def test_the_rule_is_stated_with_its_rule_numbers() -> None:
    assert "not measured on this hardware" in ATTRIBUTION_RULE and "R5.7" in ATTRIBUTION_RULE
