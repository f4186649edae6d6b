"""An eager ``code.decode_with_status(y, mask)``: compiled once per code (gcc_jax) against the
same method run op by op, as before (its scan re-traced and re-compiled at every call).

Both run in this process on the same code, outputs and masks; each call gets a new mask. Prints
the best wall and CPU time per call after one warm-up call, and their ratio.

    python bench/eager_decode.py [--calls 5]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of

import gcc_jax as gcc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5, help="timed calls per variant (5)")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    rows = []
    for name, code in [
        ("spline N=40", gcc.SplineCode.chebyshev(num_inputs=10, num_workers=40, lam_dec=1e-6)),
        ("berrut N=40", gcc.BerrutCode.chebyshev(num_inputs=10, num_workers=40)),
    ]:
        y = code.worker_outputs(jnp.sin, jnp.linspace(-1.0, 1.0, 10)[:, None] * jnp.ones((1, 3)))
        masks = iter(np.asarray(gcc.sample_masks(jax.random.key(0), 40, num=100, stragglers=5)))
        op_by_op = type(code).decode_with_status.__wrapped__  # the method without its jit
        compiled = type(code).decode_with_status

        def call(method, code=code, y=y, masks=masks):
            jax.block_until_ready(method(code, y, next(masks)).value)

        for method in (op_by_op, compiled):
            call(method)  # warm-up
        t_op = best_of(lambda: call(op_by_op), args.calls)
        t_jit = best_of(lambda: call(compiled), args.calls)
        rows.append((name, t_op, t_jit))
    print(f"{'code':<12} {'op by op (wall/CPU)':>22} {'compiled (wall/CPU)':>22} {'ratio':>14}")
    for name, (w_op, c_op), (w_jit, c_jit) in rows:
        print(
            f"{name:<12} {w_op * 1e3:9.1f} / {c_op * 1e3:7.1f} ms {w_jit * 1e3:9.3f} / "
            f"{c_jit * 1e3:7.3f} ms {w_op / w_jit:7.0f}x wall"
        )


if __name__ == "__main__":
    main()
