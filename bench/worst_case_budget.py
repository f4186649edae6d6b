"""How far the heuristic worst-case search is from the true worst case, as its budget grows.

The regime map's worst-case cells come from `gcc_jax.worst_case_mask`'s local search when
`C(N, S)` is too large to decode every pattern; its loss is then a lower bound. This script takes
the regime map's x·sin x cells (K = 20 inputs drawn from U(-3, 3), one seeded batch, float64),
and for GCC (λ = 0) and BACC, each in the given and the sorted input order, runs the search at
budgets from the regime map's default (2 chains × 32 proposals × 5 steps)
up to 64 × 2048 × 800, each with the same key; where `C(N, S) ≤ --max-exhaustive` it also decodes
every pattern (the exact worst case). It prints, per cell and code, the bound at each budget, the
budget where it stopped moving (relative change < 1e-6 at every larger budget) and its ratio to
the exact worst case.

    JAX_ENABLE_X64=1 python bench/worst_case_budget.py --out bench/results/worst_case_budget.json
"""

import argparse
import json
import math
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

BUDGETS = (
    (2, 32, 5),  # the regime map's default (`gcc-jax regimes --restarts/--proposals/--max-iters`)
    (4, 64, 10),
    (8, 128, 25),  # DEFAULT_SEARCH
    (8, 256, 100),  # THOROUGH_SEARCH
    (16, 512, 200),
    (32, 1024, 400),
    (64, 2048, 800),
)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-inputs", "-K", type=int, default=20)
    parser.add_argument("--workers", default="25,30,40", help="N values (default 25,30,40)")
    parser.add_argument("--fraction", type=float, default=0.2, help="S = round(p N)")
    parser.add_argument("--max-exhaustive", type=int, default=700_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import numpy as np

    import gcc_jax as gcc
    from gcc_jax.evaluation import SearchBudget

    k = args.num_inputs
    x = np.random.default_rng((args.seed, 0xE7A1)).uniform(-3.0, 3.0, (k, 1))

    def f(v):
        return v * jnp.sin(v)

    rows = []
    for n in (int(v) for v in args.workers.split(",")):
        s = round(args.fraction * n)
        total = math.comb(n, s)
        for name in ("GCC·given", "GCC·sort", "BACC·given", "BACC·sort"):
            family, order = name.split("·")
            make = gcc.SplineCode if family == "GCC" else gcc.BerrutCode
            code = make.chebyshev(num_inputs=k, num_workers=n)
            perm = np.argsort(x[:, 0]) if order == "sort" else np.arange(k)
            xo = jnp.asarray(x[perm])
            yt = jax.vmap(f)(code.encode(xo))
            fx = jax.vmap(f)(xo)
            row = dict(N=n, S=s, patterns=total, code=name, bounds=[], seconds=[])
            for budget in BUDGETS:
                t0 = time.perf_counter()
                wc = gcc.worst_case_mask(
                    code,
                    outputs=(yt, fx),
                    stragglers=s,
                    key=jax.random.key(args.seed),
                    search=SearchBudget(0, *budget, patience=3),
                )
                row["bounds"].append(float(wc.loss))
                row["seconds"].append(time.perf_counter() - t0)
            b = np.asarray(row["bounds"])
            final = b[-1]
            settled = next(
                i for i in range(len(b)) if np.all(np.abs(b[i:] - final) <= 1e-6 * abs(final))
            )
            row["settled_at"] = list(BUDGETS[settled])
            if total <= args.max_exhaustive:
                t0 = time.perf_counter()
                ex = gcc.worst_case_mask(
                    code, outputs=(yt, fx), stragglers=s, search={"max_exhaustive": total}
                )
                row["exact"] = float(ex.loss)
                row["exact_seconds"] = time.perf_counter() - t0
                row["ratio_to_exact"] = [v / ex.loss for v in row["bounds"]]
            rows.append(row)
            exact = (
                f"exact {row['exact']:.4g}, default/exact {row['ratio_to_exact'][0]:.3f}, "
                f"largest/exact {row['ratio_to_exact'][-1]:.3f}"
                if "exact" in row
                else "exact: not decoded"
            )
            print(
                f"N={n:3d} S={s:2d} {name:<11} bounds "
                + " ".join(f"{v:.4g}" for v in row["bounds"])
                + f"; settled at {tuple(row['settled_at'])}; {exact}",
                flush=True,
            )
    record = dict(
        setting=dict(
            function="x*sin(x)",
            num_inputs=k,
            fraction=args.fraction,
            seed=args.seed,
            budgets=[list(b) for b in BUDGETS],
            dtype=str(jnp.zeros(()).dtype),
        ),
        rows=rows,
        versions=dict(
            python=platform.python_version(), jax=jax.__version__, gcc_jax=gcc.__version__
        ),
        machine=dict(cpus=os.cpu_count(), load=os.getloadavg()),
    )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(record, fh, indent=1)
    return record


if __name__ == "__main__":
    main()
