"""CPU-only offers (gpus_per_lot: 0, named by cpu_model): parsed, attributed by the one rule
only to bundles that ran on that CPU without a GPU, and priced in a real CPU bundle's decision
table; the demo's own offer for the machine it ran on (R2.4, R5.2, R5.7)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpubench_nb.economics.attribution import Hardware, attribute
from gpubench_nb.economics.offers import MACHINE_OFFER_ID, Offer, load_offers, machine_offer
from gpubench_nb.errors import EconomicsError

PRICES = {3: 1000, 7: 2000, 30: 6000}
XEON = "Intel(R) Xeon(R) Platinum 8480+"


def _table(tmp_path: Path, *offers: dict) -> Path:
    path = tmp_path / "offers.yaml"
    path.write_text(yaml.safe_dump({"offers": list(offers)}), encoding="utf-8")
    return path


def _offer(offer_id: str, **hardware) -> dict:
    return {"id": offer_id, "provider": "test", **hardware, "package_price_usd_minor": PRICES}


def test_a_cpu_offer_is_named_by_its_cpu_model(tmp_path) -> None:
    table = load_offers(_table(tmp_path, _offer("xeon", gpus_per_lot=0, cpu_model=XEON)))
    assert (table["xeon"].gpus_per_lot, table["xeon"].cpu_model) == (0, XEON)
    assert table["xeon"].hardware == f"CPU-only: {XEON}"


@pytest.mark.parametrize(
    ("hardware", "words"),
    [
        ({"gpus_per_lot": 0, "gpu_model": "NVIDIA H100"}, ["R5.2", "'gpu_model'", "got 0"]),
        ({"gpus_per_lot": 0}, ["'cpu_model'", "CPU-only offer"]),
        ({"gpus_per_lot": 1, "gpu_model": "H100", "cpu_model": XEON}, ["'cpu_model'", "R5.2"]),
    ],
)
def test_hardware_fields_that_contradict_the_lot_are_refused(tmp_path, hardware, words) -> None:
    with pytest.raises(EconomicsError) as caught:
        load_offers(_table(tmp_path, _offer("bad", **hardware)))
    assert all(word in str(caught.value) for word in words), str(caught.value)


def _hw(count, cpu=XEON, models=()) -> Hardware:
    return Hardware(tuple(models), count, cpu)


def _cpu_attr(hardware: Hardware, *, cpu=XEON, declared=None):
    xeon = Offer(
        id="xeon", provider="test", gpus_per_lot=0, package_price_usd_minor=PRICES, cpu_model=cpu
    )
    return attribute(xeon, 1, hardware, declared)


def test_a_cpu_offer_is_attributed_only_to_that_cpu_without_a_gpu() -> None:
    same = _cpu_attr(_hw(0, cpu=f"  {XEON.upper()} "))  # spacing and case are not the model
    assert same.attributable and same.basis == "cpu model"
    assert not _cpu_attr(_hw(0, cpu="AMD EPYC 9654"), declared="xeon").attributable
    gpu_run = _cpu_attr(_hw(1, models=["NVIDIA H100 80GB HBM3"]), declared="xeon")
    assert not gpu_run.attributable and "not on the CPU-only" in gpu_run.reason
    assert not _cpu_attr(_hw(None)).attributable  # GPUs used not recorded: not shown CPU-only
    assert _cpu_attr(_hw(0, cpu=None), declared="xeon").basis == "declared offer"
    assert not _cpu_attr(_hw(0, cpu=None)).attributable


def test_the_machine_offer_names_exactly_the_recorded_hardware() -> None:
    cpu = machine_offer((), 0, XEON)
    assert (cpu.id, cpu.gpus_per_lot, cpu.cpu_model, cpu.placeholder) == (
        MACHINE_OFFER_ID,
        0,
        XEON,
        True,
    )
    gpu = machine_offer(("NVIDIA H200",), 2, XEON)
    assert (gpu.gpu_model, gpu.gpus_per_lot) == ("NVIDIA H200", 2)


@pytest.mark.slow
def test_a_cpu_offer_of_this_machine_prices_a_real_cpu_bundle(
    tmp_path, data_dir, repo_root
) -> None:
    """A bow experiment run here on the CPU: the offer naming this machine's CPU carries a cost
    per accepted corpus in the decision table, another CPU's offer does not; then the demo's
    own offer (pricing.offer: this-machine-example) prices it too, marked a placeholder. The
    steps run in this process (the same machine a kernel would observe); the kernels are the
    end-to-end tests' (tests/pipeline/test_pipeline.py)."""
    from gpubench_nb.engine.environment import cpu_model
    from gpubench_nb.pipeline.orchestrate import run_experiment
    from gpubench_nb.report.bundles import load_bundles
    from gpubench_nb.report.decision import decision_frame, decision_view_of
    from tests.support.in_process import steps_in_process

    here = cpu_model()
    offers = _table(
        tmp_path,
        _offer("here", gpus_per_lot=0, cpu_model=here),
        _offer("elsewhere", gpus_per_lot=0, cpu_model=f"not {here}"),
        _offer("h100", gpus_per_lot=1, gpu_model="NVIDIA H100 80GB"),
    )
    for name, count in (("eval", 30), ("train", 600), ("tune", 120)):
        lines = (data_dir / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines[::7][:count]) + "\n")
    declaration = yaml.safe_load(
        (repo_root / "parameters" / "demo.yaml").read_text(encoding="utf-8")
    )
    declaration.update(
        experiment_id="cpu-offer",
        corpus={"path": "eval.jsonl", "train": "train.jsonl", "tune": "tune.jsonl"},
        model={"backend": "bow", "path": "model", "build": {}},
        tokenizer={"path": "model"},
        variants=declaration["variants"][:2],
        pricing={"offers": str(offers), "offer": "here", "days": 7, "lots": 1},
    )
    declaration["quality"]["threshold"] = 0.0
    declaration["fixed"]["device"] = "cpu"  # a CPU bundle, whatever this machine has
    declaration["timing"].update(
        repeats=2, warmup_iterations=1, repeats_reason="a test, not a measurement"
    )
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text(yaml.safe_dump(declaration), encoding="utf-8")
    with steps_in_process():
        bundle = run_experiment(experiment, output_dir=tmp_path / "out").bundle_dir

    options = decision_view_of(load_bundles([bundle])).options
    assert options and all(o.offer_id == "here" for o in options)
    assert [o.cost_per_accepted_usd_minor for o in options] == [2000] * len(options)
    assert "USD 20.00" in decision_frame(decision_view_of(load_bundles([bundle]))).to_string()
    economics = yaml.safe_load((bundle / "economics.json").read_text(encoding="utf-8"))
    basis = {o["offer_id"]: o["attribution"]["basis"] for o in economics["offers"]}
    assert basis == {"here": "cpu model", "elsewhere": "none", "h100": "none"}

    declaration["pricing"]["offer"] = MACHINE_OFFER_ID  # the demo's way: pricing is not frozen
    experiment.write_text(yaml.safe_dump(declaration), encoding="utf-8")
    with steps_in_process():
        run_experiment(experiment, output_dir=tmp_path / "out")
    options = decision_view_of(load_bundles([bundle])).options
    assert {(o.offer_id, o.cost_per_accepted_usd_minor, o.placeholder) for o in options} == {
        (MACHINE_OFFER_ID, 3000, True)
    }
    economics = yaml.safe_load((bundle / "economics.json").read_text(encoding="utf-8"))
    assert f"{MACHINE_OFFER_ID} was written by gpubench-nb for the machine" in economics["note"]
