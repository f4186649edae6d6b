"""Float32 versus float64 decoding error of the batch Kalman smoother (issue 12, item 2).

The same float32 nodes, data and query points are decoded in float32 and in float64; the table
is the maximum relative difference ``max |v32 − v64| / max |v64|`` over K = 20 Chebyshev points,
2 data columns (``|y|`` up to 1e6, the second scaled by 1e-3) and 2 masks (10% stragglers),
per node count and λ. Any status flag raised in either precision is reported (none expected).

Usage: python bench/float32_error.py [--out bench/results/float32_error.json]
"""

import argparse
import json
import os
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import environment  # noqa: E402

import gcc_jax as gcc  # noqa: E402
from gcc_jax.spline._kalman import smooth_batch_with_status  # noqa: E402

LAMS = [0.0, 1e-10, 1e-6, 1e-2, 1.0, 1e10, 1e30]


def grids() -> dict[str, np.ndarray]:
    cheb5 = np.unique(np.asarray(gcc.chebyshev_nodes(100_000, kind=2, dtype=jnp.float32)))
    return {
        "10^3 Chebyshev": np.asarray(gcc.chebyshev_nodes(1000, kind=2, dtype=jnp.float32)),
        "10^4 Chebyshev": np.asarray(gcc.chebyshev_nodes(10_000, kind=2, dtype=jnp.float32)),
        "10^5 equispaced": np.linspace(-1.0, 1.0, 100_000, dtype=np.float32),
        f"10^5 Chebyshev, float32-distinct ({cheb5.size})": cheb5,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "float32_error.json"))
    args = p.parse_args()
    run = jax.jit(smooth_batch_with_status)
    tq = np.asarray(gcc.chebyshev_nodes(20, kind=1, dtype=jnp.float32))
    table = {}
    print(f"{'nodes':>40} " + " ".join(f"{lam:>8.0e}" for lam in LAMS))
    for name, t in grids().items():
        n = t.size
        rng = np.random.default_rng(n)
        y = 1e6 * np.sin(3 * t)[:, None] + 1e4 * rng.standard_normal((n, 1))
        y = np.concatenate([y, 1e-3 * y[:, ::-1] * np.cos(t)[:, None]], axis=1).astype(np.float32)
        masks = jnp.asarray(rng.random((2, n)) > 0.1)
        row = {}
        for lam in LAMS:
            v32, s32 = run(jnp.asarray(t), masks, jnp.float32(lam), jnp.asarray(y), jnp.asarray(tq))
            v64, s64 = run(
                jnp.asarray(t, jnp.float64), masks, float(np.float32(lam)), y * 1.0, tq * 1.0
            )
            err = float(np.max(np.abs(np.asarray(v32, np.float64) - v64)) / np.max(np.abs(v64)))
            flags = int(np.max(np.asarray(s32)) | np.max(np.asarray(s64)))
            row[f"{lam:g}"] = dict(rel_err=err, status=flags)
        table[name] = row
        print(
            f"{name:>40} "
            + " ".join(f"{r['rel_err']:>8.1e}" + ("!" if r["status"] else "") for r in row.values())
        )
    worst = max(r["rel_err"] for row in table.values() for r in row.values())
    print(
        f"worst {worst:.2e} (target 1e-4); any flag: "
        f"{any(r['status'] for row in table.values() for r in row.values())}"
    )
    out = dict(
        benchmark="float32_error",
        lams=LAMS,
        table=table,
        worst=worst,
        load_avg_1_5_15_min=os.getloadavg(),
        **environment(),
    )
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
