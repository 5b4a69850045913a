#!/usr/bin/env bash
# The harness on one CUDA device, in one run of at most ~8 minutes: what CI cannot run (it has no
# GPU). Speed first, on a quiet GPU: the engine against generation on the device
# (benchmarks/engine.py) and fast-exact against torch (benchmarks/samplers.py). Then, side by side,
# the smoke grid on the GPU for torch, exact and fast-exact, one nightly case (the trap, at the
# nightly n on CUDA, with its shape classes), and the installed torch at `pr` on the host's CPUs.
# Each step has its own time limit; a step cut short leaves its partial report (rows are written as
# they arrive). Everything lands in OUT_DIR as at most 8 files (the reports packed in one tarball).
#
#     bash benchmarks/gpu_check.sh [OUT_DIR]
#
# HARNESS_GPU_DEVICE=cpu HARNESS_GPU_QUICK=1 runs the same steps at tiny sizes on the CPU: a dry
# run of the script itself on a machine without a GPU.
set -u
out=${1:-${OUT:-/tmp/harness-gpu}}
device=${HARNESS_GPU_DEVICE:-cuda}
quick=${HARNESS_GPU_QUICK:-0}
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out"
export PYTHONUNBUFFERED=1

if [ "$quick" = 1 ]; then
    engine_sizes=1e5; sampler_args=(--quick --cases abs-bounds-trap); grid=(--cases normal-2sigma --dtypes float32)
    nightly=(--profile smoke --shapes none); cpu_grid=(--profile smoke --cases normal-2sigma); workers=1
else
    engine_sizes=1e6,1e7,1e8; sampler_args=(--reps 5); grid=(); nightly=(--profile nightly)
    cpu_grid=(); workers=8
fi

{
    nvidia-smi 2>&1 | head -15
    "$py" - <<'PY'
import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY
    "$py" -m pip list 2>/dev/null | grep -i -E '^(torch|numpy|pandas|pyarrow|scipy|mpmath|pytest|pytest-xdist) '
    nproc
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

# The installed torch on the host's CPUs at pr, in the background (CPU cores only, not the GPU).
timeout 420 "$py" -m pytest suites --candidate torch --devices cpu -n "$workers" -q \
    -p no:cacheprovider "${cpu_grid[@]}" --report-dir "$work/torch-cpu" > "$work/torch-cpu.log" 2>&1 &
cpu_job=$!

# 1. Speed, alone on the GPU.
timeout 150 "$py" benchmarks/engine.py --device "$device" --sizes "$engine_sizes" \
    --candidates torch,fast-exact --no-naive --threads 4 --out "$out/engine.md" > "$work/engine.log" 2>&1
echo "engine: rc $?"; tail -4 "$work/engine.log"
timeout 110 "$py" benchmarks/samplers.py --device "$device" --candidates fast-exact,torch \
    --skip floor "${sampler_args[@]}" > "$out/samplers.md" 2>&1
echo "samplers: rc $?"

# 2. The grid on the GPU at smoke, and one nightly case, side by side.
timeout 200 "$py" -m pytest suites --candidate torch --candidate exact --candidate fast-exact \
    --devices "$device" --profile smoke -n 4 -q -p no:cacheprovider "${grid[@]}" \
    --report-dir "$work/smoke" > "$work/smoke.log" 2>&1 &
smoke_job=$!
timeout 200 "$py" -m pytest suites --candidate fast-exact --candidate torch --devices "$device" \
    --cases abs-bounds-trap --dtypes bfloat16,float32 -n 2 -q -p no:cacheprovider "${nightly[@]}" \
    --report-dir "$work/nightly" > "$work/nightly.log" 2>&1 &
nightly_job=$!
wait "$smoke_job"; echo "smoke grid: rc $?"
wait "$nightly_job"; echo "nightly case: rc $?"
wait "$cpu_job"; echo "torch at pr on the CPU: rc $?"

for step in smoke nightly torch-cpu; do tail -3 "$work/$step.log"; done
# The reports without their figures (results.csv, summary.md, manifest.json) and every log.
(cd "$work" && tar czf "$out/reports.tar.gz" --exclude='*.png' --exclude='*.html' \
    --exclude='*.parquet' ./*.log smoke nightly torch-cpu 2>/dev/null)
ls -la "$out"
