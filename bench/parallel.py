"""Single-decode time: the parallel-in-time solver against the sequential Kalman solver.

For each N (Chebyshev-2 worker nodes, K = 20 Chebyshev-1 inputs, m output columns, S = N/10
random stragglers, ``lam_dec`` fixed) the script jits ``SplineCode.decode_with_status`` once per
solver and measures, in the same run on the same inputs:

* compile time (first call minus a second call), reported apart;
* the decode time, ``min`` over ``--repeat`` timed calls (``jax.block_until_ready``);
* the ratio ``parallel / kalman`` (> 1: the sequential solver is faster);
* the largest difference between the two decodes, relative to the largest |value|.

The crossover: at which N each solver is faster (``"none: ..."`` if the parallel one never is).
Writes ``bench/results/parallel[_<device>_<dtype>].json`` (jax version, device, date).

Usage: python bench/parallel.py [--ns 1000,10000,100000,1000000] [--dtype float64|float32]
       [--device cpu|gpu] [--repeat 5] [--out PATH]
"""

import argparse
import datetime
import json
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def measure(n: int, dtype: str, repeat: int, lam: float, m: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import gcc_jax as gcc

    codes = {
        solver: gcc.SplineCode.chebyshev(
            num_inputs=20, num_workers=n, lam_dec=lam, solver=solver, dtype=dtype
        )
        for solver in ("kalman", "parallel")
    }
    beta = np.asarray(codes["kalman"].beta, np.float64)
    freq = np.arange(1, m + 1)
    y = jnp.asarray(np.sin(np.outer(3.0 * beta, freq)) / freq, dtype)
    mask = gcc.sample_masks(jax.random.key(0), n, num=1, stragglers=n // 10)[0]
    row = {"N": n, "m": m}
    out = {}
    for solver, code in codes.items():
        fn = jax.jit(lambda c, y, mask: c.decode_with_status(y, mask))
        t0 = time.perf_counter()
        res = jax.block_until_ready(fn(code, y, mask))
        first = time.perf_counter() - t0
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(code, y, mask))
            times.append(time.perf_counter() - t0)
        assert int(res.status) == 0, f"{solver}: status {int(res.status)}"
        out[solver] = np.asarray(res.value, np.float64)
        row[f"{solver}_s"] = min(times)
        row[f"{solver}_compile_s"] = max(first - min(times), 0.0)
    row["ratio_parallel_over_kalman"] = row["parallel_s"] / row["kalman_s"]
    scale = np.max(np.abs(out["kalman"]))
    row["max_rel_diff"] = float(np.max(np.abs(out["parallel"] - out["kalman"])) / scale)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ns", default="1000,10000,100000,1000000")
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument(
        "--device", default=None, help="cpu, gpu (cuda or rocm, whichever is installed), cuda, …"
    )
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--lam", type=float, default=1e-6)
    p.add_argument("--m", type=int, default=1, help="output columns")
    p.add_argument("--out", default=None)
    args = p.parse_args()

    import jax

    jax.config.update("jax_enable_x64", args.dtype == "float64")
    from _common import use_device

    use_device(args.device)
    device = jax.devices()[0]
    rows = []
    print(
        f"{'N':>9} {'kalman ms':>10} {'parallel ms':>12} {'par/kal':>8} {'rel diff':>9}", flush=True
    )
    for n in (int(v) for v in args.ns.split(",")):
        row = measure(n, args.dtype, args.repeat, args.lam, args.m)
        rows.append(row)
        print(
            f"{n:>9} {1e3 * row['kalman_s']:>10.3f} {1e3 * row['parallel_s']:>12.3f} "
            f"{row['ratio_parallel_over_kalman']:>8.2f} {row['max_rel_diff']:>9.1e}",
            flush=True,
        )
    faster = [r["N"] for r in rows if r["ratio_parallel_over_kalman"] < 1]
    slower = [r["N"] for r in rows if r["ratio_parallel_over_kalman"] >= 1]
    crossover = (
        f"parallel faster at N in {faster}, kalman faster (or equal) at N in {slower}"
        if faster
        else f"none: kalman faster at every N up to {max(slower)}"
    )
    print(f"crossover: {crossover}")
    result = {
        "what": "single SplineCode decode, K=20, S=N/10, solver parallel vs kalman",
        "dtype": args.dtype,
        "lam_dec": args.lam,
        "device": str(device),
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "machine": platform.machine(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "crossover": crossover,
        "rows": rows,
    }
    default = (
        "parallel.json"
        if args.device in (None, "cpu") and args.dtype == "float64"
        else (f"parallel_{jax.default_backend()}_{args.dtype}.json")
    )
    out = Path(args.out) if args.out else RESULTS / default
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
