#!/usr/bin/env bash
# GPU benchmarks (issue 12, item 5). Not run yet: no GPU was available when this was written.
# Runs bench/monte_carlo.py and bench/sweep.py with --device gpu and writes their JSON under
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
echo "wrote $out"
