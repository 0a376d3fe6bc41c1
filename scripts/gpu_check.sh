#!/usr/bin/env bash
# GPU check: one prepared call, within 5 minutes on one GPU server (BUDGET seconds, default 290),
# of what the CPU machine cannot prove. Every check prints one line `VERDICT <name>: PASS|FAIL|
# SKIP (<numbers>)` as soon as it is known, so a run cut off by a time limit still reports what
# it finished; the list is repeated at the end.
#   1. the `gpu`-marked tests (R3.8 memory order on a real device, environment capture, bf16);
#   2. scripts/gpu_check.py: each check compares the project with an independent measurement
#      (CUDA events, nvidia-smi, fincore, a fresh `import torch`, a shell's inherited
#      environment, the batch made to fail, a control sampler) and can fail; its judges are in
#      scripts/gpu_check_figures.py. Four cold rows, each a real fresh process (bow, MiniLM-shaped
#      and hf x fp32/bf16/fp16);
#   3. benchmarks/vs_pipeline.py: one MiniLM-shaped model at b1 and b8 against transformers'
#      pipeline (same predictions; the speed ratio); benchmarks/onnx_runtime.py --check: the bow
#      demo on onnxruntime's CUDA execution provider, the provider read back from its session
#      (skipped without onnxruntime-gpu). The overhead benchmark runs only with
#      WITH_OVERHEAD=1 (it does not fit the 5 minutes with the rest).
# Library-only: no papermill, no notebooks, no MiniLM package. It needs torch (the server's CUDA
# build), transformers, safetensors, numpy, pyyaml, filelock, nvidia-ml-py and pytest: the
# wheelhouse of scripts/gpu-requirements.txt (docs/GPU-SERVER.md).
# Writes gpu_check.log and gpu_check.csv under $OUT when set, else outputs/gpu-check/.
#
# Before sending it to a device machine, prepare what must travel (< 10 MB; MiniLM's weights do
# not travel: minilm/hf are built there from MiniLM's config with random weights):
#   .venv/bin/python scripts/gpu_check.py --prepare        # -> models/gpu-check/, models/demo-bow
# then run it with carry ["models/gpu-check", "models/demo-bow"]:
#   bash scripts/gpu_check.sh
# Smoke test on a CPU machine (arguments go to gpu_check.py): every judge is shown PASSing a
# good case and FAILing a planted fault (PLANTED lines), then what a CPU can measure runs for
# real (sampler cost with a fake NVML, page-cache residency against fincore, cold bow rows):
#   bash scripts/gpu_check.sh --device cpu --rows bow/fp32/b8 --limit 40
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
export HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-290}
START=$SECONDS
status=0
step() {  # step NAME SECONDS CMD...: at most SECONDS and what is left of BUDGET; one VERDICT
  local name=$1 limit=$2; shift 2
  local left=$((BUDGET - (SECONDS - START) - 5))
  if ((left < limit)); then limit=$left; fi
  if ((limit < 10)); then
    echo "VERDICT step/$name: SKIP (budget of ${BUDGET}s spent)"
    status=1
    return
  fi
  timeout "$limit" "$@"
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "VERDICT step/$name: PASS (exit 0, $((SECONDS - START))s elapsed)"
  else
    echo "VERDICT step/$name: FAIL (exit $rc$([[ $rc -eq 124 ]] && echo ", time limit ${limit}s"))"
    status=1
  fi
}

{
  echo "== gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) device=$DEVICE python=$PY budget=${BUDGET}s"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,\
power.limit,clocks.sm,clocks.max.sm,persistence_mode,mig.mode.current --format=csv,noheader
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'hip', getattr(torch.version, 'hip', None), 'available', torch.cuda.is_available())"
  if [[ "$DEVICE" != cpu ]]; then
    echo "== 1. gpu-marked tests"
    # Only the files that hold gpu tests: others may import papermill, absent on the device.
    mapfile -t files < <(grep -rl "pytest.mark.gpu" tests --include='test_*.py')
    step gpu-tests 80 "$PY" -m pytest -m gpu -q -p no:cacheprovider "${files[@]}"
  fi
  echo "== 2. measurement checks (one verdict each, judged against an independent measurement)"
  step gpu-check 175 "$PY" scripts/gpu_check.py --device "$DEVICE" --out "$OUT_DIR" "$@"
  echo "== 3. benchmarks"
  if [[ "$DEVICE" == cpu ]]; then quick=(--limit 100 --repeats 1); else quick=(--limit 300 --repeats 3); fi
  step vs-pipeline 45 "$PY" benchmarks/vs_pipeline.py --device "$DEVICE" --batches 1,8 \
    "${quick[@]}"
  # runtime onnxruntime: the bow demo's graph on the CUDA execution provider (read back from
  # the session, not only asked for), its answers alike torch's on >= 99.5 % (--check)
  if "$PY" -c "import onnxruntime, onnxscript" 2>/dev/null; then
    step onnxruntime-cuda 60 "$PY" benchmarks/onnx_runtime.py --experiment parameters/demo.yaml \
      --device "$DEVICE" --limit 300 --repeats 1 --check
  else
    echo "VERDICT step/onnxruntime-cuda: SKIP (onnxruntime-gpu not installed: scripts/gpu-requirements.txt)"
  fi
  if [[ "${WITH_OVERHEAD:-0}" == 1 ]]; then
    step overhead 100 "$PY" benchmarks/overhead.py --device "$DEVICE" --batches 1,16 \
      --minilm-limit 300
  fi
  echo "== gpu_check finished in $((SECONDS - START))s, status=$status; verdicts:"
  exit "$status"
} 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
grep -E "^VERDICT " "$LOG" | sed 's/^VERDICT /  /' | tee -a "$LOG"
exit "$rc"
