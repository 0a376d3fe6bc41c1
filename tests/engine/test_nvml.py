"""NVML facts with a fake pynvml (R2.4, R2.5): UUID matching without a silent GPU 0, MIG,
host PIDs in a container, failed queries as "not observable", SKU details."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpubench_nb.engine import nvml as nv

NOT_OBSERVABLE = "not observable"


class FakeNvml:
    """GPUs by UUID; ``procs`` per handle; any method can be made to fail."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def __init__(self, uuids, *, procs=None, fail=(), mig=False, parent=None):
        self.uuids = list(uuids)
        self.procs = procs or {}
        self.fail = set(fail)
        self.mig = mig
        self.parent = parent

    def _check(self, name):
        if name in self.fail:
            raise RuntimeError(f"NVML_ERROR_NOT_SUPPORTED in {name}")

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self._check("byuuid")
        if uuid not in self.uuids:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return uuid

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.uuids[index]

    def nvmlDeviceGetCount(self):
        return len(self.uuids)

    def nvmlDeviceGetMigMode(self, handle):
        self._check("mig")
        return [1, 1] if self.mig else [0, 0]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        self._check("compute")
        return self.procs.get(handle, [])

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        self._check("graphics")
        return []

    def nvmlDeviceIsMigDeviceHandle(self, handle):
        return handle.startswith("MIG-")

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle):
        return self.parent

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3" if handle == self.parent else b"NVIDIA H200"

    def nvmlDeviceGetBoardPartNumber(self, handle):
        self._check("part")
        return "692-2G520-0200-000"

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return 700000

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 650000

    def nvmlDeviceGetClockInfo(self, handle, kind):
        self._check("clock")
        return 1980 if kind == 1 else 2619

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return 1980

    def nvmlDeviceGetPersistenceMode(self, handle):
        return 1

    def nvmlDeviceGetEccMode(self, handle):
        return [1, 0]

    def nvmlSystemGetCudaDriverVersion(self):
        return 12080


def cuda(uuid):
    """torch.cuda as far as get_device_properties(i).uuid goes."""
    return SimpleNamespace(get_device_properties=lambda i: SimpleNamespace(uuid=uuid))


def test_uuid_match_and_no_silent_gpu0_on_mig() -> None:
    fake = FakeNvml(["GPU-aaaa", "GPU-bbbb"])
    assert nv.handle_for(fake, 0, cuda("bbbb")) == "GPU-bbbb"  # not index 0
    mig = FakeNvml(["GPU-aaaa", "MIG-cccc"])
    assert nv.handle_for(mig, 0, cuda("cccc")) == "MIG-cccc"
    # torch's UUID unknown to NVML: not observable, never GPU 0
    assert nv.handle_for(fake, 0, cuda("zzzz")) is None
    # no UUID from torch: index only without MIG, through CUDA_VISIBLE_DEVICES
    assert nv.handle_for(fake, 0, cuda(""), {"CUDA_VISIBLE_DEVICES": "1"}) == "GPU-bbbb"
    assert nv.handle_for(fake, 0, cuda(""), {"CUDA_VISIBLE_DEVICES": "MIG-cccc"}) is None
    on_mig = FakeNvml(["GPU-aaaa"], mig=True)
    assert nv.handle_for(on_mig, 0, cuda(""), {}) is None


def test_process_survey_both_queries_failing_is_not_observable(monkeypatch) -> None:
    fake = FakeNvml(["GPU-aaaa"], fail={"compute", "graphics"})
    survey = nv.process_survey(fake, [0], own_pid=10, torch_cuda=cuda("aaaa"))
    assert survey["observable"] is False and survey["foreign"] is None
    assert "both NVML process queries failed" in survey["reason"]
    assert nv.survey_text(survey) == NOT_OBSERVABLE
    assert nv.process_survey(None, [0])["observable"] is False
    one_fails = FakeNvml(["GPU-aaaa"], fail={"graphics"})
    survey = nv.process_survey(one_fails, [0], own_pid=10, torch_cuda=cuda("aaaa"))
    assert survey["observable"] is True and survey["foreign"] == []
    assert nv.survey_text(survey) == "none"


def test_process_survey_in_another_pid_namespace_does_not_list_itself_as_foreign() -> None:
    procs = {"GPU-aaaa": [SimpleNamespace(pid=81234, usedGpuMemory=600 << 20)]}
    fake = FakeNvml(["GPU-aaaa"], procs=procs)
    # We hold a context, NVML lists one process, none with our PID: host PIDs (container).
    survey = nv.process_survey(fake, [0], own_pid=17, holds_context=True, torch_cuda=cuda("aaaa"))
    assert survey["observable"] is True and survey["pids_comparable"] is False
    assert survey["foreign"] is None and len(survey["seen"]) == 1
    assert nv.survey_text(survey).startswith("not comparable (1 GPU process(es)")
    # Same PID namespace: we are found and excluded.
    mine = nv.process_survey(fake, [0], own_pid=81234, holds_context=True, torch_cuda=cuda("aaaa"))
    assert mine["pids_comparable"] is True and mine["foreign"] == []
    # No context yet (00_environment): whatever NVML lists is someone else's.
    before = nv.process_survey(fake, [0], own_pid=17, torch_cuda=cuda("aaaa"))
    assert before["foreign"] == [{"device": "0", "pid": 81234, "used_bytes": 600 << 20}]
    # A context held but nothing listed at all: NVML cannot see processes here.
    empty = nv.process_survey(
        FakeNvml(["GPU-aaaa"]), [0], own_pid=17, holds_context=True, torch_cuda=cuda("aaaa")
    )
    assert empty["observable"] is False


def test_sku_details_and_not_observable_fields() -> None:
    fake = FakeNvml(["GPU-aaaa"], fail={"part"})
    (row,) = nv.sku_details(fake, [0], cuda("aaaa"))
    assert row["board_name"] == "NVIDIA H200"
    assert row["form_factor"] == "not stated by NVML"
    assert row["board_part_number"] == NOT_OBSERVABLE
    assert (row["power_limit_watts"], row["enforced_power_limit_watts"]) == (700.0, 650.0)
    assert (row["sm_clock_mhz"], row["memory_clock_mhz"]) == (1980, 2619)
    assert row["persistence_mode"] == "on" and row["mig_mode"] == "off"
    assert row["ecc_mode"] == "on (pending off)"
    # A MIG slice: clocks and limits come from the parent GPU.
    mig = FakeNvml(["GPU-pppp", "MIG-cccc"], parent="GPU-pppp", mig=True)
    (slice_row,) = nv.sku_details(mig, [0], cuda("cccc"))
    assert slice_row["is_mig_slice"] is True
    assert slice_row["board_name"] == "NVIDIA H100 80GB HBM3"
    assert slice_row["form_factor"].startswith("SXM")
    # No handle: the whole row says so.
    assert nv.sku_details(None, [0]) == [{"device": "0", "nvml": NOT_OBSERVABLE}]
    assert nv.sku_details(fake, [0], cuda("zzzz")) == [{"device": "0", "nvml": NOT_OBSERVABLE}]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("NVIDIA H100 PCIe", "PCIe"), ("NVIDIA H100 SXM5 80GB", "SXM"), ("NVIDIA H100 NVL", "NVL")],
)
def test_form_factor_from_board_name(name, expected) -> None:
    assert nv.form_factor(name) == expected


def test_cuda_driver_runtime() -> None:
    assert nv.cuda_driver_runtime(FakeNvml([])) == "cuda 12.8"
    assert nv.cuda_driver_runtime(None) == NOT_OBSERVABLE
