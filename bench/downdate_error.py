"""Error of the rank-S downdate decoder (float64 or float32), and how often its gates let it run.

The many-mask decoder (``gcc_jax/spline/_downdate.py``) decodes each chunk of masks as rank-S
downdates of one fit when the chunk passes its gates, else by the Kalman pass. This measures the
downdate in the chosen precision against the float64 Kalman pass over a grid meant to break it:

* N in {64, 100, 256, 1024} Chebyshev workers, S in {8, 10, 24} stragglers, λ from 0 to 1e4;
* masks: uniformly random, one contiguous block of S stragglers, S/2 adjacent pairs;
* outputs: smooth columns of scale 1 … 1e6, a 1e6 offset, noise, and five workers whose outputs
  are 3x, 9x, 50x or 1000x the rest (dead in some masks: the cancellation the spread gate guards).

Each case is one chunk of 64 masks. A chunk the gates send to the Kalman pass is counted as a
fallback (its values are the Kalman pass's own); for the rest the table gives the largest
``max |v − v64| / max |v64|`` over the chunk's masks.

Usage: python bench/downdate_error.py [--dtype float32|float64] [--workers 64,100,256,1024]
       [--out PATH]   (default results/downdate_error_<dtype>.json)
"""

import argparse
import itertools
import json
import os
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import environment  # noqa: E402

import gcc_jax as gcc  # noqa: E402
from gcc_jax.spline import _downdate as dd  # noqa: E402
from gcc_jax.spline._kalman import smooth_batch_with_status  # noqa: E402

LAMS = [0.0, 1e-12, 1e-8, 1e-6, 1e-4, 1e-2, 1.0, 1e4]
STRAGGLERS = [8, 10, 24]
CHUNK = 64


@jax.jit
def downdate_or_none(t, lam, y, tq, masks):
    """The downdated values of a chunk and whether the gates let them stand (as the decoder)."""
    values, ok = dd.downdate_chunks(t, lam, y, tq, masks[None], lambda v, status: v)
    return values[0], ok[0]


def outputs(t, rng) -> dict[str, np.ndarray]:
    base = np.stack([np.sin(3 * t + k) + 0.5 * np.cos(7 * k * t) for k in range(6)], axis=1)
    ys = {
        "scales 1..1e6": base * np.array([1, 10, 100, 1e3, 1e4, 1e6]),
        "offset 1e6": 1e6 + base,
        "noisy": base + 0.1 * rng.standard_normal(base.shape),
    }
    for factor in (3.0, 9.0, 50.0, 1e3):
        big = base.copy()
        big[rng.choice(t.size, 5, replace=False)] *= factor
        ys[f"5 outputs x{factor:g}"] = big
    return ys


def mask_sets(n, s, rng) -> dict[str, np.ndarray]:
    random = np.asarray(gcc.sample_masks(jax.random.key(s + n), n, num=CHUNK, stragglers=s))
    block = np.ones((CHUNK, n), bool)
    pairs = np.ones((CHUNK, n), bool)
    for p in range(CHUNK):
        start = rng.integers(0, n - s)
        block[p, start : start + s] = False
        left = rng.choice(np.arange(0, n - 1, 2), s // 2, replace=False)  # disjoint pairs
        pairs[p, left] = pairs[p, left + 1] = False
    return {"random": random, "block": block, "pairs": pairs}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--workers", default="64,100,256,1024")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    dtype = jnp.dtype(args.dtype)
    out_path = args.out or str(
        Path(__file__).parent / "results" / f"downdate_error_{args.dtype}.json"
    )
    reference = jax.jit(smooth_batch_with_status)
    rows = []
    for n in (int(w) for w in args.workers.split(",")):
        code = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=n, dtype="float64")
        t, tq = np.asarray(code.beta), np.asarray(code.alpha)
        rng = np.random.default_rng(n)
        ys = outputs(t, rng)
        for s in STRAGGLERS:
            masks = mask_sets(n, s, rng)
            for lam, (yname, y), (mname, m) in itertools.product(LAMS, ys.items(), masks.items()):
                ref = np.asarray(reference(t, jnp.asarray(m), lam, y, tq)[0])
                cast = (jnp.asarray(a, dtype) for a in (t, lam, y, tq))
                values, taken = downdate_or_none(*cast, jnp.asarray(m))
                err = None
                if bool(taken):
                    diff = np.abs(np.asarray(values, np.float64) - ref)
                    err = float(np.max(diff.max(axis=(1, 2)) / np.abs(ref).max(axis=(1, 2))))
                rows.append(dict(N=n, S=s, lam=lam, outputs=yname, masks=mname, rel_err=err))
        done = [r for r in rows if r["N"] == n]
        taken = [r["rel_err"] for r in done if r["rel_err"] is not None]
        print(
            f"N={n:5d}: downdate on {len(taken)}/{len(done)} chunks, "
            f"worst error there {max(taken, default=0.0):.1e}",
            flush=True,
        )
    print(f"\n{'masks':>8} {'outputs':>16} {'taken':>9} {'worst err':>10}")
    summary = {}
    for (mname, yname), group in itertools.groupby(
        sorted(rows, key=lambda r: (r["masks"], r["outputs"])), lambda r: (r["masks"], r["outputs"])
    ):
        group = list(group)
        errs = [r["rel_err"] for r in group if r["rel_err"] is not None]
        summary[f"{mname} / {yname}"] = dict(
            taken=len(errs), cases=len(group), worst=max(errs, default=None)
        )
        worst = f"{max(errs):.1e}" if errs else "-"
        print(f"{mname:>8} {yname:>16} {len(errs):>4}/{len(group):<4} {worst:>10}")
    by_lam = {}
    for lam in LAMS:
        errs = [r["rel_err"] for r in rows if r["lam"] == lam and r["rel_err"] is not None]
        by_lam[f"{lam:g}"] = dict(
            taken=len(errs),
            cases=sum(r["lam"] == lam for r in rows),
            worst=max(errs, default=None),
        )
    print("by λ: " + ", ".join(f"{k}: {v['taken']}/{v['cases']}" for k, v in by_lam.items()))
    worst = max((r["rel_err"] for r in rows if r["rel_err"] is not None), default=0.0)
    print(f"worst error on the downdate path {worst:.2e} ({args.dtype})")
    bits = dtype.itemsize * 8
    out = dict(
        benchmark="downdate_error",
        dtype=args.dtype,
        gates=dict(rcond=dd.RCOND[bits], spread=dd.SPREAD[bits], sizes=list(dd.SIZES)),
        chunk=CHUNK,
        worst=worst,
        summary=summary,
        by_lam=by_lam,
        rows=rows,
        load_avg_1_5_15_min=os.getloadavg(),
        **environment(),
    )
    Path(out_path).write_text(json.dumps(out, indent=1))
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
