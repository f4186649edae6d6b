"""RobustSplineCode against liars at every position, and what a robust decode costs.

Setting (the adversarial service tests'): N = 12 workers, K = 3 inputs, a 4-class softmax model
on R³, 12 queries (4 batches of K) with a top-2 margin ≥ 0.1; a wrong answer is a decoded class
(argmax) that differs from the model's on the true input. Sweeps: no liar; garbage (finite,
~10³) on every pair (γ = 2) and every triple (γ = 3) of workers; the in-range swap lie (top-2
classes swapped) on every adjacent pair; for ApproxIFER also the oracle (BACC through the honest
workers of each pair). Codes: RobustSplineCode (huber, tukey, trim; trim = γ,
min_scale = 10⁻², λ_dec by the paper's rule with c = ``--constant``) and ApproxIFERCode (A = γ).
Cost: one jitted decode (µs, best of repeats, compile apart) against the plain SplineCode
decode, float64 and float32, in the same run. Usage: ``python bench/robust_decode.py
[--constant 1e-3] [--out bench/results/robust_decode.json]``.
"""

import argparse
import itertools
import json
import timeit

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import gcc_jax as gcc  # noqa: E402

N, K, M = 12, 3, 4
W = np.random.default_rng(0).normal(size=(M, 3))


def model(v):
    return jax.nn.softmax(jnp.asarray(W, v.dtype) @ v)


def queries():
    x = np.random.default_rng(1).uniform(-1, 1, size=(16 * 12, 3))
    p = np.sort(np.asarray(jax.vmap(model)(jnp.asarray(x))), axis=1)
    x = x[p[:, -1] - p[:, -2] >= 0.1][:12]
    return x.reshape(4, K, 3), np.argmax(np.asarray(jax.vmap(model)(jnp.asarray(x))), 1)


def codes(gamma, constant, dtype=jnp.float64):
    lam = gcc.adversarial_lam_dec(N, gamma, 1.0, constant=constant)
    out = {
        loss: gcc.RobustSplineCode.chebyshev(
            num_inputs=K,
            num_workers=N,
            lam_dec=lam,
            loss=loss,
            trim=gamma,
            min_scale=1e-2,
            dtype=dtype,
        )
        for loss in ("huber", "tukey", "trim")
    }
    out["approxifer"] = gcc.codes.ApproxIFERCode.chebyshev(
        num_inputs=K, num_workers=N, num_adversaries=gamma, dtype=dtype
    )
    return out


def lies(clean, placements, kind):
    ys = np.repeat(clean[None], len(placements), axis=0)
    for i, liars in enumerate(placements):
        for w, b in itertools.product(liars, range(clean.shape[0])):
            if kind == "garbage":
                ys[i, b, w] = 1e3 * np.random.default_rng([b, w, 0x6A]).standard_normal(M)
            else:
                top = np.argsort(clean[b, w])[::-1][:2]
                ys[i, b, w, top] = clean[b, w, top[::-1]]
    return ys


def wrong(code, ys, truth):
    live = jnp.ones(N, bool)
    f = jax.jit(jax.vmap(jax.vmap(lambda y: code.decode_with_status(y, live).value)))
    out = np.asarray(f(jnp.asarray(ys)))
    return (np.argmax(out, -1) != truth.reshape(1, 4, K)) | np.isnan(out).any(-1)


def sweep(constant):
    x, truth = queries()
    result = {}
    for name in ("huber", "tukey", "trim", "approxifer"):
        c2, c3 = codes(2, constant)[name], codes(3, constant)[name]
        clean = np.stack([np.asarray(c2.worker_outputs(model, jnp.asarray(xb))) for xb in x])
        pairs = list(itertools.combinations(range(N), 2))
        triples = list(itertools.combinations(range(N), 3))
        adjacent = [(i, i + 1) for i in range(N - 1)]
        wp = wrong(c2, lies(clean, pairs, "garbage"), truth)
        wt = wrong(c3, lies(clean, triples, "garbage"), truth)
        result[name] = {
            "clean_wrong": int(wrong(c2, clean[None], truth).sum()),
            "pairs_wrong": int(wp.sum()),
            "pairs_answers": int(wp.size),
            "triples_wrong": int(wt.sum()),
            "triples_all_right": int((~wt.any((1, 2))).sum()),
            "swap_wrong": int(wrong(c2, lies(clean, adjacent, "swap"), truth).sum()),
        }
        if name == "approxifer":  # the oracle: BACC through the honest workers only
            bacc = c2.berrut
            live = np.stack([~np.isin(np.arange(N), p) for p in pairs])
            f = jax.jit(jax.vmap(lambda y, m: jax.vmap(lambda yb: bacc.decode(yb, m))(y)))
            out = np.asarray(f(jnp.asarray(lies(clean, pairs, "garbage")), jnp.asarray(live)))
            result[name]["oracle_pairs_wrong"] = int(
                (np.argmax(out, -1) != truth.reshape(1, 4, K)).sum()
            )
        print(name, result[name], flush=True)
    return result


def cost(constant, repeat):
    x, _ = queries()
    live = jnp.ones(N, bool)
    out = {}
    for dtype in (jnp.float64, jnp.float32):
        plain = gcc.SplineCode.chebyshev(
            num_inputs=K,
            num_workers=N,
            lam_dec=gcc.adversarial_lam_dec(N, 2, 1.0, constant=constant),
            dtype=dtype,
        )
        y = lies(
            np.stack([np.asarray(plain.worker_outputs(model, jnp.asarray(x[0], dtype)))]),
            [(5, 6)],
            "garbage",
        )[0, 0].astype(dtype)
        y = jnp.asarray(y)
        row = {}
        for name, code in [("spline", plain)] + list(codes(2, constant, dtype).items()):
            f = jax.jit(lambda c, yy: c.decode_with_status(yy, live).value)
            jax.block_until_ready(f(code, y))
            best = min(
                timeit.repeat(lambda: jax.block_until_ready(f(code, y)), number=20, repeat=repeat)
            )
            row[name] = best / 20 * 1e6
        row["ratio_trim_over_spline"] = row["trim"] / row["spline"]
        out[jnp.dtype(dtype).name] = row
        print(jnp.dtype(dtype).name, {k: round(v, 1) for k, v in row.items()}, flush=True)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--constant", type=float, default=1e-3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    res = {"constant": args.constant, "jax": jax.__version__, "device": str(jax.devices()[0])}
    res["cost_us"] = cost(args.constant, args.repeat)
    if not args.skip_sweep:
        res["sweep"] = sweep(args.constant)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
