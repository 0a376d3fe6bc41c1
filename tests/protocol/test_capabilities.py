"""Every setting and every backend declared once (protocol.capabilities, R2.1): the schema, the
checks, the lock, the run and the report read the one entry; a new knob is one entry plus the
engine function it names."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpubench_nb.engine import optimise
from gpubench_nb.engine.backends.registry import REGISTRY
from gpubench_nb.protocol import capabilities
from gpubench_nb.protocol.capabilities import (
    BACKENDS_BY_NAME,
    OPTIMISATIONS,
    SETTING_SPECS,
    Needs,
    Setting,
    refusals,
)
from gpubench_nb.protocol.experiment_spec import SETTINGS, Settings
from gpubench_nb.protocol.records import RunRecord
from gpubench_nb.report import decision

REPO = Path(__file__).resolve().parents[2]


def test_the_schema_the_record_and_the_report_read_the_one_table() -> None:
    names = [s.name for s in SETTING_SPECS]
    assert list(SETTINGS) == names
    assert set(Settings.__dataclass_fields__) == set(names)
    assert OPTIMISATIONS == ("attention", "quantization", "compile", "threads")
    assert decision.OPTIMISATIONS is OPTIMISATIONS  # the report's optimisation sentences
    # a setting left out of old locks has the value they imply as its record default (R1.3)
    later = {s.name: s.old_default for s in SETTING_SPECS if s.later}
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert later == {k: v for k, v in defaults.items() if k in later}


def test_every_declared_engine_function_exists_and_run_json_records_its_setting() -> None:
    for s in SETTING_SPECS:
        for path in filter(None, (s.apply, s.check)):
            assert callable(optimise._function(path)), path
        if s.apply:  # recorded by name in run.json (running_record, R3.6)
            assert s.name in RunRecord.__dataclass_fields__, s.name


def test_a_backend_is_one_entry_the_registry_and_the_checks_read() -> None:
    assert {n: (e.preset, e.prompt, e.module_name) for n, e in REGISTRY.items()} == {
        b.name: (b.preset, b.prompt, b.module_name) for b in BACKENDS_BY_NAME.values()
    }
    minilm, bow = BACKENDS_BY_NAME["minilm"], BACKENDS_BY_NAME["bow"]
    # which quantisation runs on which device: read from the one declaration
    assert minilm.values("quantization", "cpu") == ("none", "int8_dynamic")
    cuda = ("none", "int8_weight_only", "int4_weight_only", "fp8")
    assert minilm.values("quantization", "cuda") == cuda
    assert bow.values("attention", "cpu") == ("auto",)  # no transformers attention
    assert "flash_attention_2" in minilm.values("attention", "cuda")
    assert "flash_attention_2" not in minilm.values("attention", "cpu")
    assert (
        "(int8_dynamic: cpu; int8_weight_only, int4_weight_only, fp8: cuda)"
        in (SETTINGS["quantization"]["description"])
    )


def _settings(**values):
    base = {s.name: s.default for s in SETTING_SPECS}
    return SimpleNamespace(**{**base, "precision": "fp32", "device": "cpu", **values})


def test_a_new_settings_conditions_are_read_from_its_entry() -> None:
    runtime = Setting(
        "runtime",
        {"enum": ["torch", "onnxruntime"], "default": "torch", "description": "the runtime"},
        old_default="torch",
        optimisation=True,
        backends=("bow", "minilm", "hf"),
        needs=(
            Needs(("onnxruntime",), "compile", ("none",), "{value} runs no torch.compile",
                  "declare compile: none"),
        ),
    )  # fmt: skip
    specs = (*SETTING_SPECS, runtime)
    assert refusals(_settings(runtime="onnxruntime"), "minilm", specs) == []
    both = refusals(_settings(runtime="onnxruntime", compile="default"), "causal_lm", specs)
    assert both == [
        ("runtime", "backend causal_lm cannot apply it",
         "use runtime: torch, or a backend among bow, minilm, hf"),
        ("runtime", "onnxruntime runs no torch.compile", "declare compile: none"),
    ]  # fmt: skip
    assert refusals(_settings(runtime="torch", compile="default"), "causal_lm", specs) == []


def test_device_auto_is_judged_where_it_runs() -> None:
    assert refusals(_settings(quantization="fp8", device="auto"), "hf") == []
    assert [p for _, p, _ in refusals(_settings(quantization="fp8"), "hf")] == [
        "fp8 (torchao) is run on CUDA devices here"
    ]
    assert refusals(_settings(quantization="fp8", device="cuda:1"), "hf") == []


_ADD_A_KNOB = r"""
import dataclasses, json, sys
from gpubench_nb.protocol import capabilities as c

runtime = c.Setting(
    "runtime", {"enum": ["torch", "onnxruntime"], "default": "torch", "description": "runtime"},
    old_default="torch", optimisation=True, backends=("bow", "minilm", "hf"),
    needs=(c.Needs(("onnxruntime",), "compile", ("none",), "{value}: no compile", "none"),),
)
c.SETTING_SPECS = (*c.SETTING_SPECS, runtime)
c.SETTINGS_BY_NAME = {s.name: s for s in c.SETTING_SPECS}
c.OPTIMISATIONS = (*c.OPTIMISATIONS, "runtime")
c.refusals.__defaults__ = (c.SETTING_SPECS,)
from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.experiment import load_experiment

exp = load_experiment(sys.argv[1])
out = {
    "values": [v.settings.runtime for v in exp.variants],
    "optimisations": [v.settings.optimisations() for v in exp.variants],
    "fixed": sorted(exp.normalised()["fixed"]),
}
try:
    load_experiment(sys.argv[2])
except ProtocolError as exc:
    out["refused"] = str(exc)
print(json.dumps(out))
"""


def test_adding_a_knob_is_one_entry(tmp_path) -> None:
    """With one more entry in the table (as a runtime would be), and nothing else changed: the
    YAML may declare it as the knob, the variants carry it, its default stays out of the lock,
    and its conditions are refused by validate (R2.1, R1.3)."""
    import yaml

    from tests.support.experiments import declaration

    def write(name: str, **changes) -> Path:
        data = declaration(model={"backend": "minilm"}, knob="runtime", **changes)
        data["variants"] = [{"id": "b1", "runtime": "torch"}, {"id": "o", "runtime": "onnxruntime"}]
        data["fixed"] = {**data["fixed"], "batch": 4}
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    good = write("good.yaml")
    bad = write("bad.yaml", fixed={"compile": "default"})
    done = subprocess.run(
        [sys.executable, "-c", _ADD_A_KNOB, str(good), str(bad)],
        capture_output=True, text=True, cwd=REPO, check=True,
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert out["values"] == ["torch", "onnxruntime"]
    assert out["optimisations"] == [{}, {"runtime": "onnxruntime"}]
    assert "runtime" not in out["fixed"]
    assert (
        "R2.1" in out["refused"]
        and "variants[o].runtime: onnxruntime: no compile" in (out["refused"])
    )


@pytest.mark.parametrize("name", [s.name for s in SETTING_SPECS if s.packages])
def test_a_missing_package_is_named_with_its_install_line(name, monkeypatch) -> None:
    setting = capabilities.SETTINGS_BY_NAME[name]
    value, (module, pip) = next(iter(setting.packages.items()))
    monkeypatch.setattr(optimise.importlib.util, "find_spec", lambda n: None)
    s = _settings(**{name: value})
    device = SimpleNamespace(type="cpu")
    assert f"{name} {value} needs the {module} package ({pip})" in optimise._missing(s, device)
