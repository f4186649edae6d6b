"""Benchmark sweep: monte_carlo_loss versus N, M and m, against the SciPy peer and the matmul floor.

Each point runs in its own subprocess so that its peak memory (max RSS) is its own. For every
point the script measures, in the same run:

* ours: ``gcc_jax.monte_carlo_loss`` (Kalman decoder) — masks/s, compile time, peak RSS;
* the SciPy peer: a Python loop of ``scipy.interpolate.make_smoothing_spline`` per mask on the
  live workers, evaluated at the K points (timed on a subset of masks);
* the floor: one batched matmul of the same ``M·K·N·m`` multiply-adds
  (``einsum('pkn,nm->pkm')``, timed on a memory-capped subset of masks).

Ratios are rates (masks/s) measured on this machine in this run. Writes
``bench/results/sweep.json`` (with jax version, device and date) and ``sweep.png`` (time per
mask versus N, with the fitted scaling exponent).

Memory at a million masks: ``--memory`` runs, each in its own process, the M = 10^6 point with
nothing but ``monte_carlo_loss`` (no peers, no floor matrices; one timed call) and a baseline
process that imports JAX and gcc_jax and decodes 256 masks at N = 100 (the runtime's own RSS),
and reports both peak RSS values and their difference.

The load average (``os.getloadavg``) is recorded before and after every point: the development
machine is shared, so absolute rates depend on it; ratios within a point are what count.

Usage: python bench/sweep.py [--quick] [--dtype float64|float32] [--device cpu] [--memory]
       [--cpu-devices C]

``--cpu-devices C`` splits the CPU into C JAX devices in every point (see ``monte_carlo.py``); the
N sweep then uses at least one full chunk of masks per device.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import (
    best_of,
    csaps_peer,
    environment,
    floor,
    scipy_peer,
    use_cpu_devices,
    use_device,
    worker_function,
)

RESULTS = Path(__file__).parent / "results"


def point(cfg: dict) -> dict:
    """Measure one configuration (runs inside a subprocess)."""
    import resource

    import jax

    jax.config.update("jax_enable_x64", cfg["dtype"] == "float64")
    use_device(cfg.get("device"))
    use_cpu_devices(cfg.get("cpu_devices"))
    import jax.numpy as jnp
    import numpy as np

    import gcc_jax as gcc

    n, k, m, num, lam = cfg["N"], cfg["K"], cfg["m"], cfg["M"], cfg["lam"]
    s = max(1, n // 10)
    dtype = cfg["dtype"]
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=lam, dtype=dtype)
    f = worker_function(m)  # a smooth map R^4 -> R^m
    x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (k, 4)), dtype)
    masks = np.asarray(gcc.sample_masks(jax.random.key(0), n, num=num, stragglers=s))

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    loss = gcc.monte_carlo_loss(code, f, x, masks)
    first = time.perf_counter() - t0
    if cfg.get("ours_only"):  # memory point: only the decoder, one call (compile included)
        return dict(
            cfg,
            S=s,
            seconds_first_call=first,
            masks_per_s_incl_compile=num / first,
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            mean_loss=float(np.mean(loss)),
            load_before=load_before,
            load_after=os.getloadavg(),
            device=str(jax.devices()[0]),
            num_devices=jax.device_count(),
        )
    # best of 3 calls, or of up to 10 when a call is short (the best of 3 calls of ~15 ms moved
    # by ±20% between runs); one call when the first took over 20 s
    one, _ = best_of(lambda: gcc.monte_carlo_loss(code, f, x, masks), 1)
    repeat = 1 if first > 20 else max(3, min(10, int(3.0 / one)))
    best, best_cpu = best_of(lambda: gcc.monte_carlo_loss(code, f, x, masks), repeat)
    ours = num / best

    # SciPy peer on a subset (same worker outputs, float64)
    _, yt = gcc.apply_workers(code, f, x)
    yt = np.asarray(yt, np.float64)
    beta, alpha = np.asarray(code.beta, np.float64), np.asarray(code.alpha, np.float64)
    peer_masks = masks[: max(2, min(num, int(2e5 // n)))]

    peer_s, peer_cpu = best_of(lambda: scipy_peer(beta, alpha, yt, peer_masks, lam), 2)
    peer_rate = peer_masks.shape[0] / peer_s
    try:  # the csaps peer (optional bench extra): same loop, smooth = 1/(1 + λ')
        csaps_s, csaps_cpu = best_of(lambda: csaps_peer(beta, alpha, yt, peer_masks, lam), 2)
        csaps_rate = peer_masks.shape[0] / csaps_s
    except ImportError:
        csaps_s = csaps_cpu = csaps_rate = float("nan")

    # floor: the same multiply-adds as one batched matmul, on a memory-capped subset
    num_floor, floor_s, floor_cpu = floor(jnp.asarray(yt, dtype), k, num, 5)
    floor_rate = num_floor / floor_s
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return dict(
        cfg,
        S=s,
        masks_per_s=ours,
        seconds_per_mask=1.0 / ours,
        compile_s=max(first - best, 0.0),
        peer_masks_per_s=peer_rate,
        floor_masks_per_s=floor_rate,
        speedup_vs_peer=ours / peer_rate,
        csaps_masks_per_s=csaps_rate,
        speedup_vs_csaps=ours / csaps_rate,
        slowdown_vs_floor=floor_rate / ours,
        cpu_seconds_per_mask=best_cpu / num,
        cpu_time_speedup_vs_peer=(peer_cpu / peer_masks.shape[0]) / (best_cpu / num),
        cpu_time_speedup_vs_csaps=(csaps_cpu / peer_masks.shape[0]) / (best_cpu / num),
        cpu_time_slowdown_vs_floor=(best_cpu / num) / (floor_cpu / num_floor),
        peak_rss_mb=rss_mb,
        mean_loss=float(np.mean(loss)),
        load_before=load_before,
        load_after=os.getloadavg(),
        device=str(jax.devices()[0]),
        num_devices=jax.device_count(),
    )


def run_point(cfg: dict, timeout: float) -> dict:
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, __file__, "--point", json.dumps(cfg)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"point {cfg} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory(args) -> None:
    """Peak RSS of the decoder alone at M = 10^6 (N = 100) and of the JAX runtime baseline."""
    base = dict(
        K=20,
        m=10,
        dtype=args.dtype,
        lam=args.lam,
        device=args.device,
        cpu_devices=args.cpu_devices,
        ours_only=True,
    )
    baseline = run_point(dict(base, N=100, M=256), timeout=1800)
    big = run_point(dict(base, N=100, M=1_000_000), timeout=3600)
    out = dict(
        benchmark="memory",
        baseline=baseline,
        million=big,
        decoder_rss_mb=big["peak_rss_mb"] - baseline["peak_rss_mb"],
        **environment(big["device"]),
    )
    print(
        f"peak RSS: baseline (import + 256 masks) {baseline['peak_rss_mb']:.0f} MB, "
        f"M=10^6 {big['peak_rss_mb']:.0f} MB, difference {out['decoder_rss_mb']:.0f} MB; "
        f"{big['masks_per_s_incl_compile']:,.0f} masks/s incl. compile, load {big['load_after']}"
    )
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--point", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="N up to 10^4, small M (about 1 min)")
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument(
        "--device", default=None, help="cpu, gpu (cuda or rocm, whichever is installed), cuda, …"
    )
    p.add_argument(
        "--cpu-devices", type=int, default=None, help="split the CPU into this many JAX devices"
    )
    p.add_argument("--lam", type=float, default=1e-6)
    p.add_argument("--ns", default=None, help="comma-separated N values for the N sweep")
    p.add_argument("--only-n", action="store_true", help="only the N sweep")
    p.add_argument("--masks-scale", type=float, default=1.0, help="scale every M (short runs)")
    p.add_argument("--memory", action="store_true", help="only the isolated M = 10^6 RSS")
    p.add_argument("--out", default=None, help="default results/sweep[_float32|_memory].json")
    args = p.parse_args()
    if args.point:
        print(json.dumps(point(json.loads(args.point))))
        return
    if args.out is None:
        name = (
            "memory" if args.memory else "sweep" + ("_float32" if args.dtype == "float32" else "")
        )
        args.out = str(RESULTS / f"{name}.json")
    if args.memory:
        memory(args)
        return

    base = dict(
        K=20, m=10, dtype=args.dtype, lam=args.lam, device=args.device, cpu_devices=args.cpu_devices
    )
    ns = [50, 100, 400, 1000, 10_000] + ([] if args.quick else [100_000])
    if args.ns:
        ns = [int(v) for v in args.ns.split(",")]
    plan = []
    from gcc_jax import auto_chunk_size

    for n in ns:  # N sweep: M sized so each point takes about a second or two
        num = int(min(4096, max(16, 4e6 * args.masks_scale // n)))
        if args.quick:
            num = max(8, num // 8)
        # at least one full chunk of the evaluator per device: fewer masks would measure a
        # narrower vector (more loop overhead per mask) than a real Monte Carlo run gets
        num = max(num, auto_chunk_size(n, 10) * max(1, args.cpu_devices or 1))
        plan.append(("N", dict(base, N=n, M=num)))
    for num in [] if args.only_n else [256, 4096] + ([] if args.quick else [65536]):
        plan.append(("M", dict(base, N=100, M=num)))
    for m in [] if args.only_n else [1, 100]:
        plan.append(("m", dict(base, N=100, M=1024 if args.quick else 4096, m=m)))
    if not args.quick and not args.only_n:  # bounded memory at a million patterns
        plan.append(("memory", dict(base, N=100, M=1_000_000)))

    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    rows = []
    it = tqdm(plan, desc="bench points") if tqdm else plan
    failed = []
    for kind, cfg in it:
        try:
            r = run_point(cfg, timeout=1800)
        except RuntimeError as err:  # e.g. float32 Chebyshev nodes not distinct at N = 10^5
            failed.append(dict(cfg, sweep=kind, error=str(err).splitlines()[-1]))
            print(f"point failed: {failed[-1]}")
            continue
        r["sweep"] = kind
        rows.append(r)
    head = (
        f"{'sweep':>6} {'N':>7} {'M':>8} {'m':>4} {'masks/s':>11} {'x peer':>8} "
        f"{'x csaps':>8} {'/floor':>7} {'compile':>8} {'RSS MB':>8}"
    )
    print(head + f" {'load':>5}")
    for r in rows:
        print(
            f"{r['sweep']:>6} {r['N']:>7} {r['M']:>8} {r['m']:>4} {r['masks_per_s']:>11,.0f} "
            f"{r['speedup_vs_peer']:>7.1f}x {r['speedup_vs_csaps']:>7.1f}x "
            f"{r['slowdown_vs_floor']:>6.1f}x "
            f"{r['compile_s']:>7.2f}s {r['peak_rss_mb']:>8.0f} {r['load_after'][0]:>5.1f}"
        )
    import numpy as np

    nrows = [r for r in rows if r["sweep"] == "N"]
    xs = np.log([r["N"] for r in nrows])
    ys = np.log([r["seconds_per_mask"] for r in nrows])
    ys_cpu = np.log([r["cpu_seconds_per_mask"] for r in nrows])
    big = xs >= np.log(1000) - 1e-9
    slope = float(np.polyfit(xs[big], ys[big], 1)[0]) if big.sum() >= 2 else float("nan")
    slope_cpu = float(np.polyfit(xs[big], ys_cpu[big], 1)[0]) if big.sum() >= 2 else float("nan")
    print(f"time per mask ~ N^{slope:.2f} wall, N^{slope_cpu:.2f} CPU time (fit over N >= 1000)")
    for r in rows:
        print(
            f"{r['sweep']:>6} {r['N']:>7} CPU-time ratios: "
            f"x peer {r['cpu_time_speedup_vs_peer']:.1f}"
            f" x csaps {r['cpu_time_speedup_vs_csaps']:.1f}"
            f" /floor {r['cpu_time_slowdown_vs_floor']:.2f}"
        )
    out = dict(
        benchmark="sweep",
        dtype=args.dtype,
        lam=args.lam,
        rows=rows,
        failed=failed,
        scaling_exponent_N=slope,
        scaling_exponent_N_cpu_time=slope_cpu,
        **environment(rows[0]["device"] if rows else ""),
        load_avg_1_5_15_min=os.getloadavg(),
    )
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    try:
        import matplotlib
    except ImportError:  # the plot needs the experiments extra; the JSON does not
        print(f"wrote {path} (no matplotlib: no plot)")
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    n_arr = np.array([r["N"] for r in nrows], float)
    ax.loglog(n_arr, [r["seconds_per_mask"] for r in nrows], "o-", label="gcc_jax (kalman)")
    ax.loglog(n_arr, [1 / r["peer_masks_per_s"] for r in nrows], "s--", label="SciPy peer")
    ax.loglog(n_arr, [1 / r["floor_masks_per_s"] for r in nrows], "^:", label="matmul floor")
    ax.set_xlabel("workers N")
    ax.set_ylabel("seconds per straggler pattern")
    ax.set_title(f"monte_carlo_loss, K=20, m=10, {args.dtype}: time ~ N^{slope:.2f}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=120)
    print(f"wrote {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
