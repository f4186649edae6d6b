"""Benchmark: monte_carlo_loss against the SciPy peer, float32 and float64, both solvers.

Setting (issue 2): N = 100 workers, K = 20 inputs, m = 10 outputs, M = 4096 masks with exactly
S = 10 stragglers each. The SciPy peer is a Python loop calling
``scipy.interpolate.make_smoothing_spline`` on the live workers per mask and evaluating at the K
points (the decode step only, as ours is timed). Correctness is checked before timing. Prints
masks/s, the speed-up over the peer, and compile time; writes JSON to bench/results/.

Usage: python bench/monte_carlo.py [--masks 4096] [--peer-masks 400] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
import timeit
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy.interpolate import make_smoothing_spline

N, K, M_OUT, S = 100, 20, 10, 10
LAM_DEC = 1e-6  # SciPy needs lam > 0 to be a smoothing spline; a small, realistic value


def worker_fn(v):
    w = jnp.arange(1, M_OUT + 1, dtype=v.dtype)
    return jnp.sin(w * jnp.mean(v)) + jnp.cos(w * v[0]) * 0.1


def scipy_peer(beta, alpha, yt, masks, lam):
    out = np.empty((masks.shape[0], alpha.size, yt.shape[1]))
    for i, m in enumerate(masks):
        spl = make_smoothing_spline(beta[m], yt[m], lam=m.sum() * lam, axis=0)
        out[i] = spl(alpha)
    return out


def run(dtype: str, solver: str, masks_np, peer_rate, args) -> dict:
    import gcc_jax as gcc

    jax.config.update("jax_enable_x64", dtype == "float64")
    code = gcc.SplineCode.chebyshev(
        num_inputs=K, num_workers=N, lam_dec=LAM_DEC, solver=solver, dtype=dtype
    )
    x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, 4)), dtype)
    masks = jnp.asarray(masks_np)
    # correctness first: our decode against SciPy on a few masks (float64 reference)
    _, yt = gcc.apply_workers(code, worker_fn, x)
    yt64 = np.asarray(yt, np.float64)
    ref = scipy_peer(
        np.asarray(code.beta, np.float64),
        np.asarray(code.alpha, np.float64),
        yt64,
        masks_np[:16],
        LAM_DEC,
    )
    ours = np.stack([np.asarray(code.decode(yt, m)) for m in masks[:16]])
    rel_err = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))

    jax.clear_caches()
    t0 = time.perf_counter()
    gcc.monte_carlo_loss(code, worker_fn, x, masks, chunk_size=args.chunk)
    first = time.perf_counter() - t0
    best = min(
        timeit.repeat(
            lambda: gcc.monte_carlo_loss(code, worker_fn, x, masks, chunk_size=args.chunk),
            number=1,
            repeat=args.repeat,
        )
    )
    rate = masks.shape[0] / best
    return dict(
        dtype=dtype,
        solver=solver,
        masks=int(masks.shape[0]),
        seconds=best,
        masks_per_s=rate,
        compile_s=max(first - best, 0.0),
        speedup_vs_scipy=rate / peer_rate,
        rel_err_vs_scipy=rel_err,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--masks", type=int, default=4096)
    p.add_argument("--peer-masks", type=int, default=400)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--chunk", type=int, default=None, help="masks per block (default: auto)")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "monte_carlo.json"))
    p.add_argument("--device", default=None, help="JAX platform, e.g. cpu or gpu (default: any)")
    args = p.parse_args()
    if args.device:
        jax.config.update("jax_platforms", args.device)

    import gcc_jax as gcc

    jax.config.update("jax_enable_x64", True)
    masks_np = np.asarray(gcc.sample_masks(jax.random.key(0), N, num=args.masks, stragglers=S))
    code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N, lam_dec=LAM_DEC)
    x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, 4)))
    _, yt = gcc.apply_workers(code, worker_fn, x)
    beta, alpha, yt = np.asarray(code.beta), np.asarray(code.alpha), np.asarray(yt)
    pm = masks_np[: args.peer_masks]
    peer_s = min(
        timeit.repeat(
            lambda: scipy_peer(beta, alpha, yt, pm, LAM_DEC), number=1, repeat=args.repeat
        )
    )
    peer_rate = pm.shape[0] / peer_s
    print(f"N={N} K={K} m={M_OUT} S={S} M={args.masks}  devices={jax.devices()}")
    print(f"SciPy peer (make_smoothing_spline loop, {pm.shape[0]} masks): {peer_rate:,.0f} masks/s")
    rows = []
    print(f"{'dtype':>8} {'solver':>7} {'masks/s':>10} {'x SciPy':>8} {'compile':>8} {'err':>9}")
    for dtype in ("float64", "float32"):
        for solver in ("kalman", "kernel"):
            r = run(dtype, solver, masks_np, peer_rate, args)
            rows.append(r)
            print(
                f"{dtype:>8} {solver:>7} {r['masks_per_s']:>10,.0f} "
                f"{r['speedup_vs_scipy']:>7.1f}x {r['compile_s']:>7.2f}s "
                f"{r['rel_err_vs_scipy']:>9.1e}"
            )
    out = dict(
        benchmark="monte_carlo",
        N=N,
        K=K,
        m=M_OUT,
        S=S,
        M=args.masks,
        lam_dec=LAM_DEC,
        scipy_peer_masks_per_s=peer_rate,
        rows=rows,
        jax_version=jax.__version__,
        device=str(jax.devices()[0]),
        platform=platform.platform(),
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
