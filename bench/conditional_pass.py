"""A/B: the batch Kalman pass as a conditional's branch (the library) or called directly.

``gcc_jax.spline._kalman.in_sequence`` runs the batch smoother as the taken branch of a
``lax.cond`` whose predicate is always true. This script measures what that buys inside the mask
evaluator (``monte_carlo_loss``, float64, K = 20, m = 10, S = N/10, so the downdate path does not
apply): for each N, one subprocess runs the library as it is and one with ``in_sequence``
replaced by a direct call (each its own process, so neither reuses the other's compiled program),
and their mean losses must agree to 1e-12 (they differ in the last bit at most). Printed: ns
per mask and node (wall and CPU) and the ratio, per N.

Usage: python bench/conditional_pass.py [--ns 1000,10000,100000] [--masks-per-n 2.5e5]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def point(n: int, num: int, direct: bool) -> dict:
    """One measurement (runs in a subprocess)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    from _common import best_of, worker_function

    import gcc_jax as gcc
    from gcc_jax.spline import _kalman

    if direct:
        _kalman.in_sequence = lambda s, fn: fn()
    code = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=n, lam_dec=1e-6)
    x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (20, 4)))
    f = worker_function(10)
    masks = np.asarray(gcc.sample_masks(jax.random.key(0), n, num=num, stragglers=n // 10))
    loss = gcc.monte_carlo_loss(code, f, x, masks)  # compile
    wall, cpu = best_of(lambda: gcc.monte_carlo_loss(code, f, x, masks), 3)
    return dict(
        N=n,
        M=num,
        direct=direct,
        wall_ns_per_mask_node=wall / num / n * 1e9,
        cpu_ns_per_mask_node=cpu / num / n * 1e9,
        mean_loss=float(np.mean(loss)),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ns", default="1000,10000,100000")
    p.add_argument("--masks-per-n", type=float, default=2.5e5, help="M = this / N, at least 128")
    p.add_argument("--point", help=argparse.SUPPRESS)
    p.add_argument("--out", default=str(RESULTS / "conditional_pass.json"))
    args = p.parse_args()
    if args.point:
        n, num, direct = json.loads(args.point)
        print(json.dumps(point(n, num, direct)))
        return
    from _common import environment

    rows = []
    for n in (int(v) for v in args.ns.split(",")):
        num = max(128, int(args.masks_per_n // n))
        pair = {}
        for direct in (False, True):
            cmd = [sys.executable, __file__, "--point", json.dumps([n, num, direct])]
            run = subprocess.run(cmd, capture_output=True, text=True, check=True)
            pair[direct] = json.loads(run.stdout.strip().splitlines()[-1])
        lib, raw = pair[False], pair[True]
        diff = abs(lib["mean_loss"] - raw["mean_loss"]) / abs(raw["mean_loss"])
        assert diff < 1e-12, (lib, raw)
        ratio = raw["wall_ns_per_mask_node"] / lib["wall_ns_per_mask_node"]
        cpu_ratio = raw["cpu_ns_per_mask_node"] / lib["cpu_ns_per_mask_node"]
        print(
            f"N={n:>6} M={num:>5}: conditional {lib['wall_ns_per_mask_node']:5.0f} ns "
            f"(CPU {lib['cpu_ns_per_mask_node']:4.0f}), direct {raw['wall_ns_per_mask_node']:5.0f} "
            f"ns (CPU {raw['cpu_ns_per_mask_node']:4.0f}) per mask·node: {ratio:.2f}x wall, "
            f"{cpu_ratio:.2f}x CPU; mean losses differ by {diff:.1e}"
        )
        rows.append(
            dict(library=lib, direct=raw, wall_ratio=ratio, cpu_ratio=cpu_ratio, rel_diff=diff)
        )
    record = dict(benchmark="conditional_pass", rows=rows, **environment())
    Path(args.out).write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
