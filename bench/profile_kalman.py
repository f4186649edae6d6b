"""Profile of the Kalman decoder: where the time per straggler pattern goes.

The Kalman decoder is two ``lax.scan`` passes over the N nodes (Kalman filter forward, state
smoother backward) vmapped over a block of masks. Its arithmetic is about 60 flops per node per
output column, so the question is what bounds it. This script measures, in one run:

1. ns per (mask · node) of ``monte_carlo_loss`` versus the block size (``chunk_size``) at
   several N: small blocks pay XLA's per-step loop overhead, large blocks spill the per-step
   working set and the stored forward quantities out of cache;
2. the same cost for the forward pass alone (filter without smoother) and for a scan whose body
   does no arithmetic at all (the pure loop overhead per step), at the default block size;
3. the matmul floor per (mask · node) for comparison.

Usage: python bench/profile_kalman.py [--quick]
"""

from __future__ import annotations

import argparse
import timeit

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import gcc_jax as gcc  # noqa: E402

K, M_OUT = 20, 10


def worker(v):
    return jnp.sin(jnp.arange(1, M_OUT + 1, dtype=v.dtype) * jnp.mean(v))


def ns_per_mask_node(fn, num, n, repeat=3):
    fn()
    best = min(timeit.repeat(fn, number=1, repeat=repeat))
    return 1e9 * best / (num * n)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    ns = [100, 1000] if args.quick else [100, 1000, 10_000]
    chunks = [8, 32, 128, 512]
    print("1. monte_carlo_loss, ns per (mask · node), by block size")
    print(f"{'N':>7} " + " ".join(f"{c:>8}" for c in chunks) + f" {'auto':>8}")
    for n in ns:
        code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=n, lam_dec=1e-6)
        x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, 4)))
        num = int(min(2048, max(64, 2e5 // n)))
        masks = np.asarray(gcc.sample_masks(jax.random.key(0), n, num=num, stragglers=n // 10))
        row = []
        for c in [*chunks, None]:
            row.append(
                ns_per_mask_node(
                    lambda c=c: gcc.monte_carlo_loss(code, worker, x, masks, chunk_size=c), num, n
                )
            )
        print(f"{n:>7} " + " ".join(f"{v:>8.0f}" for v in row))

    print("\n2. at N = 1000, default block: full decode vs filter only vs empty scan")
    n = 1000
    chunk = gcc.auto_chunk_size(n, M_OUT)
    t = gcc.chebyshev_nodes(n, kind=2)
    y = jax.random.normal(jax.random.key(1), (n, M_OUT))
    masks = gcc.sample_masks(jax.random.key(2), n, num=chunk, stragglers=100)
    from gcc_jax.spline._kalman import solve_kalman

    full = jax.jit(jax.vmap(lambda m: solve_kalman(t, m, jnp.asarray(1e-6), y)))

    def filter_only(m):
        w = m.astype(y.dtype)

        def step(c, inp):
            yi, wi = inp
            u = yi - c
            return c + 0.1 * wi * u, None

        return lax.scan(step, jnp.zeros((M_OUT + 2,)), (jnp.pad(y, ((0, 0), (0, 2))), w))[0]

    def empty(m):
        return lax.scan(lambda c, _: (c + 1.0, None), jnp.zeros(()), None, length=n)[0]

    for name, fn in [
        ("full decode (filter + smoother)", full),
        ("one-line filter recursion", jax.jit(jax.vmap(filter_only))),
        ("empty scan (loop overhead)", jax.jit(jax.vmap(empty))),
    ]:
        v = ns_per_mask_node(lambda fn=fn: jax.block_until_ready(fn(masks)), chunk, n)
        print(f"   {name:<34} {v:>8.1f} ns per mask-node")
    d = jax.random.normal(jax.random.key(3), (chunk, K, n))
    mm = jax.jit(lambda d: jnp.einsum("pkn,nm->pkm", d, y))
    v = ns_per_mask_node(lambda: jax.block_until_ready(mm(d)), chunk, n)
    print(f"   {'matmul floor (K·m MACs per node)':<34} {v:>8.1f} ns per mask-node")


if __name__ == "__main__":
    main()
