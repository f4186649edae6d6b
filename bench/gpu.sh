#!/usr/bin/env bash
# GPU benchmarks: bench/monte_carlo.py, bench/sweep.py (--quick) and bench/parallel.py on the GPU
# (--device gpu: cuda or rocm, whichever JAX has a plugin for; bench/_common.py). Each step is
# capped (`timeout`; the caps below add up to 465 s, under 8 minutes); a step that fails or runs out of time
# is reported and the next one runs. JSON and one log per step in $OUT when set, else in
# bench/results/gpu/. Needs no .venv: with none it runs ${PYTHON:-python3} from the repository
# root, gcc_jax from the working tree.
#
# Usage (from anywhere): bash bench/gpu.sh
#   DEVICE=cpu TINY=1 bash bench/gpu.sh   # a dry run of every step at toy sizes (about 2 min)
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python
    elif command -v python3 >/dev/null; then PYTHON=python3
    else PYTHON=python; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
device=${DEVICE:-gpu}
out=${OUT:-bench/results/gpu}
mkdir -p "$out"
failed=()

# step NAME CAP_S COMMAND...: run COMMAND under `timeout CAP_S`, its output in $out/NAME.log
step() {
    local name=$1 cap=$2
    shift 2
    echo "=== $name (cap ${cap} s): $*"
    local t0=$SECONDS
    timeout -k 10 "$cap" "$@" 2>&1 | tee "$out/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "=== $name: exit $rc after $((SECONDS - t0)) s"
    if [[ $rc -ne 0 ]]; then failed+=("$name (exit $rc$([[ $rc -eq 124 || $rc -eq 137 ]] && echo ', cap reached'))"); fi
}

if [[ -n "${TINY:-}" ]]; then  # toy sizes: the same steps and options, seconds each
    mc_size=(--masks 4096 --peer-masks 8 --repeat 1 --workers 100)
    sweep_size=(--quick --ns 50,100 --only-n --masks-scale 0.01)
    par_small=(--ns 1000 --repeat 1)
    par_large=(--ns 2000 --repeat 1)
    par_f32=(--ns 1000 --repeat 1)
else
    mc_size=(--masks 1048576 --peer-masks 50 --repeat 3)
    sweep_size=(--quick --only-n --ns 100,1000,10000)  # one subprocess (JAX start) a point
    par_small=(--ns 1000,10000,100000 --repeat 3)
    # the sequential solver's 10^6-step scan takes ~30 s a call on an H200: one timed call
    par_large=(--ns 1000000 --repeat 1)
    par_f32=(--ns 1000,10000 --repeat 3)
fi

step devices 30 "$PYTHON" -c "
import sys; sys.path.insert(0, 'bench')
from _common import use_device
import jax
print('platform', use_device('$device'), jax.__version__, jax.devices())
"
# Throughput at N = 100, K = 20, m = 10, S = 10 with the evaluator's default chunking, 2^20 masks.
step monte_carlo 110 "$PYTHON" bench/monte_carlo.py --device "$device" "${mc_size[@]}" \
    --out "$out/monte_carlo.json"
# N and M sweeps (one subprocess per point).
step sweep_float32 75 "$PYTHON" bench/sweep.py --device "$device" --dtype float32 "${sweep_size[@]}" \
    --out "$out/sweep_float32.json"
step sweep_float64 75 "$PYTHON" bench/sweep.py --device "$device" --dtype float64 "${sweep_size[@]}" \
    --out "$out/sweep_float64.json"
# Single decode, parallel-in-time against the sequential solver (goal on one H200: N = 10^6 under
# 10 ms). float32 stops at N = 10^4: float32 Chebyshev nodes coincide from about N = 1.5e4 on.
step parallel_float64 45 "$PYTHON" bench/parallel.py --device "$device" --dtype float64 \
    "${par_small[@]}" --out "$out/parallel_float64.json"
step parallel_float64_1e6 100 "$PYTHON" bench/parallel.py --device "$device" --dtype float64 \
    "${par_large[@]}" --out "$out/parallel_float64_1e6.json"
step parallel_float32 30 "$PYTHON" bench/parallel.py --device "$device" --dtype float32 \
    "${par_f32[@]}" --out "$out/parallel_float32.json"

echo "wrote $out"
if [[ ${#failed[@]} -gt 0 ]]; then
    printf 'failed: %s\n' "${failed[@]}"
    exit 1
fi
