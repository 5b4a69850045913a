#!/usr/bin/env bash
# The proposal on one CUDA device against torch, in one run sized for a short device lease (the
# first step ~5 min on an H100, the second ~3 min): what CI cannot run (it has no GPU).
#
# 1. Per call (benchmarks/device_calls.py): time, aten ops, host-read ops and host syncs
#    (torch.cuda.set_sync_debug_mode "warn" counts them, "error" must not raise) of torch's
#    trunc_normal_, fast-exact eager (its fixed-work strategy, the default off the CPU) and
#    fast-exact compiled whole (torch.compile fullgraph=True): the trap, +-2 sigma, [1, 3] and the
#    tail [3, 10] at 2^24 elements in float32 and bfloat16, and the 151936 x 4096 bfloat16
#    embedding. Targets: <= 1.5x torch on every bulk case, >= 10x faster on the tail, 0 syncs.
# 2. The law on the device: fast-exact at the smoke profile on the trap, +-2 sigma, [1, 3] and
#    the tail [5, inf), every dtype, on the eager and compile-fullgraph paths.
#
# 3. With --harness (~8 more minutes): the harness itself on the device, as before the proposal's
#    own steps existed: the engine against generation on the device (benchmarks/engine.py), the
#    samplers side by side (benchmarks/samplers.py), the smoke grid for torch, exact and fast-exact,
#    the trap at the nightly n, and the installed torch at pr on the host's CPUs (docs/benchmark.md,
#    docs/findings/torch.md quote these).
#
#     bash benchmarks/gpu_check.sh [--harness] [OUT_DIR]             # a CUDA machine
#     bash benchmarks/gpu_check.sh --dry-run [--harness] [OUT_DIR]   # no GPU: the CPU, small sizes
#
# --dry-run runs the same code on the CPU at small sizes (2^16 elements, a 64 x 4096 embedding,
# fast-exact's fixed-work strategy forced: `candidates.fast_exact:fast_exact_fixed_work_`); the
# sync columns need CUDA and read n/a. Without --dry-run and without a CUDA device the script
# says so and measures nothing (exit 0). Each step has its own time limit; a step cut short keeps
# what it printed (rows arrive as they are measured).
set -u
dry=0
harness_steps=0
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry=1; shift ;;
        --harness) harness_steps=1; shift ;;
        *) break ;;
    esac
done
out=${1:-${OUT:-/tmp/harness-gpu}}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.." || exit 1

has_cuda=$("$py" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
if [ "$dry" = 0 ] && [ "$has_cuda" != 1 ]; then
    echo "no CUDA device here: nothing measured (bash benchmarks/gpu_check.sh --dry-run runs the same steps on the CPU)"
    exit 0
fi

if [ "$dry" = 1 ]; then
    device=cpu; calls=(--size 16 --embedding-rows 64 --reps 2); candidate=candidates.fast_exact:fast_exact_fixed_work_
else
    device=cuda; calls=(--size 24 --reps 5); candidate=fast-exact
fi

{
    command -v nvidia-smi >/dev/null && nvidia-smi 2>&1 | head -15
    "$py" - <<'PY'
import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY
    nproc
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

# 1. Per call: time, ops, syncs.
timeout 420 "$py" benchmarks/device_calls.py --device "$device" "${calls[@]}" \
    --out "$out/device_calls.md" > "$out/device_calls.log" 2>&1
echo "device calls: rc $?"
tail -40 "$out/device_calls.log"

# 2. The law on the device, eager and compiled whole.
timeout 300 "$py" -m pytest suites --candidate "$candidate" --devices "$device" --profile smoke \
    --cases abs-bounds-trap,normal-2sigma,asym-window-1-3,tail-5 --paths eager,compile-fullgraph \
    --shapes none -q -p no:cacheprovider --report-dir "$out/law" > "$out/law.log" 2>&1
echo "the law on $device: rc $?"
grep -v '^SKIPPED' "$out/law.log" | tail -8
rm -f "$out/law/"*.html "$out/law/"*.parquet
ls -la "$out"

[ "$harness_steps" = 1 ] || exit 0

# 3. The harness on the device (engine and samplers alone on it first, then the grids side by side).
work=$(mktemp -d)
if [ "$dry" = 1 ]; then
    engine_sizes=1e5; sampler_args=(--quick --cases abs-bounds-trap); grid=(--cases normal-2sigma --dtypes float32)
    nightly=(--profile smoke --shapes none); cpu_grid=(--profile smoke --cases normal-2sigma); workers=1
else
    engine_sizes=1e6,1e7,1e8; sampler_args=(--reps 5); grid=(); nightly=(--profile nightly)
    cpu_grid=(); workers=8
fi
timeout 420 "$py" -m pytest suites --candidate torch --devices cpu -n "$workers" -q \
    -p no:cacheprovider "${cpu_grid[@]}" --report-dir "$work/torch-cpu" > "$work/torch-cpu.log" 2>&1 &
cpu_job=$!
timeout 150 "$py" benchmarks/engine.py --device "$device" --sizes "$engine_sizes" \
    --candidates torch,fast-exact --no-naive --threads 4 --out "$out/engine.md" > "$work/engine.log" 2>&1
echo "engine: rc $?"; tail -4 "$work/engine.log"
timeout 110 "$py" benchmarks/samplers.py --device "$device" --candidates fast-exact,torch \
    --skip floor "${sampler_args[@]}" > "$out/samplers.md" 2>&1
echo "samplers: rc $?"
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
(cd "$work" && tar czf "$out/reports.tar.gz" --exclude='*.png' --exclude='*.html' \
    --exclude='*.parquet' ./*.log smoke nightly torch-cpu 2>/dev/null)
ls -la "$out"
