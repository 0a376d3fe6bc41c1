#!/usr/bin/env bash
# GPU check: one prepared call (about 4 minutes on one H200, each step time-limited) of what the
# CPU machine cannot prove, ending with one verdict line per check (PASS / FAIL / SKIP):
#   1. the `gpu`-marked tests (R3.8 memory order on a real device, environment capture, bf16);
#   2. scripts/gpu_check.py: the production timer against independent CUDA events around a
#      known GPU delay (+ a negative control without synchronise), measure_pass against the
#      same, peak resets that really reset, the environment record (R2.4, R2.5), and load ->
#      cold -> warm in a real fresh process per backend x precision (fp32, fp16, bf16) x batch;
#   3. the instrumentation overhead on the bow and a MiniLM-shaped model (target <= 1.01) and
#      the end-to-end ratio vs transformers.pipeline (target >= 1.5 on a GPU).
# Library-only (no papermill, no notebooks). Writes gpu_check.log and gpu_check.csv under $OUT
# when set, else outputs/gpu-check/.
#
# Before sending it to a device machine, prepare what must travel (< 10 MB; MiniLM's weights do
# not travel: minilm/hf are built there from MiniLM's config with random weights):
#   .venv/bin/python scripts/gpu_check.py --prepare        # -> models/gpu-check/, models/demo-bow
# then run it with carry ["models/gpu-check", "models/demo-bow"]:
#   bash scripts/gpu_check.sh
# Smoke test on a CPU machine (GPU-only checks say SKIP; arguments go to gpu_check.py):
#   bash scripts/gpu_check.sh --device cpu --backends bow --precisions fp32 --batches 8 --limit 40
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
step() {  # step NAME SECONDS CMD...: run with a time limit; one VERDICT line for the step
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@"
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "VERDICT step/$name: PASS (exit 0)"
  else
    echo "VERDICT step/$name: FAIL (exit $rc$([[ $rc -eq 124 ]] && echo ", time limit ${limit}s"))"
    status=1
  fi
}

{
  echo "== gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) device=$DEVICE python=$PY"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,\
power.limit,clocks.sm,persistence_mode,mig.mode.current --format=csv,noheader
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'hip', getattr(torch.version, 'hip', None), 'available', torch.cuda.is_available())"
  if [[ "$DEVICE" != cpu ]]; then
    echo "== 1. gpu-marked tests"
    # Only the files that hold gpu tests: others may import papermill, absent on the device.
    mapfile -t files < <(grep -rl "pytest.mark.gpu" tests --include='test_*.py')
    step gpu-tests 90 "$PY" -m pytest -m gpu -q -p no:cacheprovider "${files[@]}"
  fi
  echo "== 2. measurement checks (one verdict each)"
  step gpu-check 210 "$PY" scripts/gpu_check.py --device "$DEVICE" --out "$OUT_DIR" "$@"
  echo "== 3. benchmarks"
  if [[ "$DEVICE" == cpu ]]; then quick=(--limit 100 --repeats 1); else quick=(--repeats 3); fi
  step overhead 100 "$PY" benchmarks/overhead.py --device "$DEVICE" --batches 1,16 \
    --minilm-limit 300
  step vs-pipeline 60 "$PY" benchmarks/vs_pipeline.py --device "$DEVICE" "${quick[@]}"
  echo "== gpu_check finished, status=$status; verdicts:"
  exit "$status"
} 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
grep -E "^VERDICT " "$LOG" | sed 's/^VERDICT /  /' | tee -a "$LOG"
exit "$rc"
