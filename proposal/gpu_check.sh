#!/usr/bin/env bash
# What is left for a GPU run, in one script (~10 min on one GPU): the harness at pr on the GPU for
# fast-exact and the patched function's source, and the speed table on CUDA against torch.
# Run from the repository root on a machine with CUDA torch and the harness's requirements:
#     bash proposal/gpu_check.sh [OUT_DIR]
set -u
out=${1:-${OUT:-/tmp/fast-exact-gpu}}
mkdir -p "$out"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
python -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))" | tee "$out/env.txt"
# 1. the law on the GPU: the init cases, a tail and a far window, every dtype, no shape axis
timeout 300 python -m pytest suites --candidate fast-exact --devices cuda -n 0 -q -p no:cacheprovider \
    --cases normal-2sigma,abs-bounds-trap,vit-pos-embed,tail-5,deep-window-10-1000,tiny-std \
    --shapes none --report-dir "$out/pr-cuda" > "$out/pr-cuda.log" 2>&1
tail -3 "$out/pr-cuda.log"
# 2. the speed on CUDA: fast-exact against torch, 2^16..2^24 (wall time, synchronized)
timeout 240 python benchmarks/samplers.py --device cuda --candidates fast-exact,torch --reps 5 \
    --skip floor > "$out/samplers-cuda.md" 2>&1
tail -30 "$out/samplers-cuda.md"
