"""Environment actually used (R2.4), concurrent activity and code revision in notes (R2.5)."""

from __future__ import annotations

import platform
import subprocess
from types import SimpleNamespace

import pytest
import torch

from gpubench_nb.engine import environment as envmod
from gpubench_nb.engine.environment import (
    ROW_FIELDS,
    capture_environment,
    code_revision,
    devices_used,
    environment_notes,
    finish_environment,
)
from gpubench_nb.protocol.results import COLUMNS


def row_fields(env: dict) -> dict:
    """The R2.4 columns of a row, as the pipeline takes them from ``env``."""
    return {name: env.get(name) for name in ROW_FIELDS}


def test_cpu_run_has_empty_gpu_fields_not_zeros_r4_3() -> None:
    env = capture_environment(torch.device("cpu"))
    fields = row_fields(env)
    assert set(fields) == set(ROW_FIELDS) and set(fields) <= set(COLUMNS)
    assert fields["gpu_model"] is None
    assert fields["driver_version"] is None
    assert fields["runtime_version"] is None
    # Documented choice: the count of GPUs used on a CPU run is observed and truly zero.
    assert fields["gpu_count"] == 0
    assert fields["device"] == "cpu"
    assert fields["python_version"] == platform.python_version()
    assert fields["torch_version"] == torch.__version__
    assert env["gpu_processes_start"] is None  # not observable on CPU, not "none"


def test_devices_used_are_those_of_the_model_not_the_visible_ones() -> None:
    model = torch.nn.Linear(2, 2, device="meta")
    assert devices_used(model) == [torch.device("meta")]
    holder = SimpleNamespace(module=torch.nn.Linear(2, 2), device=torch.device("cpu"))
    assert devices_used(holder) == [torch.device("cpu")]
    assert devices_used(None) == []
    env = capture_environment(used=torch.nn.Linear(2, 2))
    assert env["device"] == "cpu" and env["gpu_count"] == 0


def test_gpu_fields_count_used_devices_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Fake H100")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(envmod, "driver_version", lambda: "nvidia 550.1")
    monkeypatch.setattr(envmod, "load_nvml", lambda: None)
    monkeypatch.setattr(envmod, "runtime_version", lambda: "cuda 12.4")
    env = capture_environment(used=[torch.device("cuda", 1)])
    assert env["visible_gpu_count"] == 4
    assert row_fields(env) == {
        "gpu_model": "Fake H100",
        "gpu_count": 1,  # one of four visible GPUs actually used (R2.5)
        "device": "cuda:1",
        "driver_version": "nvidia 550.1",
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "runtime_version": "cuda 12.4",
    }
    two = capture_environment(used=[torch.device("cuda", 0), torch.device("cuda", 1)])
    assert two["gpu_count"] == 2 and two["device"] == "cuda:0,cuda:1"


def test_gpu_uuids_used_and_visible_name_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Fake H100")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda i: SimpleNamespace(uuid=f"0000000{i}-aaaa-bbbb-cccc-dddddddddddd"),
    )
    monkeypatch.setattr(envmod, "driver_version", lambda: None)
    monkeypatch.setattr(envmod, "load_nvml", lambda: None)
    env = capture_environment(used=[torch.device("cuda", 1)])
    assert env["gpu_uuids"] == ["GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"]  # the one used
    assert env["visible_gpu_uuids"] == [
        "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",
        "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd",
    ]
    cpu = capture_environment(torch.device("cpu"))
    assert cpu["gpu_uuids"] == [] and "hostname" in cpu


def test_other_gpu_processes_exclude_this_one(monkeypatch: pytest.MonkeyPatch) -> None:
    me = envmod.os.getpid()
    fake = SimpleNamespace(
        nvmlDeviceGetHandleByUUID=lambda uuid: object(),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=me, usedGpuMemory=10),
            SimpleNamespace(pid=4242, usedGpuMemory=2048),
        ],
        nvmlDeviceGetGraphicsRunningProcesses=lambda h: [
            SimpleNamespace(pid=7, usedGpuMemory=None)
        ],
    )
    monkeypatch.setattr(envmod, "load_nvml", lambda: fake)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: SimpleNamespace(uuid="1234-abcd")
    )
    survey = envmod.gpu_process_survey([torch.device("cuda", 0)])
    procs = survey["foreign"]
    assert procs == [
        {"device": "cuda:0", "pid": 4242, "used_bytes": 2048},
        {"device": "cuda:0", "pid": 7, "used_bytes": None},
    ]
    env = {
        "code_revision": "git:abc",
        "gpu_process_survey_start": survey,
        "load_average_start": [1, 2, 3],
    }
    notes = environment_notes(env)
    assert "pid 4242 on cuda:0 (2048 B)" in notes and "code=git:abc" in notes
    assert envmod.gpu_process_survey([torch.device("cpu")]) is None


def test_environment_records_numerics_activity_and_sku_not_observable(monkeypatch) -> None:
    """R2.4/R2.5: what changes a number is in environment.json and in the notes; without
    NVML every GPU detail is "not observable", never "none"."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Fake H200")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(envmod, "load_nvml", lambda: None)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE", raising=False)
    env = finish_environment(capture_environment(used=[torch.device("cuda", 0)]))
    numerics = env["numerics"]
    assert numerics["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert numerics["environment"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert set(numerics["sdpa_backends_enabled"]) == {"flash", "mem_efficient", "math", "cudnn"}
    assert env["cuda_driver_runtime"] == "not observable"
    assert env["cuda_runtime_torch"] == torch.version.cuda
    assert env["gpu_details"] == [{"device": "cuda:0", "nvml": "not observable"}]
    assert env["gpu_processes_start"] is None and env["gpu_processes_end"] is None
    assert env["cpu_activity_start"]["load_average_1min"] is not None
    notes = environment_notes(env)
    assert "other_gpu_processes_start=not observable" in notes
    assert "other_gpu_processes_end=not observable" in notes
    assert "other_gpu_processes_start=none" not in notes
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in notes
    assert "NVIDIA_TF32_OVERRIDE=unset" in notes
    assert "cuda:0: SKU details not observable" in notes
    assert "machine_start: load1=" in notes and "machine_end: load1=" in notes


def test_finish_adds_end_activity() -> None:
    env = capture_environment(torch.device("cpu"))
    assert env["load_average_end"] is None
    done = finish_environment(env)
    assert done["load_average_end"] is not None and env["load_average_end"] is None
    notes = environment_notes(done)
    assert "load_avg_start=" in notes and "load_avg_end=" in notes
    assert "other_gpu_processes_start=not observable" in notes
    assert f"code={env['code_revision']}" in notes


def _git(repo, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True,
        capture_output=True,
    )


def test_code_revision_outside_a_checkout_is_the_package_version(tmp_path) -> None:
    """Outside a checkout the installed version stands for the code: built by setuptools-scm,
    it names the commit (0.1.1.devN+g<hash>), so a bundle still says which code made it."""
    from importlib.metadata import version

    assert code_revision(tmp_path) == f"package:gpubench-nb=={version('gpubench-nb')}"


def test_code_revision_has_commit_and_dirty_flag_r2_5(tmp_path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    clean = code_revision(tmp_path)
    assert clean.startswith("git:") and len(clean) == len("git:") + 40
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_revision(tmp_path) == clean + "-dirty"


@pytest.mark.gpu
def test_cuda_environment_is_filled() -> None:
    """On any CUDA or ROCm machine: NVML is optional (absent on ROCm), so NVML-backed fields
    are either observed or say "not observable", never "none"."""
    env = capture_environment(used=torch.nn.Linear(2, 2, device="cuda"))
    assert env["gpu_count"] == 1 and env["gpu_model"]
    assert env["runtime_version"].startswith(("cuda ", "hip "))
    assert env["driver_version"]  # NVML on NVIDIA, the amdgpu module version on ROCm
    survey = env["gpu_process_survey_start"]
    if survey["observable"]:
        assert survey["foreign"] is None or isinstance(survey["foreign"], list)
        if survey["pids_comparable"]:
            assert all(p["pid"] != envmod.os.getpid() for p in survey["foreign"])
    else:
        assert env["gpu_processes_start"] is None and survey["reason"]
    details = env["gpu_details"][0]
    assert details.get("nvml") == "not observable" or details["board_name"]
    if getattr(torch.version, "hip", None):
        assert env["cuda_driver_runtime"] == "not observable"
    assert env["numerics"]["cudnn_version"] is not None


# --- issue 23 §4: the effective CUDA_MODULE_LOADING, read after CUDA initialisation -----------


class FakeCuda:
    def __init__(self, initialised: bool) -> None:
        self.initialised = initialised

    def is_initialized(self) -> bool:
        return self.initialised


def test_module_loading_set_by_torch_at_init_is_recorded_as_effective() -> None:
    """The H200 case: the process started without CUDA_MODULE_LOADING (os.environ says
    unset), torch set LAZY with C setenv when it initialised CUDA; the record says LAZY, and
    who set it. Before issue 23 the notes said CUDA_MODULE_LOADING=unset."""
    from gpubench_nb.engine.numerics import module_loading, numerics_note

    c_env = {"CUDA_MODULE_LOADING": "LAZY"}  # what libc getenv sees after init
    record = module_loading(FakeCuda(True), getenv=c_env.get, environ={})
    assert record == {
        "effective": "LAZY",
        "at_start": None,
        "source": "set by torch when it initialised CUDA",
    }
    note = numerics_note({"environment": {}, "cuda_module_loading": record})
    assert "CUDA_MODULE_LOADING=LAZY (set by torch when it initialised CUDA)" in note
    assert "CUDA_MODULE_LOADING=unset" not in note


def test_module_loading_given_by_the_user_and_before_init() -> None:
    from gpubench_nb.engine.numerics import module_loading

    user = module_loading(
        FakeCuda(True),
        getenv={"CUDA_MODULE_LOADING": "EAGER"}.get,
        environ={"CUDA_MODULE_LOADING": "EAGER"},
    )
    assert user["effective"] == "EAGER" and user["source"] == "set before the process started"
    before = module_loading(FakeCuda(False), getenv=lambda name: "LAZY", environ={})
    assert before["effective"] == "not observable"
    assert before["source"] == "CUDA not initialised in this process"


def test_libc_getenv_sees_what_c_setenv_wrote() -> None:
    """The reason os.environ is not enough: a C-level setenv (what torch's CUDA init does)
    is invisible to os.environ and visible to the reader used for the record."""
    import ctypes
    import os

    from gpubench_nb.engine.numerics import _libc_getenv

    libc = ctypes.CDLL(None)
    libc.setenv(b"GPUBENCH_TEST_C_ONLY", b"LAZY", 1)
    try:
        assert "GPUBENCH_TEST_C_ONLY" not in os.environ
        assert _libc_getenv("GPUBENCH_TEST_C_ONLY") == "LAZY"
    finally:
        libc.unsetenv(b"GPUBENCH_TEST_C_ONLY")


@pytest.mark.gpu
def test_effective_module_loading_on_a_real_gpu() -> None:
    """On a GPU, after CUDA init, the record names the mode in force (LAZY where torch set it),
    never 'unset' or not observable (issue 23 §4)."""
    from gpubench_nb.engine.numerics import numeric_settings

    torch.cuda.init()
    record = numeric_settings()["cuda_module_loading"]
    assert record["effective"] in ("LAZY", "EAGER"), record
