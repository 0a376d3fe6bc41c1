"""How the model is run (compile, attention, quantization, threads): declared, validated and
frozen like every other setting (R2.1, R1.3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import canonical_sha256
from tests.support.experiments import declaration


def _declaration(**changes) -> dict:
    data = declaration(
        experiment_id="opt",
        corpus={"train": None},
        quality={"reference_variant": "q0"},
        model={"backend": "hf"},
        fixed={"batch": 8, "device": "cpu"},
        knob="quantization",
        variants=[
            {"id": "q0", "quantization": "none"},
            {"id": "q8", "quantization": "int8_dynamic"},
        ],
    )
    data.update(changes)
    data["fixed"] = {k: v for k, v in data["fixed"].items() if k != data["knob"]}
    return data


def _load(tmp_path: Path, data: dict):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_experiment(path)


def _error(tmp_path: Path, data: dict) -> str:
    with pytest.raises(ProtocolError) as caught:
        _load(tmp_path, data)
    return str(caught.value)


@pytest.mark.parametrize(
    ("knob", "values"),
    [
        ("quantization", ["none", "int8_dynamic"]),
        ("compile", ["none", "default"]),
        ("attention", ["eager", "sdpa"]),
        ("threads", [1, 2]),
    ],
)
def test_each_new_setting_is_a_knob(tmp_path, knob, values) -> None:
    variants = [{"id": f"v{i}", knob: value} for i, value in enumerate(values)]
    quality = {**_declaration()["quality"], "reference_variant": "v0"}
    exp = _load(tmp_path, _declaration(knob=knob, variants=variants, quality=quality))
    assert [getattr(v.settings, knob) for v in exp.variants] == values
    assert [v["id"] for v in exp.normalised()["variants"]] == ["v0", "v1"]
    # the knob's values are frozen in the lock, even a default one (R1.3)
    assert [v[knob] for v in exp.normalised()["variants"]] == values


def test_a_fixed_optimisation_is_frozen_and_applies_to_every_variant(tmp_path) -> None:
    fixed = {**_declaration()["fixed"], "compile": "default", "threads": 2}
    variants = [{"id": "b1", "batch": 1}, {"id": "b4", "batch": 4}]
    quality = {**_declaration()["quality"], "reference_variant": "b1"}
    exp = _load(
        tmp_path, _declaration(fixed=fixed, knob="batch", variants=variants, quality=quality)
    )
    assert {(v.settings.compile, v.settings.threads) for v in exp.variants} == {("default", 2)}
    assert exp.normalised()["fixed"]["compile"] == "default"
    assert exp.variants[0].settings.optimisations() == {"compile": "default", "threads": 2}


def test_defaults_leave_the_lock_of_an_older_experiment_unchanged(tmp_path) -> None:
    """A lock frozen before these settings existed holds none of them (R1.3)."""
    variants = [{"id": "b1", "batch": 1}, {"id": "b4", "batch": 4}]
    quality = {**_declaration()["quality"], "reference_variant": "b1"}
    plain = _load(tmp_path, _declaration(knob="batch", variants=variants, quality=quality))
    declared = plain.normalised()
    for key in ("compile", "attention", "quantization", "threads"):
        assert key not in declared["fixed"] and key not in declared["variants"][0]
    written = _declaration(knob="batch", variants=variants, quality=quality)
    written["fixed"] = {**written["fixed"], "compile": "none", "threads": "auto"}
    explicit = _load(tmp_path, written)
    assert canonical_sha256(explicit.normalised()) == canonical_sha256(declared)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"fixed": {"precision": "fp32", "context": 64, "batch": 8, "device": "cuda"}},
            r"R2\.1: .*variants\[q8\]\.quantization: int8_dynamic \(torch\.ao dynamic "
            r"quantisation\) runs fp32 models on the CPU only",
        ),
        (
            {
                "variants": [
                    {"id": "q0", "quantization": "none"},
                    {"id": "q4", "quantization": "int4_weight_only"},
                ]
            },
            r"int4_weight_only \(torchao\) is run on CUDA devices here.*packs bf16 weights",
        ),
        (
            {
                "knob": "attention",
                "model": {"backend": "bow", "path": "model"},
                "variants": [{"id": "q0", "attention": "eager"}, {"id": "e", "attention": "sdpa"}],
            },
            r"backend bow has no transformers attention to choose",
        ),
        (
            {
                "knob": "attention",
                "variants": [
                    {"id": "q0", "attention": "sdpa"},
                    {"id": "f", "attention": "flash_attention_2"},
                ],
            },
            r"flash_attention_2 runs on CUDA in fp16 or bf16 only",
        ),
        (
            {
                "knob": "compile",
                "variants": [{"id": "q0", "compile": "none"}, {"id": "c", "compile": "fast"}],
            },
            r"must be one of .*max-autotune.*, got 'fast'",
        ),
        (
            {
                "knob": "threads",
                "variants": [{"id": "q0", "threads": 0}, {"id": "t", "threads": "all"}],
            },
            r"threads: must be an integer >= 1, got 0.*variants\[1\]\.threads",
        ),
    ],
)
def test_what_cannot_run_is_refused_at_validate_with_the_reason(
    tmp_path, changes, expected
) -> None:
    import re

    message = _error(tmp_path, _declaration(**changes))
    assert re.search(expected, message, re.S), message


def test_a_fixed_refusal_is_said_once(tmp_path) -> None:
    fixed = {"precision": "fp32", "context": 64, "device": "cpu", "quantization": "fp8"}
    variants = [{"id": "q0", "batch": 1}, {"id": "b4", "batch": 4}]
    message = _error(tmp_path, _declaration(fixed=fixed, knob="batch", variants=variants))
    assert message.count("fp8 (torchao) is run on CUDA") == 1
    assert "fixed.quantization" in message
