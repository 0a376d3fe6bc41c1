# The README's two commands: `make demo` and `make test`. Both create .venv and install first.
# TORCH: the torch requirement installed before the package. The default is a plain range (a
# GPU server gets its CUDA build); on a CPU-only machine pass e.g. TORCH='torch==2.13.0'.
# TORCH_INDEX: an index URL for that one torch install only (pip's --index-url), e.g. PyTorch's
# CPU-only wheels: TORCH_INDEX=https://download.pytorch.org/whl/cpu. Empty: pip's usual index.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch>=2.1,<2.15
TORCH_INDEX ?=
EXPERIMENT ?= parameters/demo.yaml
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test lint benchmarks clean-outputs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The last step installs the venv's python3 kernelspec, launched without ipykernel's TCP notice
# (gpubench_nb/kernel.py), so the plain papermill CLI prints no such warning either.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)") "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,minilm]"
	$(BIN)/python -m gpubench_nb.kernel install >/dev/null
	touch $@

demo: $(STAMP)
	$(BIN)/gpubench-nb build-model $(EXPERIMENT)
	$(BIN)/gpubench-nb run $(EXPERIMENT)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

benchmarks: $(STAMP)
	$(BIN)/python benchmarks/acceptance_scale.py
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/vs_pipeline.py

clean-outputs:
	find outputs -mindepth 1 -not -name .gitkeep -delete
