"""The downdate decoder with a static number of stragglers, against the library's general one.

The library decodes many masks over one set of outputs as rank-S downdates of one full fit
(``gcc_jax/spline/_downdate.py``; ``SplineCode.decode_batch_with_status`` and the mask evaluator
take it in float64 for 64 ≤ N ≤ 1024, S ≤ 24). There the number of stragglers is a value, not a
shape: each chunk's inverses are padded to the next of two fixed sizes (S = 10 → 12), a chunk whose
masks do not fit falls back to the Kalman pass, and statuses and a condition check come with it.
This script measures what that generality costs, against the bare formula with S static (one
compile per straggler count, no checks, no fallback):

    ``Gy + G[:, d] (z − y_d)``,  ``z = (I_S − B_dd)^{-1} ((B y)_d − B_dd y_d)``

— an ``S × S`` solve and a ``K × S`` product per mask (``c`` uses ``Σw = N − S``, so one ``B``
serves every mask with S stragglers). Printed: its agreement with the library and masks/s of
both against the SciPy peer and the matmul floor, in one run, at N = 100.

Usage: python bench/downdate_probe.py [--masks 4096] [--peer-masks 100] [--lam 1e-6]
"""

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of, environment, floor, scipy_peer, worker_function

import gcc_jax as gcc


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--masks", type=int, default=4096)
    p.add_argument("--workers", type=int, default=100)
    p.add_argument("--inputs", type=int, default=20)
    p.add_argument("--stragglers", type=int, default=10)
    p.add_argument("--outputs", type=int, default=10)
    p.add_argument("--lam", type=float, default=1e-6)
    p.add_argument("--peer-masks", type=int, default=100)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "downdate_probe.json"))
    args = p.parse_args()
    jax.config.update("jax_enable_x64", True)
    n, k, s, m, num = args.workers, args.inputs, args.stragglers, args.outputs, args.masks

    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=args.lam)
    x = jnp.linspace(-1.0, 1.0, k)[:, None] * jnp.ones((1, 3))
    y = code.worker_outputs(worker_function(m), x)  # (n, m)
    masks = gcc.sample_masks(jax.random.key(0), n, num=num, stragglers=s)

    # one full fit of the identity: node values B (n x n) and evaluation-point values G (k x n)
    lam_fit = args.lam * (n - s) / n  # fit_smoothing_spline's c = Σw·λ with Σw = n
    eye = jnp.eye(n)
    spline = gcc.fit_smoothing_spline(code.beta, eye, lam_fit)
    bmat, gmat = spline(code.beta), spline(code.alpha)
    by, gy = bmat @ y, gmat @ y

    @jax.jit
    def downdate(masks):
        def one(mask):
            d = jnp.nonzero(~mask, size=s)[0]
            bdd, yd = bmat[d][:, d], y[d]
            z = jnp.linalg.solve(jnp.eye(s, dtype=y.dtype) - bdd, by[d] - bdd @ yd)
            return gy + gmat[:, d] @ (z - yd)

        return jax.vmap(one)(masks)

    # the library's batch decoder as the mask evaluator runs it: prepared once
    # (code.decode_chunks), then one step per chunk of gcc.auto_chunk_size masks
    chunk = min(gcc.auto_chunk_size(n, m), num)
    assert num % chunk == 0, "--masks must be a multiple of the chunk size"

    @jax.jit
    def library(masks):
        blocks = masks.reshape(num // chunk, chunk, n)
        out = code.decode_chunks(y, blocks, lambda d: d.value)
        return out.reshape(num, *out.shape[2:])

    ref = np.asarray(library(masks))
    got = np.asarray(downdate(masks))
    err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))

    wall, cpu = best_of(lambda: jax.block_until_ready(downdate(masks)), args.repeat)
    lwall, lcpu = best_of(lambda: jax.block_until_ready(library(masks)), args.repeat)
    sub = np.asarray(masks[: args.peer_masks])
    beta, alpha, yn = (np.asarray(a) for a in (code.beta, code.alpha, y))
    peer = scipy_peer(beta, alpha, yn, sub, args.lam)
    peer_err = float(np.max(np.abs(peer - ref[: len(sub)])) / np.max(np.abs(ref)))
    pwall, pcpu = best_of(lambda: scipy_peer(beta, alpha, yn, sub, args.lam), 2)
    fnum, fwall, fcpu = floor(y, k, num, args.repeat)

    rate = {
        "downdate": num / wall,
        "library": num / lwall,
        "scipy": len(sub) / pwall,
        "floor": fnum / fwall,
    }
    cpu_rate = {
        "downdate": num / cpu,
        "library": num / lcpu,
        "scipy": len(sub) / pcpu,
        "floor": fnum / fcpu,
    }
    print(f"N={n} K={k} m={m} S={s} M={num} lam={args.lam:g} float64, library chunks of {chunk}")
    print(f"downdate vs library decode: max rel err {err:.1e}; library vs SciPy {peer_err:.1e}")
    print(f"{'':10s} {'masks/s':>10s} {'x SciPy':>8s} {'/floor':>7s}   (CPU time: x SciPy, /floor)")
    for name in ("downdate", "library"):
        print(
            f"{name:10s} {rate[name]:10,.0f} {rate[name] / rate['scipy']:7.0f}x "
            f"{rate['floor'] / rate[name]:6.2f}x   ({cpu_rate[name] / cpu_rate['scipy']:.0f}x, "
            f"{cpu_rate['floor'] / cpu_rate[name]:.2f}x)"
        )
    print(f"SciPy peer {rate['scipy']:,.0f} masks/s, floor {rate['floor']:,.0f} masks/s")
    record = dict(
        benchmark="downdate_probe",
        N=n,
        K=k,
        m=m,
        S=s,
        M=num,
        lam_dec=args.lam,
        library_chunk=chunk,
        max_rel_err_vs_library=err,
        masks_per_s=rate,
        masks_per_cpu_s=cpu_rate,
        **environment(),
    )
    Path(args.out).write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
