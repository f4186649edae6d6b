"""``gcc-jax serve-bench``: latency tails and accuracy of coded inference on a local Ray cluster.

A Poisson stream of test images is served by :class:`gcc_jax.distributed.CodedInferenceService`
over Ray actors holding a trained classifier, with injected stragglers, once per scheme:

* ``uncoded``: ``K`` workers, one query each; the round waits for all ``K``;
* ``replication``: the same ``N`` workers as the codes, ``N/K`` copies of each query
  (round-robin); the round waits for one copy of every query;
* ``gcc``: :class:`gcc_jax.SplineCode`, ``N`` workers, the round waits for ``N − S``;
* ``bacc``: :class:`gcc_jax.BerrutCode`, the same;
* ``parm``: ParM (:class:`gcc_jax.codes.ParityModelCode`, sum encoder, ``r = 1``): ``K``
  workers run the base model on the queries themselves and one more runs the parity model
  (trained by :func:`gcc_jax.codes.train_parity_model`, cached) on their sum; the round waits
  for ``K`` of the ``K + 1``; a missing base output is recovered by subtraction. Its workers
  return logits (what the parity model is trained on), so it has its own ``K + 1`` actors.
  Like every scheme here it is batch-synchronous: whenever the parity worker is among the
  first ``K`` to answer (probability ``K/(K+1)`` with i.i.d. latencies), one query of the
  batch gets the reconstruction. ParM's own frontend instead releases each query as soon as
  its base output arrives, which this service does not model.

Every scheme sees the same queries at the same arrival times, the same batching (``K`` per
batch, at most ``max_wait`` for a batch to fill) and the same latency model on each of its
workers: ``T = s_n · B · (shift + scale · L)`` (:class:`gcc_jax.distributed.DelayModel`), with
``L`` exponential or Lomax, ``B = slowdown`` with probability ``straggle_prob`` (transient
stragglers) and ``slow_workers`` of each scheme's workers ``slowdown`` times slower throughout
(persistent stragglers). The injected delay comes on top of the real Ray and compute time.

Latency is per query, submission → answer (batching wait included); an error (no answer
possible) counts with its latency and as a wrong prediction. Percentiles use linear
interpolation between order statistics (``numpy.percentile``): p99.9 needs ≳ 1000 queries to
mean anything. Accuracy is against the true labels; "agree" is agreement with the base model's
own prediction on the same image (1.0 for an exact scheme that answered everything).
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ..codes import BerrutCode, ReplicationCode, SplineCode, UncodedCode
from ..distributed import (
    CodedInferenceService,
    DelayModel,
    RayExecutor,
    default_wait_for,
    init_local_ray,
    poisson_arrivals,
    probability_check,
)

__all__ = [
    "SCHEMES",
    "format_serve_table",
    "plot_serve_cdf",
    "run_serve_bench",
    "save_serve",
    "summarize_answers",
]

SCHEMES = ("uncoded", "replication", "gcc", "bacc", "parm")
"""Schemes `run_serve_bench` knows, in table order."""

_PARM_NOTE = "ParM skipped: gcc_jax.codes has no ParityModelCode in this version"


def summarize_answers(answers: Sequence[Any], labels: np.ndarray, base: np.ndarray) -> dict:
    """Latency percentiles (ms), accuracy and worker events of one scheme's answers.

    ``labels`` and ``base`` (the base model's predictions) are indexed by ``query_id``.
    """
    lat = np.array([a.latency_s for a in answers], dtype=float) * 1e3
    qid = np.array([a.query_id for a in answers], dtype=int)
    pred = np.array([a.prediction for a in answers], dtype=int)
    ok = np.array([a.ok for a in answers], dtype=bool)
    n = len(answers)
    rounds: dict[int, Any] = {}
    for a in answers:
        if a.batch_id >= 0:
            rounds.setdefault(a.batch_id, a)
    events: dict[str, int] = {}
    for a in rounds.values():
        for issue in a.worker_issues.values():
            kind = issue.split(":")[0]
            events[kind] = events.get(kind, 0) + 1
    errors: dict[str, int] = {}
    examples: dict[str, str] = {}
    for a in answers:
        if not a.ok:
            kind = a.error.split(":")[0].split("(")[0].strip()
            errors[kind] = errors.get(kind, 0) + 1
            examples.setdefault(kind, a.error)

    def pct(q):
        return float(np.percentile(lat, q)) if n else math.nan

    return dict(
        queries=n,
        answered=int(ok.sum()),
        errors=int(n - ok.sum()),
        error_kinds=errors,
        error_examples=examples,
        p50_ms=pct(50),
        p99_ms=pct(99),
        p999_ms=pct(99.9),
        mean_ms=float(lat.mean()) if n else math.nan,
        max_ms=float(lat.max()) if n else math.nan,
        mean_queue_ms=float(np.mean([a.queue_s for a in answers]) * 1e3) if n else math.nan,
        accuracy=float(np.mean(pred == labels[qid])) if n else math.nan,
        agreement=float(np.mean(pred == base[qid])) if n else math.nan,
        rounds=len(rounds),
        rounds_timed_out=int(sum(a.timed_out for a in rounds.values())),
        worker_events=events,
        latencies_ms=[round(float(v), 4) for v in lat],
        predictions=[int(v) for v in pred],
    )


def _schemes(schemes, k, n, s, lam_dec):
    """``{name: (code, wait_for)}`` and notes for the schemes that can run."""
    out, notes = {}, []
    for name in schemes:
        if name == "uncoded":
            code = UncodedCode(num_inputs=k)
            out[name] = (code, default_wait_for(code))
        elif name == "replication":
            code = ReplicationCode(num_inputs=k, num_workers=n)
            out[name] = (code, default_wait_for(code))
            if n % k:
                notes.append(f"replication: N={n} is not a multiple of K={k}; copies are uneven")
        elif name == "gcc":
            code = SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=lam_dec)
            out[name] = (code, default_wait_for(code, s))
        elif name == "bacc":
            code = BerrutCode.chebyshev(num_inputs=k, num_workers=n)
            out[name] = (code, default_wait_for(code, s))
        elif name == "parm":
            from .. import codes as codes_module

            if not hasattr(codes_module, "ParityModelCode"):
                notes.append(_PARM_NOTE)
            else:
                out[name] = None  # built once the base model is trained (_parm_scheme)
        else:
            raise ValueError(f"unknown scheme {name!r}; choose from {SCHEMES}")
    return out, notes


def _parm_scheme(tm, ds, k: int, epochs: int, seed: int, progress: bool):
    """ParM's code, its ``K + 1`` worker functions (logits; parity model last) and its notes."""
    from ..models import make_model
    from ..training import train_parity_model

    _, init = make_model(
        tm.model_name, input_shape=ds.input_shape, num_classes=ds.num_classes, key=seed + 1
    )
    trained = train_parity_model(
        tm.apply,
        tm.params,
        ds.x_train,
        num_inputs=k,
        init_params=init,
        encoder="sum",
        epochs=epochs,
        seed=seed,
        progress=progress,
    )
    code = trained.code
    apply, params = tm.apply, tm.params
    parity_apply, parity_params = code.parity_apply, code.parity_params

    def base_logits(x):
        return apply(params, x)

    def parity_logits(p):
        return parity_apply(parity_params, p)

    held_out = trained.val_metrics[-1] if trained.val_metrics else math.nan
    note = (
        f"parm: parity model trained {epochs} epochs ({trained.train_time_s:.1f} s"
        f"{', cached' if trained.from_cache else ''}); held-out degraded-mode agreement with "
        f"the base model {held_out:.3f}; its workers return logits"
    )
    return code, [base_logits] * k + [parity_logits], note


def run_serve_bench(
    *,
    model: str = "mlp",
    dataset: str = "digits",
    epochs: int = 10,
    parm_epochs: int = 20,
    num_queries: int = 1000,
    rate: float = 50.0,
    num_inputs: int = 4,
    num_workers: int = 8,
    stragglers: int = 2,
    shift_ms: float = 5.0,
    scale_ms: float = 5.0,
    tail: str = "exponential",
    straggle_prob: float = 0.05,
    slowdown: float = 10.0,
    slow_workers: int = 0,
    fail_prob: float = 0.0,
    lam_dec: float = 1e-6,
    max_wait_ms: float = 20.0,
    timeout_s: float = 1.0,
    max_in_flight: int = 4,
    max_seconds: float = 600.0,
    schemes: Sequence[str] = SCHEMES,
    num_cpus: int = 2,
    seed: int = 0,
    data_path: str | None = None,
    progress: bool = True,
) -> dict:
    """Serve the same Poisson stream with each scheme on a local Ray cluster; return the stats.

    Args:
        model: the classifier (``"mlp"`` or ``"lenet5"`` …), trained once and cached.
        dataset: its data set (queries are drawn from the test split, with replacement).
        epochs: training epochs.
        parm_epochs: training epochs of ParM's parity model.
        num_queries: queries per scheme.
        rate: arrival rate (queries per second).
        num_inputs: ``K``, queries per coded batch.
        num_workers: ``N`` for replication and the codes (uncoded uses ``K``).
        stragglers: ``S``: the codes wait for ``N − S`` workers.
        shift_ms, scale_ms, tail: the injected latency ``shift + scale · L`` (ms).
        straggle_prob, slowdown: transient stragglers: a task is ``slowdown`` times slower
            with probability ``straggle_prob``.
        slow_workers: persistent stragglers: that many workers of each scheme are ``slowdown``
            times slower in every round.
        fail_prob: probability that a task never answers.
        lam_dec: GCC's decoder smoothing.
        max_wait_ms: the longest a batch waits to fill.
        timeout_s: a round's deadline.
        max_in_flight: rounds in flight per scheme.
        max_seconds: overall time budget for the streams (split evenly between schemes; a
            scheme stops submitting when its share is spent).
        schemes: which of :data:`SCHEMES` to run.
        num_cpus: CPUs of the local Ray cluster (loopback only).
        seed: seeds the queries, the arrivals and the injected delays.
        data_path: data directory for data sets other than digits.
        progress: progress bars.

    Returns:
        A JSON-ready dict: ``config``, ``environment``, ``ray`` (start-up times), ``schemes``
        (per scheme: see :func:`summarize_answers`), ``notes``.
    """
    from ..training import train_classifier

    t_start = time.perf_counter()
    k, n, s = int(num_inputs), int(num_workers), int(stragglers)
    if k < 2 or n < k:
        raise ValueError(f"need 2 <= K <= N; got K={k}, N={n}")
    if not 0 <= s <= n - 2:
        raise ValueError(f"`stragglers` must be in [0, N-2] = [0, {n - 2}]; got {s}")
    if num_queries < 1 or rate <= 0 or max_seconds <= 0:
        raise ValueError("`num_queries`, `rate` and `max_seconds` must be positive")
    plan, notes = _schemes(schemes, k, n, s, lam_dec)
    config = dict(
        model=model,
        dataset=dataset,
        epochs=epochs,
        parm_epochs=parm_epochs,
        num_queries=num_queries,
        rate=rate,
        num_inputs=k,
        num_workers=n,
        stragglers=s,
        shift_ms=shift_ms,
        scale_ms=scale_ms,
        tail=tail,
        straggle_prob=straggle_prob,
        slowdown=slowdown,
        slow_workers=slow_workers,
        fail_prob=fail_prob,
        lam_dec=lam_dec,
        max_wait_ms=max_wait_ms,
        timeout_s=timeout_s,
        max_in_flight=max_in_flight,
        max_seconds=max_seconds,
        schemes=list(schemes),
        seed=seed,
    )
    ray_info = init_local_ray(num_cpus)
    tm = train_classifier(model, dataset, epochs=epochs, data_path=data_path, progress=progress)
    from ..data import load_dataset

    ds = load_dataset(dataset, data_path)
    rng = np.random.default_rng([seed, 0x5E])
    idx = rng.integers(0, len(ds.y_test), size=num_queries)
    queries = np.asarray(ds.x_test[idx], np.float32)
    labels = np.asarray(ds.y_test[idx])
    f = tm.worker_fn()
    base = np.asarray(jax.jit(jax.vmap(f))(queries)).argmax(-1)
    arrivals = poisson_arrivals(rate, num_queries, seed=seed)

    parm = None
    if "parm" in plan:
        code, fns, note = _parm_scheme(tm, ds, k, parm_epochs, seed, progress)
        plan["parm"] = (code, default_wait_for(code, 1))
        parm = fns
        notes.append(note)

    results: dict[str, dict] = {}
    pools_info: list[dict] = []
    pools: dict[str, RayExecutor] = {}
    share = max_seconds / max(len(plan), 1)
    try:
        shared = [m for m in plan if m != "parm"]
        if shared:  # one pool of softmax workers for every scheme but ParM
            pools["shared"] = RayExecutor(
                f,
                num_workers=max(plan[m][0].num_workers for m in shared),
                input_shape=ds.input_shape,
                input_dtype=np.float32,
                validate=probability_check(),
                x64=False,
            )
        if parm is not None:  # ParM: K base-model workers and the parity worker, on logits
            pools["parm"] = RayExecutor(
                parm,
                num_workers=len(parm),
                input_shape=ds.input_shape,
                input_dtype=np.float32,
                x64=False,
            )
        for label, pool in pools.items():
            info = pool.startup
            pools_info.append(
                dict(
                    pool=label,
                    actors=len(info),
                    startup_wall_s=pool.startup_wall_s,
                    actor_startup_s=[round(v["startup_s"], 3) for v in info],
                    actor_load_s=[round(v["load_s"], 3) for v in info],
                    actor_compile_s=[round(v["compile_s"], 3) for v in info],
                )
            )
        for name, (code, wait_for) in plan.items():
            pool = pools["parm" if name == "parm" else "shared"]
            m = code.num_workers
            delays = DelayModel.with_slow_workers(
                m,
                min(int(slow_workers), m),
                slowdown,
                shift=shift_ms / 1e3,
                scale=scale_ms / 1e3,
                tail=tail,
                straggle_prob=straggle_prob,
                straggle_factor=slowdown,
                fail_prob=fail_prob,
                seed=seed,
            )
            service = CodedInferenceService(
                pool.view(m, delays=delays),
                code,
                wait_for=wait_for,
                max_wait_s=max_wait_ms / 1e3,
                timeout_s=timeout_s,
                max_in_flight=max_in_flight,
            )
            warm = service.warmup()
            t0 = time.perf_counter()
            with service:
                answers = service.serve(
                    queries, arrivals, max_seconds=share, progress=progress, desc=f"serve {name}"
                )
            stats = summarize_answers(answers, labels, base)
            stats.update(
                num_workers=m,
                wait_rule=service.rule,
                wall_s=time.perf_counter() - t0,
                warmup_s=warm,
                submitted=len(answers),
                not_submitted=num_queries - len(answers),
            )
            results[name] = stats
            if progress:
                print(
                    f"{name}: p50 {stats['p50_ms']:.1f} ms, p99 {stats['p99_ms']:.1f} ms, "
                    f"accuracy {stats['accuracy']:.4f}, errors {stats['errors']}",
                    flush=True,
                )
        restarts = {label: pool.restarts for label, pool in pools.items()}
    finally:
        for pool in pools.values():
            pool.close()
    return dict(
        experiment="serve_bench",
        config=config,
        environment=dict(
            python=platform.python_version(),
            jax=jax.__version__,
            ray=_ray_version(),
            cpus=os.cpu_count(),
            machine=platform.machine(),
        ),
        ray=dict(
            node_ip=ray_info["node_ip"],
            cluster_cpus=ray_info["num_cpus"],
            pools=pools_info,
            restarts=restarts,
        ),
        model=dict(name=tm.model_name, test_accuracy=tm.test_accuracy, from_cache=tm.from_cache),
        base_accuracy=float(np.mean(base == labels)),
        query_indices=[int(v) for v in idx],
        base_predictions=[int(v) for v in base],
        schemes=results,
        notes=notes,
        total_s=time.perf_counter() - t_start,
    )


def _ray_version() -> str:
    import ray

    return ray.__version__


def format_serve_table(result: dict) -> str:
    """A plain-text table of a :func:`run_serve_bench` result."""
    cfg = result["config"]
    head = (
        f"serve-bench: {result['model']['name']} on {cfg['dataset']}, K={cfg['num_inputs']}, "
        f"N={cfg['num_workers']}, S={cfg['stragglers']}, {cfg['rate']:g} q/s, "
        f"delay {cfg['shift_ms']:g}+{cfg['scale_ms']:g}·{cfg['tail']} ms, "
        f"p(x{cfg['slowdown']:g})={cfg['straggle_prob']:g}, slow workers {cfg['slow_workers']}"
    )
    cols = (
        f"{'scheme':<12}{'N':>3} {'wait rule':<34}{'queries':>8}{'errors':>7}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}{'accuracy':>10}{'agree':>8}"
    )
    lines = [head, f"base model accuracy on these queries: {result['base_accuracy']:.4f}", cols]
    lines.append("-" * len(cols))
    for name, st in result["schemes"].items():
        lines.append(
            f"{name:<12}{st['num_workers']:>3} {st['wait_rule']:<34}{st['queries']:>8}"
            f"{st['errors']:>7}{st['p50_ms']:>9.1f}{st['p99_ms']:>9.1f}{st['p999_ms']:>10.1f}"
            f"{st['accuracy']:>10.4f}{st['agreement']:>8.4f}"
        )
    r = result["ray"]
    for pool in r["pools"]:
        lines.append(
            f"Ray pool {pool['pool']}: {pool['actors']} actors on {r['node_ip']} ready in "
            f"{pool['startup_wall_s']:.1f} s (per actor, medians: load "
            f"{np.median(pool['actor_load_s']):.2f} s, compile "
            f"{np.median(pool['actor_compile_s']):.2f} s); restarts "
            f"{sum(r['restarts'].get(pool['pool'], []))}"
        )
    lines.extend(f"note: {note}" for note in result["notes"])
    return "\n".join(lines)


def plot_serve_cdf(result: dict, path: str | Path) -> Path:
    """Latency CDFs (left) and tails ``P(latency > t)`` on log axes (right), one line a scheme."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for name, st in result["schemes"].items():
        lat = np.sort(np.asarray(st["latencies_ms"], dtype=float))
        if lat.size == 0:
            continue
        cdf = np.arange(1, lat.size + 1) / lat.size
        label = f"{name} (p99 {st['p99_ms']:.0f} ms, acc {st['accuracy']:.3f})"
        ax.plot(lat, cdf, label=label)
        ax2.loglog(lat, np.maximum(1.0 - cdf + 1.0 / lat.size, 1.0 / lat.size), label=name)
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of queries answered")
    ax.set_title("latency CDF")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax2.set_xlabel("latency t (ms)")
    ax2.set_ylabel("P(latency ≥ t)")
    ax2.set_title("tail")
    ax2.grid(True, which="both", alpha=0.3)
    for a in (ax, ax2):  # plain numbers on the log latency axis, no crowded minor labels
        a.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.xaxis.set_major_formatter(ScalarFormatter())
        a.xaxis.set_minor_formatter(NullFormatter())
    cfg = result["config"]
    fig.suptitle(
        f"{result['model']['name']}/{cfg['dataset']}: K={cfg['num_inputs']}, "
        f"N={cfg['num_workers']}, S={cfg['stragglers']}, {cfg['rate']:g} q/s on Ray"
    )
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def save_serve(result: dict, out: str | Path) -> dict[str, Path]:
    """Write ``serve_bench.json``, ``serve_bench.txt`` and ``serve_bench.png`` into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = dict(
        json=out / "serve_bench.json", table=out / "serve_bench.txt", plot=out / "serve_bench.png"
    )
    paths["json"].write_text(json.dumps(result, indent=2))
    paths["table"].write_text(format_serve_table(result) + "\n")
    plot_serve_cdf(result, paths["plot"])
    return paths
