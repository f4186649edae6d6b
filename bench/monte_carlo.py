"""Benchmark: monte_carlo_loss against the SciPy and csaps peers and the matmul floor.

Setting (issue 12): N = 100 workers, K = 20 inputs, m = 10 outputs, M = 4096 masks with exactly
S = 10 stragglers each, in float64 and float32. In the same run:

* ours: ``gcc_jax.monte_carlo_loss`` with the default (batch-native Kalman) decoder;
* the SciPy peer: a Python loop of ``scipy.interpolate.make_smoothing_spline`` on the live
  workers per mask, evaluated at the K points (the decode step only), timed on a subset;
* the csaps peer (optional ``bench`` extra): the same loop with ``csaps.CubicSmoothingSpline``
  (``smooth = 1/(1 + λ')``, the same objective);
* the floor: applying precomputed ``K × N`` decoder matrices to the outputs, one batched
  ``einsum('pkn,nm->pkm')`` in the same dtype (a lower bound for any decoder);
* the decoder alone, on the floor's footing: the library's batched decoder
  (``code.decode_chunks``, with the statuses and checks of every decode) over masks already on
  the devices, the decoded values ``(M, K, m)`` out, sharded over the devices as the mask
  evaluator shards it, with the code's CPU chunk size, compiler options and plan
  (``code.decode_init``: the part of the decoder that does not depend on the outputs, made once
  per code, as the floor's matrices are made before it is timed). ``monte_carlo_loss``
  also encodes, runs ``f`` on the ``N`` coded and ``K`` true inputs, validates its arguments,
  moves the masks and operands onto the devices and the losses back, every call.

Correctness is checked before timing (our decode vs SciPy on 16 masks, float64 reference).
``monte_carlo_loss``, the decoder alone and the floor are timed in three rounds of ``--repeat``
calls each (``bench/_common.best_of_rounds``), best of all rounds, so that each one's best comes
from the same stretch of this machine's drifting speed.
Prints masks/s and the ratios; writes JSON to ``bench/results/``.

Usage: python bench/monte_carlo.py [--masks 4096] [--peer-masks 200] [--repeat 10]
       [--workers 100] [--dtypes float64,float32] [--device cpu|gpu] [--cpu-devices 2]
       (``--repeat``: calls per round, three rounds)
       [--out PATH]

``--cpu-devices C`` splits the CPU into C JAX devices (one per core is the fast setting on CPU;
``monte_carlo_loss`` shards every chunk of masks over them); the default is JAX's one device.
"""

import argparse
import json
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import (
    best_of,
    best_of_rounds,
    csaps_peer,
    environment,
    floor_call,
    scipy_peer,
    use_cpu_devices,
    use_device,
    worker_function,
)

K, M_OUT = 20, 10
LAM_DEC = 1e-6  # SciPy needs lam > 0 to be a smoothing spline; a small, realistic value
worker_fn = worker_function(M_OUT)


def run(dtype: str, masks_np, args) -> dict:
    import gcc_jax as gcc

    n = masks_np.shape[1]
    code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=n, lam_dec=LAM_DEC, dtype=dtype)
    x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, 4)), dtype)
    masks = jnp.asarray(masks_np)
    yt = code.worker_outputs(worker_fn, x)
    ref = scipy_peer(
        np.asarray(code.beta, np.float64),
        np.asarray(code.alpha, np.float64),
        np.asarray(yt, np.float64),
        masks_np[:16],
        LAM_DEC,
    )
    ours = np.asarray(code.decode_batch_with_status(yt, masks[:16]).value, np.float64)
    rel_err = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))

    def ours_run():
        return gcc.monte_carlo_loss(code, worker_fn, x, masks, chunk_size=args.chunk)

    t0 = time.perf_counter()
    ours_run()
    first = time.perf_counter() - t0
    decoder_run, dec_err = decoder_alone(gcc, code, yt, masks_np, args.chunk)
    # the floor: precomputed decoder matrices applied to the outputs (same dtype, capped count)
    num_floor, floor_run = floor_call(yt, K, masks_np.shape[0])
    best = best_of_rounds(
        {"ours": ours_run, "decoder": decoder_run, "floor": floor_run}, max(args.repeat, 3)
    )
    (seconds, cpu_seconds), (dec_s, dec_cpu), (floor_s, floor_cpu) = (
        best["ours"],
        best["decoder"],
        best["floor"],
    )
    return dict(
        dtype=dtype,
        masks=int(masks_np.shape[0]),
        seconds=seconds,
        masks_per_s=masks_np.shape[0] / seconds,
        compile_s=max(first - seconds, 0.0),
        floor_masks_per_s=num_floor / floor_s,
        masks_per_cpu_s=masks_np.shape[0] / cpu_seconds,
        floor_masks_per_cpu_s=num_floor / floor_cpu,
        decoder_masks_per_s=masks_np.shape[0] / dec_s,
        decoder_masks_per_cpu_s=masks_np.shape[0] / dec_cpu,
        decoder_rel_diff_vs_decode_batch=dec_err,
        rel_err_vs_scipy=rel_err,
    )


def decoder_alone(gcc, code, yt, masks_np, chunk) -> tuple:
    """A function running the batched decoder over device-resident masks (values out) to
    completion, compiled, and its largest relative difference from
    ``code.decode_batch_with_status`` on 16 masks."""
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices()
    num, n = masks_np.shape
    first = masks_np[:1]
    policy = gcc.evaluation.device_policy(devices)  # as the evaluator: platform and memory
    # the code's decode_init state (its decoder's work that does not depend on the outputs),
    # made once per code as the evaluator makes it, as the floor's decoder matrices are made
    # before its timing; the backend policy picks the chunk and the XLA options from it
    plan = code.decode_init(first) if policy.precompute else None
    chunk = chunk or policy.chunk_size(n, M_OUT, plan)
    ndev = len(devices)
    if num % (chunk * ndev):
        raise SystemExit(f"--masks must be a multiple of {chunk * ndev} (chunk × devices)")
    options = policy.compiler_options(plan)
    mesh = Mesh(np.asarray(devices), ("p",))

    def values(code, yt, chunks, plan):
        return code.decode_chunks(yt, chunks, lambda d: d.value, plan)

    sharded = jax.shard_map(
        values,
        mesh=mesh,
        in_specs=(P(), P(), P(None, "p", None), P()),
        out_specs=P(None, "p"),
        check_vma=False,
    )
    run = jax.jit(sharded, compiler_options=options or None)
    code, yt, plan = jax.device_put((code, yt, plan), NamedSharding(mesh, P()))
    chunks = jax.device_put(
        masks_np.reshape(num // (chunk * ndev), chunk * ndev, n),
        NamedSharding(mesh, P(None, "p", None)),
    )
    out = np.asarray(run(code, yt, chunks, plan)).reshape(num, K, M_OUT)
    ref = np.asarray(code.decode_batch_with_status(yt, jnp.asarray(masks_np[:16])).value)
    err = float(np.max(np.abs(out[:16] - ref)) / np.max(np.abs(ref)))
    return (lambda: jax.block_until_ready(run(code, yt, chunks, plan))), err


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--masks", type=int, default=4096)
    p.add_argument("--workers", type=int, default=100)
    p.add_argument("--stragglers", type=int, default=10)
    p.add_argument("--peer-masks", type=int, default=200)
    p.add_argument(
        "--repeat", type=int, default=10, help="timed calls per round (three rounds), best of all"
    )
    p.add_argument("--chunk", type=int, default=None, help="masks per chunk (default: auto)")
    p.add_argument("--dtypes", default="float64,float32")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "monte_carlo.json"))
    p.add_argument(
        "--device", default=None, help="cpu, gpu (cuda or rocm, whichever is installed), cuda, …"
    )
    p.add_argument(
        "--cpu-devices", type=int, default=None, help="split the CPU into this many JAX devices"
    )
    args = p.parse_args()
    use_device(args.device)
    use_cpu_devices(args.cpu_devices)
    jax.config.update("jax_enable_x64", True)
    import gcc_jax as gcc

    load_before = os.getloadavg()
    n, s = args.workers, args.stragglers
    masks_np = np.asarray(gcc.sample_masks(jax.random.key(0), n, num=args.masks, stragglers=s))
    code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=n, lam_dec=LAM_DEC)
    x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, 4)))
    yt = np.asarray(code.worker_outputs(worker_fn, x))
    beta, alpha = np.asarray(code.beta), np.asarray(code.alpha)
    pm = masks_np[: args.peer_masks]
    peer_s, peer_cpu = best_of(lambda: scipy_peer(beta, alpha, yt, pm, LAM_DEC), 2)
    peer_rate, peer_cpu_rate = pm.shape[0] / peer_s, pm.shape[0] / peer_cpu
    try:
        ref = scipy_peer(beta, alpha, yt, pm[:4], LAM_DEC)
        csaps_err = float(
            np.max(np.abs(csaps_peer(beta, alpha, yt, pm[:4], LAM_DEC) - ref)) / np.abs(ref).max()
        )
        csaps_s, csaps_cpu = best_of(lambda: csaps_peer(beta, alpha, yt, pm, LAM_DEC), 2)
        csaps_rate, csaps_cpu_rate = pm.shape[0] / csaps_s, pm.shape[0] / csaps_cpu
    except ImportError:
        csaps_rate, csaps_cpu_rate, csaps_err = float("nan"), float("nan"), float("nan")
    print(f"N={n} K={K} m={M_OUT} S={s} M={args.masks} devices={jax.devices()}")
    print(f"SciPy peer ({pm.shape[0]} masks): {peer_rate:,.0f} masks/s")
    print(f"csaps peer ({pm.shape[0]} masks): {csaps_rate:,.0f} masks/s (vs SciPy {csaps_err:.1e})")
    rows = []
    print(
        f"{'dtype':>8} {'masks/s':>11} {'x SciPy':>8} {'x csaps':>8} {'/floor':>7} {'compile':>8}"
        f"   (monte_carlo_loss; then the decoder alone)"
    )
    for dtype in args.dtypes.split(","):
        r = run(dtype, masks_np, args)
        r["speedup_vs_scipy"] = r["masks_per_s"] / peer_rate
        r["speedup_vs_csaps"] = r["masks_per_s"] / csaps_rate
        r["slowdown_vs_floor"] = r["floor_masks_per_s"] / r["masks_per_s"]
        r["cpu_time_speedup_vs_scipy"] = r["masks_per_cpu_s"] / peer_cpu_rate
        r["cpu_time_speedup_vs_csaps"] = r["masks_per_cpu_s"] / csaps_cpu_rate
        r["cpu_time_slowdown_vs_floor"] = r["floor_masks_per_cpu_s"] / r["masks_per_cpu_s"]
        r["decoder_speedup_vs_scipy"] = r["decoder_masks_per_s"] / peer_rate
        r["decoder_speedup_vs_csaps"] = r["decoder_masks_per_s"] / csaps_rate
        r["decoder_slowdown_vs_floor"] = r["floor_masks_per_s"] / r["decoder_masks_per_s"]
        rows.append(r)
        print(
            f"{dtype:>8} {r['masks_per_s']:>11,.0f} {r['speedup_vs_scipy']:>7.0f}x "
            f"{r['speedup_vs_csaps']:>7.0f}x {r['slowdown_vs_floor']:>6.2f}x "
            f"{r['compile_s']:>7.2f}s   err {r['rel_err_vs_scipy']:.1e}"
        )
        print(
            f"{'(CPU s)':>8} {r['masks_per_cpu_s']:>11,.0f} "
            f"{r['cpu_time_speedup_vs_scipy']:>7.0f}x "
            f"{r['cpu_time_speedup_vs_csaps']:>7.0f}x {r['cpu_time_slowdown_vs_floor']:>6.2f}x"
        )
        print(
            f"{'decoder':>8} {r['decoder_masks_per_s']:>11,.0f} "
            f"{r['decoder_speedup_vs_scipy']:>7.0f}x {r['decoder_speedup_vs_csaps']:>7.0f}x "
            f"{r['decoder_slowdown_vs_floor']:>6.2f}x {'':>8}   "
            f"vs decode_batch {r['decoder_rel_diff_vs_decode_batch']:.1e}"
        )
    out = dict(
        benchmark="monte_carlo",
        N=n,
        K=K,
        m=M_OUT,
        S=s,
        M=args.masks,
        lam_dec=LAM_DEC,
        scipy_peer_masks_per_s=peer_rate,
        csaps_peer_masks_per_s=csaps_rate,
        scipy_peer_masks_per_cpu_s=peer_cpu_rate,
        csaps_peer_masks_per_cpu_s=csaps_cpu_rate,
        csaps_rel_err_vs_scipy=csaps_err,
        rows=rows,
        **environment(),
        load_avg_1_5_15_min_before=load_before,
        load_avg_1_5_15_min_after=os.getloadavg(),
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"load average before {load_before}, after {os.getloadavg()}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
