#!/usr/bin/env bash
# GPU check: one prepared run (< 8 minutes on one GPU) of what the CPU machine cannot check.
#   1. the `gpu` tests (R3.8 memory order on a real device, CUDA environment capture);
#   2. scripts/gpu_check.py: bow, minilm and hf backends at batch 1/4/8 in fp32 and fp16 on the
#      demo corpus, with plausibility checks (peak_allocated >= weight bytes, allocated <=
#      reserved, CUDA-event time within 2 % of synchronise+perf_counter time) -> CSV;
#   3. the end-to-end speed ratio vs transformers.pipeline (target >= 1.5 on a GPU) and the
#      instrumentation overhead ratio (target <= 1.01).
# Library-only (no papermill, no notebooks). Writes gpu_check.log and gpu_check.csv under $OUT
# when set, else outputs/gpu-check/.
#
# Before sending it to a device machine, prepare what must travel (MiniLM's weights, 87 MB,
# do not: minilm/hf are built there from MiniLM's config with random weights):
#   .venv/bin/python scripts/gpu_check.py --prepare        # -> models/gpu-check/, models/demo-bow
# then run it with carry ["models/gpu-check", "models/demo-bow"]:
#   bash scripts/gpu_check.sh
# Smoke test on a CPU machine (arguments after --device go to gpu_check.py):
#   bash scripts/gpu_check.sh --device cpu --limit 40 --random-weights
set -u -o pipefail
cd "$(dirname "$0")/.."

DEVICE=cuda
if [[ "${1:-}" == "--device" && -n "${2:-}" ]]; then DEVICE=$2; shift 2; fi
OUT_DIR=${OUT:-outputs/gpu-check}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu_check.log"
PY=${PYTHON:-python3}
if [[ -x .venv/bin/python && -z "${PYTHON:-}" ]]; then PY=.venv/bin/python; fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error
status=0
step() {  # step SECONDS CMD...: run with a time limit; say why it failed (124 = time limit)
  local limit=$1; shift
  timeout "$limit" "$@"
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "!! step failed rc=$rc$([[ $rc -eq 124 ]] && echo " (time limit ${limit}s)"): $*"
    status=1
  fi
}

{
  echo "== gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) device=$DEVICE python=$PY"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader
  if [[ "$DEVICE" != cpu ]]; then
    echo "== 1. gpu-marked tests"
    # Only the files that hold gpu tests: others may import papermill, absent on the device.
    mapfile -t files < <(grep -l "pytest.mark.gpu" tests/test_*.py)
    step 150 "$PY" -m pytest -m gpu -q -p no:cacheprovider --continue-on-collection-errors "${files[@]}"
  fi
  echo "== 2. backends x precisions x batches"
  step 270 "$PY" scripts/gpu_check.py --device "$DEVICE" --out "$OUT_DIR" "$@"
  echo "== 3. benchmarks"
  if [[ "$DEVICE" == cpu ]]; then quick=(--limit 100 --repeats 1); else quick=(--repeats 3); fi
  step 150 "$PY" benchmarks/vs_pipeline.py --device "$DEVICE" "${quick[@]}"
  step 60 "$PY" benchmarks/overhead.py --device "$DEVICE"
  echo "== gpu_check finished, status=$status"
  exit "$status"
} 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
