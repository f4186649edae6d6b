"""Benchmark: the downdate's dead-worker search (bit scans) against the counting form it replaced.

``gcc_jax.spline._downdate.dead_workers`` packs each mask's dead workers into 32-bit words and
takes the lowest set bit of the first non-zero word per slot (``O(S · N/32)`` a mask). The peer
is the code it replaced (session 14's, kept here): running counts of the dead workers compared with
every slot, or a scan over the workers (``O(S · N)`` a mask).
Both are checked equal on every mask, then timed in one run: 32 chunks of 64 masks per compiled
call (a ``lax.map``, as in the evaluator), one CPU core, XLA's classic emitters (what
the CPU evaluator policy asks for there). Prints µs per chunk of 64 masks and the
ratio; writes JSON to ``bench/results/``.

Usage: python bench/dead_workers.py [--repeat 30] [--out PATH]
"""

import argparse
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of, environment
from jax import lax

from gcc_jax._core.xla_flags import FLAG, compiler_options
from gcc_jax.spline import _downdate as dd

CASES = ((100, 10, 12), (256, 20, 24), (1024, 10, 12), (1024, 24, 24))  # (N, S, slots)
CHUNKS, WIDTH = 32, 64


def counting(masks, size):
    """The peer: the form the bit scans replaced (session 14's ``dead_workers``), each part where
    it was the faster: for ``n ≤ 256`` a running count ``c_i`` of the dead workers among
    ``0 … i`` (a product with a triangular matrix of ones up to ``n = 128``, a scan beyond), then
    slot ``k`` = ``#{i : c_i ≤ k}``; beyond, one scan over the workers writing each dead one into
    its slot as it passes."""
    num, n = masks.shape
    unroll = min(32, max(1, n // 2))
    if n <= 256:
        if n <= 128:
            below = jnp.tril(jnp.ones((n, n), jnp.float32))  # float32: exact counts to 2^24
            count = (below @ (~masks.T).astype(jnp.float32)).astype(jnp.int32)
        else:
            _, count = lax.scan(
                lambda c, dead: (c + dead, c + dead),
                jnp.zeros(num, jnp.int32),
                (~masks.T).astype(jnp.int32),
                unroll=unroll,
            )
        slots = jnp.arange(size, dtype=jnp.int32)[:, None, None]
        return jnp.sum(count[None] <= slots, axis=1, dtype=jnp.int32)
    slots = jnp.arange(size, dtype=jnp.int32)[:, None]

    def step(carry, xs):
        count, out = carry
        i, dead = xs
        out = jnp.where(dead[None] & (slots == count[None]), i, out)
        return (count + dead, out), None

    init = (jnp.zeros(num, jnp.int32), jnp.full((size, num), n, jnp.int32))
    (_, out), _ = lax.scan(step, init, (jnp.arange(n, dtype=jnp.int32), ~masks.T), unroll=unroll)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "dead_workers.json"))
    args = p.parse_args()
    options = compiler_options(FLAG)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'N':>5} {'S':>3} {'slots':>5} {'counting':>10} {'bit scans':>10} {'ratio':>6}")
    for n, s, size in CASES:
        masks = np.ones((CHUNKS, WIDTH, n), bool)
        for g in range(CHUNKS):
            for i in range(WIDTH):
                masks[g, i, rng.choice(n, s, replace=False)] = False
        masks = jnp.asarray(masks)
        runs = {
            name: jax.jit(
                lambda m, fn=fn: lax.map(lambda chunk: fn(chunk, size), m),
                compiler_options=options or None,
            )
            for name, fn in (("counting", counting), ("bits", dd.dead_workers))
        }
        ref, got = (np.asarray(runs[name](masks)) for name in ("counting", "bits"))
        if not np.array_equal(ref, got):
            raise SystemExit(f"bit scans differ from the count at N={n}, S={s}")
        us = {
            name: best_of(lambda run=run: jax.block_until_ready(run(masks)), args.repeat)[0]
            * 1e6
            / CHUNKS
            for name, run in runs.items()
        }
        speedup = us["counting"] / us["bits"]
        rows.append(dict(N=n, S=s, slots=size, us_per_chunk=us, speedup=speedup))
        print(
            f"{n:>5} {s:>3} {size:>5} {us['counting']:>9.1f}µ {us['bits']:>9.1f}µ {speedup:>5.1f}x"
        )
    out = dict(
        benchmark="dead_workers",
        chunk=WIDTH,
        chunks=CHUNKS,
        rows=rows,
        **environment(),
        load_avg_1_5_15_min=os.getloadavg(),
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
