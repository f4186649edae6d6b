#!/usr/bin/env bash
# GPU benchmarks (issue 12, item 5). Not run yet: no GPU was available when this was written.
# Runs bench/monte_carlo.py, bench/sweep.py and bench/parallel.py with --device gpu, JSON under
# bench/results/gpu/. Usage (from the repository root, with the venv active): bash bench/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results/gpu
mkdir -p "$out"
python -c "import jax; assert jax.devices('gpu'), 'no GPU visible to JAX'; print(jax.devices())"
# Throughput at N = 100 (goal on one H200: >= 1e7 masks/s in float32).
python bench/monte_carlo.py --device gpu --masks 1048576 --chunk 65536 --peer-masks 100 \
    --out "$out/monte_carlo.json"
# N, M, m sweeps (float32 and float64).
python bench/sweep.py --device gpu --dtype float32 --out "$out/sweep_float32.json"
python bench/sweep.py --device gpu --dtype float64 --out "$out/sweep_float64.json"
# Single decode, parallel-in-time vs sequential solver (goal on one H200: parallel N = 10^6 decode
# under 10 ms). float64: float32 cannot hold N = 10^6 distinct Chebyshev nodes (duplicates from
# about N = 1.5*10^4 on, flagged BAD_NODES), so float32 stops at N = 10^4. The sequential solver's
# 10^6-step scan is slow on a GPU: 3 repeats.
python bench/parallel.py --device gpu --dtype float64 --ns 1000,10000,100000,1000000 --repeat 3 \
    --out "$out/parallel_float64.json"
python bench/parallel.py --device gpu --dtype float32 --ns 1000,10000 --repeat 3 \
    --out "$out/parallel_float32.json"
echo "wrote $out"
