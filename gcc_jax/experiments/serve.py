"""``gcc-jax serve-bench``: ParM's tail-latency experiment, scaled down, on a local Ray cluster.

The setup of ParM's latency study (Kosaian et al., SOSP'19: a single queue, ``k = 2``, batch size 1
per worker, Poisson arrivals, background load on some workers, the equal-resources baseline)
with a cheap classifier and short service times, served by
:class:`gcc_jax.distributed.CodedInferenceService` over Ray actors, once per scheme. Each
actor serves one task at a time (``max_concurrency=1``: batch size 1, tasks queue at a busy
worker), and a task's service time is the injected delay ``shift + scale · Exp(1)``, times
``slowdown`` while its worker is in a background-load episode (persistent: episodes of mean
``episode_ms``, a fraction ``straggle_prob`` of the time; ``episode_ms = 0``: each task
slowed independently with probability ``straggle_prob``), plus the real compute.

Fairness. ``cancel="none"`` (default) lets every scheme's late tasks run to the end (a slowed
instance stays busy, as in ParM); ``"all"`` cancels them in every scheme. ``dispatch="queue"``
(default) keeps one queue: a round leaves only when a group of workers is idle and goes to it
(uncoded and equal resources are groups of one instance: an M/G/c queue over the instances);
``"round-robin"`` sends rounds to the ``G`` groups in turn, ``max_in_flight`` at once.
Schemes, all with the same queries at the same arrival times:

* ``uncoded``: ``k·G`` instances, one query each; a query is answered when its instance
  answers;
* ``equal``: ParM's *equal-resources* baseline: ``(k+1)·G`` instances — the instances ParM
  spends on parity models spent on more base-model instances (with ``dispatch="round-robin"``,
  ``⌊(k+1)G/k⌋`` groups of ``k``);
* ``replication``: ``G`` groups of ``k + 1`` workers, query 0 of each group on two of them;
  answered at its first copy;
* ``parm``: ParM (:class:`gcc_jax.ParityModelCode`, sum encoder, ``r = 1``): ``G`` groups of
  ``k`` base workers plus one parity-model worker (trained by ``train_parity_model``, cached);
  a query is answered at its own base output, or at the parity plus the other ``k − 1``;
* ``gcc`` / ``bacc``: :class:`gcc_jax.SplineCode` / :class:`gcc_jax.BerrutCode` with
  ``K = k``, ``N = k + 1`` per group (ParM's resources), decoded at ``N − S`` results or the
  deadline (``deadline_ms``), whichever first.

Latency is per query, submission → answer (queueing, batching, the round and decoding). An
error counts with its latency and as a wrong prediction; tails are ranked only among schemes
that answered at least 99% of their queries (the others are listed with their errors and
deadline misses). Beside each scheme the record holds the prediction of the serving-cluster
model (:func:`gcc_jax.distributed.simulate`) for the same setting (no Ray overhead, no
compute). Percentiles use linear interpolation (``numpy.percentile``); p99.9 needs ≳ 1000
queries and ParM's study used 100,000. Accuracy is against the labels, "agreement" against the
base model's own prediction.

A **deadline sweep** (no Ray; model time) shows what a latency SLO costs GCC and BACC: for each
deadline ``T``, many rounds of ``K`` test queries on ``N`` workers whose latencies come from
the same delay model; a round decodes from the workers in by ``min(T, t_{(N−S)})`` ("``N − S``
or ``T``") or by ``T`` ("deadline only"), through :class:`gcc_jax.MaskEvaluator`.
"""

import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..codes import BerrutCode, ReplicationCode, SplineCode, UncodedCode
from ..distributed import (
    Background,
    CodedInferenceService,
    DelayModel,
    RayExecutor,
    RoundRobinExecutor,
    ServiceTime,
    init_local_ray,
    poisson_arrivals,
    simulate,
)
from ..evaluation import MaskEvaluator
from ._command import StopOnInterrupt, from_arguments
from ._commands.serve import SCHEMES
from ._io import ExperimentResult, new_figure, save_report
from ._plots import CODE_COLORS

__all__ = [
    "ANSWERED_MIN",
    "PARM_GAP_CLAIM",
    "SCHEMES",
    "deadline_sweep",
    "format_serve_table",
    "plot_serve",
    "report",
    "run",
    "run_serve_bench",
    "save",
    "save_serve",
    "summarize_answers",
]


METRICS = {
    "latency_ms": "per query, submission to answer (queueing, batching, the round, decoding), ms",
    "p50/p99/p999": "median, 99th and 99.9th percentile of the latencies (linear interpolation)",
    "gap_ms": "p99.9 − median latency",
    "accuracy": "fraction of answers equal to the true label (an error counts as wrong)",
    "agreement": "fraction of answers equal to the base model's own prediction",
    "gap_ratio": "equal-resources gap / the scheme's gap (ParM claims up to 3.5)",
    "deadline_sweep": "GCC/BACC accuracy when a round decodes at min(T, t_(N−S)) or at T "
    "(model time, no Ray)",
}

PARM_GAP_CLAIM = 3.5
"""ParM's published claim: its p99.9 − median gap is up to 3.5× smaller than the
equal-resources baseline's (SOSP'19 abstract)."""

ANSWERED_MIN = 0.99
"""Tails are ranked only among schemes that answered at least this fraction of queries."""


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)


def summarize_answers(answers: Sequence[Any], labels: np.ndarray, base: np.ndarray) -> dict:
    """Latency statistics (ms), accuracy and where the answers came from, for one scheme.

    ``answers[i]`` answers query ``i`` (:meth:`CodedInferenceService.serve` keeps submission
    order); ``labels`` and ``base`` (the base model's predictions) are indexed the same way.
    Rejected queries and errors count as wrong predictions.
    """
    lat = np.array([a.latency_s for a in answers], dtype=float) * 1e3
    pred = np.array([a.prediction for a in answers], dtype=int)
    ok = np.array([a.ok for a in answers], dtype=bool)
    n = len(answers)
    correct = pred == np.asarray(labels)[:n]
    agree = pred == np.asarray(base)[:n]
    sources: dict[str, int] = {}
    for a in answers:
        kind = "error" if not a.ok else ("decoder" if a.source == "decoder" else "own output")
        sources[kind] = sources.get(kind, 0) + 1
    errors: dict[str, str] = {}
    for a in answers:
        if not a.ok:
            errors.setdefault(a.error.split(":")[0].split("(")[0].strip(), a.error)

    def pct(q):
        return float(np.percentile(lat, q)) if n else math.nan

    p50, p999 = pct(50), pct(99.9)
    missed = sum(1 for a in answers if not a.ok and a.timed_out)
    return dict(
        queries=n,
        answered=int(ok.sum()),
        answered_fraction=float(ok.mean()) if n else math.nan,
        errors=int(n - ok.sum()),
        deadline_misses=int(missed),
        error_examples=errors,
        released=sources,
        p50_ms=p50,
        mean_ms=float(lat.mean()) if n else math.nan,
        p99_ms=pct(99),
        p999_ms=p999,
        gap_ms=p999 - p50,
        max_ms=float(lat.max()) if n else math.nan,
        mean_queue_ms=float(np.mean([a.queue_s for a in answers]) * 1e3) if n else math.nan,
        p999_queue_ms=float(np.percentile([a.queue_s for a in answers], 99.9) * 1e3)
        if n
        else math.nan,
        p999_round_ms=float(np.percentile([a.round_s for a in answers], 99.9) * 1e3)
        if n
        else math.nan,
        accuracy=float(correct.mean()) if n else math.nan,
        agreement=float(agree.mean()) if n else math.nan,
        rounds=len({a.batch_id for a in answers if a.batch_id >= 0}),
        latencies_ms=[round(float(v), 4) for v in lat],
        predictions=[int(v) for v in pred],
    )


def _pred_per_mask(code, yt, fx, mask):
    """``(argmax of each decoded estimate, status)`` for one mask (for MaskEvaluator)."""
    dec = code.decode_with_status(yt, mask)
    return jnp.argmax(dec.value, axis=-1), dec.status


def deadline_sweep(
    codes: dict[str, Any],
    f,
    queries: np.ndarray,
    labels: np.ndarray,
    base: np.ndarray,
    delays: DelayModel,
    deadlines_ms: Sequence[float],
    stragglers: int,
) -> dict:
    """Accuracy of approximate codes when a round must end by a deadline (model time).

    Queries are cut into rounds of ``K``; round ``r``'s worker latencies are
    ``delays.sample(r)``. For deadline ``T`` the round decodes from the workers whose latency
    is ``≤ min(T, t_(N−S))`` (rule ``"n-s"``: ``N − S`` results or ``T``) or ``≤ T`` (rule
    ``"deadline"``). A round with too few live workers to decode (a spline needs 2) answers
    none of its queries: they count as wrong.

    Returns:
        ``{code name: {rule: {"deadline_ms", "accuracy", "agreement", "undecodable",
        "mean_live", "p999_round_ms"}}}`` with one list entry per deadline.
    """
    out: dict = {}
    deadlines = np.asarray(deadlines_ms, dtype=float) / 1e3
    for name, code in codes.items():
        k, n = int(code.num_inputs), int(code.num_workers)
        rounds = len(queries) // k
        stats = {
            rule: {key: [] for key in ("accuracy", "agreement", "undecodable", "mean_live")}
            for rule in ("n-s", "deadline")
        }
        per = {rule: np.zeros((len(deadlines), 4)) for rule in stats}
        round_ms = {rule: np.zeros((rounds, len(deadlines))) for rule in stats}
        for r in range(rounds):
            x = jnp.asarray(queries[r * k : (r + 1) * k])
            yt = code.worker_outputs(f, x)
            lat = delays.sample(r)
            t_rule = np.sort(lat)[n - stragglers - 1]
            masks, cut = [], []
            for rule in ("n-s", "deadline"):
                for t in deadlines:
                    c = min(t, t_rule) if rule == "n-s" else t
                    masks.append(lat <= c)
                    cut.append(c)
            pred, status = MaskEvaluator(code, yt, None, per_mask=_pred_per_mask)(np.stack(masks))
            idx = slice(r * k, (r + 1) * k)
            for j, rule in enumerate(("n-s", "deadline")):
                rows = slice(j * len(deadlines), (j + 1) * len(deadlines))
                good = status[rows] == 0
                p = np.where(good[:, None], pred[rows], -1)
                per[rule][:, 0] += (p == labels[idx][None]).sum(1)
                per[rule][:, 1] += (p == base[idx][None]).sum(1)
                per[rule][:, 2] += (~good) * k
                per[rule][:, 3] += np.stack(masks)[rows].sum(1)
                round_ms[rule][r] = np.asarray(cut[rows]) * 1e3
        total = rounds * k
        result = {}
        for rule in stats:
            result[rule] = dict(
                deadline_ms=[float(v) for v in deadlines * 1e3],
                accuracy=[float(v) for v in per[rule][:, 0] / total],
                agreement=[float(v) for v in per[rule][:, 1] / total],
                undecodable=[float(v) for v in per[rule][:, 2] / total],
                mean_live=[float(v) for v in per[rule][:, 3] / rounds],
                p999_round_ms=[float(v) for v in np.percentile(round_ms[rule], 99.9, axis=0)],
            )
        out[name] = dict(num_inputs=k, num_workers=n, stragglers=stragglers, rounds=rounds)
        out[name].update(result)
    return out


def parm_scheme(tm, ds, k: int, epochs: int, seed: int, progress: bool):
    """ParM's code, its ``K + 1`` worker functions (logits; parity model last) and its notes."""
    from ..nn.models import make_model
    from ..nn.training import TrainSettings, train_parity_model

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
        settings=TrainSettings(epochs=epochs, seed=seed, progress=progress),
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


def _plan(schemes, k: int, groups: int, lam_dec: float, dispatch: str) -> tuple[dict, list[str]]:
    """``{scheme: (code or None for ParM, number of groups, workers per group, stragglers)}``;
    with ``dispatch="queue"`` uncoded and equal resources are groups of one instance."""
    plan, notes = {}, []
    for name in schemes:
        if name in ("uncoded", "equal") and dispatch == "queue":
            size = (k if name == "uncoded" else k + 1) * groups
            plan[name] = (UncodedCode(num_inputs=1), size, 1, None)
        elif name == "uncoded":
            plan[name] = (UncodedCode(num_inputs=k), groups, k, None)
        elif name == "equal":
            workers = (k + 1) * groups
            if workers % k:
                notes.append(f"equal: (k+1)·G = {workers} workers do not split into groups of k")
            plan[name] = (UncodedCode(num_inputs=k), max(workers // k, 1), k, None)
        elif name == "replication":
            plan[name] = (ReplicationCode(num_inputs=k, num_workers=k + 1), groups, k + 1, None)
        elif name == "parm":
            plan[name] = (None, groups, k + 1, 1)
        elif name == "gcc":
            code = SplineCode.chebyshev(num_inputs=k, num_workers=k + 1, lam_dec=lam_dec)
            plan[name] = (code, groups, k + 1, 1)
        elif name == "bacc":
            plan[name] = (BerrutCode.chebyshev(num_inputs=k, num_workers=k + 1), groups, k + 1, 1)
        else:
            raise ValueError(f"unknown scheme {name!r}; choose from {SCHEMES}")
    return plan, notes


class _Stream(NamedTuple):
    """The classifier and the query stream every scheme serves."""

    tm: Any  # the trained base model (gcc_jax.nn.training's TrainedModel)
    ds: Any  # its data set
    f: Callable  # one query → the base model's output (the workers' function)
    idx: np.ndarray  # (q,) test-split indices of the queries
    queries: np.ndarray  # (q, ...) float32
    labels: np.ndarray  # (q,)
    base: np.ndarray  # (q,) the base model's own predictions
    arrivals: np.ndarray  # (q,) Poisson arrival times (s)


class _IdleFirst(RoundRobinExecutor):
    """One queue: each round goes to the group with the fewest rounds in flight, the one idle
    longest among equals (with ``max_in_flight`` = the number of groups, a round leaves the
    service's queue only when a group is idle)."""

    def __init__(self, executors):
        super().__init__(executors)
        self._busy = [0] * len(self.executors)
        self._since = [0.0] * len(self.executors)

    def _run(self, xt, spec):
        with self._lock:
            j = min(range(len(self.executors)), key=lambda i: (self._busy[i], self._since[i]))
            self._busy[j] += 1
        ex = self.executors[j]
        try:
            return ex._run(ex._check_inputs(xt), spec)
        finally:
            with self._lock:
                self._busy[j] -= 1
                self._since[j] = time.monotonic()


class _Serving(NamedTuple):
    """How a scheme is served: the delay model and the service's deadlines and limits."""

    shift_ms: float
    scale_ms: float
    tail: str
    straggle_prob: float
    slowdown: float
    episode_ms: float
    rate: float
    fail_prob: float
    seed: int
    dispatch: str
    cancel: str
    deadline_ms: float | None
    release: str
    max_wait_ms: float
    timeout_s: float
    max_in_flight: int
    max_queue: int
    progress: bool

    def delays(self, m: int, group: int = 0, k: int = 1) -> DelayModel:
        """The injected service times of group ``group``'s ``m`` workers, serving rounds of
        ``k`` queries (episodes of ``episode_ms`` last ``episode_ms · rate / k`` round ids)."""
        return DelayModel(
            num_workers=m,
            shift=self.shift_ms / 1e3,
            scale=self.scale_ms / 1e3,
            tail=self.tail,
            straggle_prob=self.straggle_prob,
            straggle_factor=self.slowdown,
            fail_prob=self.fail_prob,
            seed=self.seed * 1009 + group,
            episode_rounds=self.episode_ms / 1e3 * self.rate / k,
        )


def query_stream(model, dataset, epochs, data_path, num_queries, rate, seed, progress) -> _Stream:
    """Train (or load) the classifier and draw the queries, their labels and arrival times."""
    from ..nn.data import load_dataset
    from ..nn.training import train_classifier

    tm = train_classifier(model, dataset, epochs=epochs, data_path=data_path, progress=progress)
    ds = load_dataset(dataset, data_path)
    rng = np.random.default_rng([seed, 0x5E])
    idx = rng.integers(0, len(ds.y_test), size=num_queries)
    queries = np.asarray(ds.x_test[idx], np.float32)
    f = tm.worker_fn()
    return _Stream(
        tm=tm,
        ds=ds,
        f=f,
        idx=idx,
        queries=queries,
        labels=np.asarray(ds.y_test[idx]),
        base=np.asarray(jax.jit(jax.vmap(f))(queries)).argmax(-1),
        arrivals=poisson_arrivals(rate, num_queries, seed=seed),
    )


def _sweep(
    stream: _Stream, sv: _Serving, sk: int, sn: int, ss: int, num: int, deadlines, lam_dec: float
) -> dict:
    """:func:`deadline_sweep` of GCC and BACC (``K = sk``, ``N = sn``, ``S = ss``) on the first
    ``num`` queries, with its wall time."""
    _say(sv.progress, f"deadline sweep: {num} queries per code, model time")
    t0 = time.perf_counter()
    codes = {
        "gcc": SplineCode.chebyshev(num_inputs=sk, num_workers=sn, lam_dec=lam_dec),
        "bacc": BerrutCode.chebyshev(num_inputs=sk, num_workers=sn),
    }
    q = stream
    sweep = deadline_sweep(
        codes, q.f, q.queries[:num], q.labels[:num], q.base[:num], sv.delays(sn), deadlines, ss
    )
    sweep["wall_s"] = time.perf_counter() - t0
    return sweep


def _start_pools(
    pools: dict, plan: dict, parm_fns, stream: _Stream, k: int, g: int, sv: _Serving
) -> None:
    """Start the Ray actor pools into ``pools`` (so the caller closes whatever started): one
    shared by every scheme but ParM, one for ParM's workers."""
    progress = sv.progress
    serial = dict(max_concurrency=1)  # batch size 1: a worker serves one task at a time
    options = dict(
        input_shape=stream.ds.input_shape,
        input_dtype=np.float32,
        x64=False,
        actor_options=serial,
        cancel_late=sv.cancel == "all",
    )
    shared = [s for s in plan if s != "parm"]
    if shared:
        size = max(plan[s][1] * plan[s][2] for s in shared)
        _say(progress, f"starting {size} Ray actors for {', '.join(shared)}")
        pools["shared"] = RayExecutor(stream.f, num_workers=size, **options)
    if parm_fns is not None:
        _say(progress, f"starting {g * (k + 1)} Ray actors for parm")
        pools["parm"] = RayExecutor(parm_fns * g, num_workers=g * (k + 1), **options)


def _pool_record(label: str, pool: RayExecutor) -> dict:
    """A pool's actors and start-up times."""
    info = pool.startup
    return dict(
        pool=label,
        actors=len(info),
        startup_wall_s=pool.startup_wall_s,
        actor_compile_s=[round(v["compile_s"], 3) for v in info],
    )


def _serve_scheme(
    name: str, entry: tuple, k: int, pool: RayExecutor, stream: _Stream, sv: _Serving, share: float
) -> dict:
    """Serve the whole stream with one scheme (after an uncounted warm-up burst); its stats
    (:func:`summarize_answers`) with its workers, rejections and batching."""
    code, num_groups, m, s = entry
    per_round = int(code.num_inputs)
    views = [
        pool.view(workers=range(j * m, (j + 1) * m), delays=sv.delays(m, j, per_round))
        for j in range(num_groups)
    ]
    deadline = sv.deadline_ms / 1e3 if (sv.deadline_ms and name in ("gcc", "bacc")) else None
    queue = sv.dispatch == "queue"
    service = CodedInferenceService(
        (_IdleFirst if queue else RoundRobinExecutor)(views),
        code,
        stragglers=s,
        deadline_s=deadline,
        release=sv.release,
        max_wait_s=sv.max_wait_ms / 1e3,
        timeout_s=sv.timeout_s,
        max_in_flight=num_groups if queue else sv.max_in_flight,
        max_queue=sv.max_queue,
        on_liars="ignore",  # the benchmark's workers are its own model: slow, never lying
    )
    warm = service.warmup()
    with service:  # a short uncounted burst: first tasks on fresh actors are slow
        service.serve(stream.queries[: 4 * num_groups * per_round])
        before = service.stats()
        t0 = time.perf_counter()
        answers = service.serve(
            stream.queries,
            stream.arrivals,
            max_seconds=share,
            progress=sv.progress,
            desc=f"serve {name}",
        )
        counts = service.stats()
    st = summarize_answers(answers, stream.labels, stream.base)
    st.update(
        workers=num_groups * m,
        groups=num_groups,
        wait_rule=service.rule,
        wall_s=time.perf_counter() - t0,
        warmup_s=warm,
        rejected=counts["rejected"] - before["rejected"],
        mean_batch=(counts["batched"] - before["batched"])
        / max(counts["rounds"] - before["rounds"], 1),
        not_submitted=len(stream.queries) - len(answers),
    )
    _say(
        sv.progress,
        f"{name}: median {st['p50_ms']:.1f} ms, p99.9 {st['p999_ms']:.1f} ms, "
        f"accuracy {st['accuracy']:.4f}, errors {st['errors']}, {st['wall_s']:.0f} s",
    )
    return st


def _payload(
    stream: _Stream, ray_info: dict, pools_info: list, restarts: dict, results: dict, sweep, notes
) -> dict:
    """The ``results`` block of the JSON record."""
    ratios = {}
    if "equal" in results:
        ref = results["equal"]["gap_ms"]
        ratios = {name: ref / st["gap_ms"] for name, st in results.items() if st["gap_ms"] > 0}
    tm = stream.tm
    return dict(
        machine=dict(
            python=platform.python_version(),
            ray=_ray_version(),
            cpus=os.cpu_count(),
            load_avg=list(os.getloadavg()),
            machine=platform.machine(),
        ),
        ray=dict(
            node_ip=ray_info["node_ip"],
            cluster_cpus=ray_info["num_cpus"],
            pools=pools_info,
            restarts=restarts,
        ),
        model=dict(name=tm.model_name, test_accuracy=tm.test_accuracy, from_cache=tm.from_cache),
        base_accuracy=float(np.mean(stream.base == stream.labels)),
        query_indices=[int(v) for v in stream.idx],
        base_predictions=[int(v) for v in stream.base],
        schemes=results,
        gap_ratios=ratios,
        deadline_sweep=sweep,
        notes=notes,
    )


def run_serve_bench(
    *,
    model: str = "mlp",
    dataset: str = "digits",
    epochs: int = 10,
    parm_epochs: int = 20,
    num_queries: int = 10_000,
    rate: float = 120.0,
    num_inputs: int = 2,
    groups: int = 2,
    shift_ms: float = 4.0,
    scale_ms: float = 2.0,
    tail: str = "exponential",
    straggle_prob: float = 0.05,
    slowdown: float = 10.0,
    episode_ms: float = 500.0,
    dispatch: str = "queue",
    cancel: str = "none",
    fail_prob: float = 0.0,
    lam_dec: float = 1e-6,
    release: str = "query",
    deadline_ms: float | None = 25.0,
    max_wait_ms: float = 5.0,
    timeout_s: float = 2.0,
    max_in_flight: int = 8,
    max_queue: int = 4096,
    max_seconds: float = 3600.0,
    schemes: Sequence[str] = SCHEMES,
    sweep_inputs: int = 4,
    sweep_workers: int = 12,
    sweep_stragglers: int = 2,
    sweep_queries: int = 2000,
    sweep_deadlines_ms: Sequence[float] = (4, 5, 6, 8, 10, 15, 25, 50),
    num_cpus: int = 2,
    seed: int = 0,
    data_path: str | None = None,
    progress: bool = True,
) -> ExperimentResult:
    """Serve one Poisson stream with each scheme on a local Ray cluster; return the stats.

    Args:
        model, dataset, epochs: the classifier (trained once, cached) and its data; queries
            are drawn from the test split with replacement.
        parm_epochs: training epochs of ParM's parity model.
        num_queries: queries per scheme (ParM's study: 100,000).
        rate: Poisson arrival rate (queries per second).
        num_inputs: ``k``, queries per coding group (ParM: 2).
        groups: ``G``, coding groups of workers (ParM's cluster: ``k + 1`` workers each).
        shift_ms, scale_ms, tail: a task's service time ``shift + scale · L`` (ms).
        straggle_prob, slowdown, episode_ms: background load: a worker is ``slowdown`` times
            slower in episodes of mean ``episode_ms`` covering a fraction ``straggle_prob`` of
            the time (``episode_ms=0``: each task independently with probability
            ``straggle_prob``).
        dispatch: ``"queue"`` (one queue; a round goes to an idle group; uncoded and equal
            resources as single instances) or ``"round-robin"`` (groups in turn).
        cancel: ``"none"`` (late tasks run to the end in every scheme) or ``"all"`` (late
            tasks are cancelled in every scheme).
        fail_prob: probability that a task never answers.
        lam_dec: GCC's decoder smoothing.
        release: ``"query"`` (each query as soon as it is ready) or ``"batch"``.
        deadline_ms: GCC/BACC decode at ``N − S`` results or this deadline (``None``: no
            deadline but ``timeout_s``).
        max_wait_ms: the longest a group waits for its ``k`` queries.
        timeout_s: a round's hard deadline.
        max_in_flight: rounds in flight per scheme.
        max_queue: queries that may wait; past it a query is rejected (``Overloaded``).
        max_seconds: time budget for the streams, split evenly between schemes.
        schemes: which of :data:`SCHEMES` to run.
        sweep_inputs, sweep_workers, sweep_stragglers, sweep_queries, sweep_deadlines_ms:
            the deadline sweep's code size, queries and deadlines (``sweep_queries=0``: none).
        num_cpus: CPUs of the local Ray cluster (loopback only).
        seed: seeds the queries, the arrivals and the injected delays.
        data_path: data directory for data sets other than digits.
        progress: progress bars and messages (stderr).

    Returns:
        An :class:`~gcc_jax.experiments.ExperimentResult` (the one JSON schema) whose
        ``results`` hold ``machine`` (CPUs, load average), ``ray``, ``model``,
        ``base_accuracy``, ``query_indices``, ``base_predictions``, ``schemes`` (per scheme:
        see :func:`summarize_answers`), ``gap_ratios``, ``deadline_sweep`` and ``notes``.
    """
    config = dict(locals())  # the arguments, in signature order
    t_start = time.perf_counter()
    load_start = list(os.getloadavg())
    k, g = int(num_inputs), int(groups)
    if k < 2 or g < 1:
        raise ValueError(f"need k >= 2 and groups >= 1; got k={k}, groups={g}")
    if num_queries < 1 or rate <= 0 or max_seconds <= 0:
        raise ValueError("`num_queries`, `rate` and `max_seconds` must be positive")
    plan, notes = _plan(schemes, k, g, lam_dec, dispatch)
    config["schemes"] = list(schemes)
    config["sweep_deadlines_ms"] = list(sweep_deadlines_ms)
    stream = query_stream(model, dataset, epochs, data_path, num_queries, rate, seed, progress)
    sv = from_arguments(_Serving, locals())
    sweep = {}
    stop = StopOnInterrupt()  # Ctrl-C: keep the sweep and the schemes served in full
    if sweep_queries > 0:
        with stop:
            sweep = _sweep(
                stream, sv, int(sweep_inputs), int(sweep_workers), int(sweep_stragglers),
                min(int(sweep_queries), num_queries), sweep_deadlines_ms, lam_dec,
            )  # fmt: skip
    if stop.interrupted:
        plan = {}

    parm_fns = None
    if "parm" in plan:
        code, parm_fns, note = parm_scheme(stream.tm, stream.ds, k, parm_epochs, seed, progress)
        plan["parm"] = (code, *plan["parm"][1:])
        notes.append(note)

    ray_info = init_local_ray(num_cpus) if plan else dict(node_ip=None, num_cpus=None)
    results: dict[str, dict] = {}
    pools: dict[str, RayExecutor] = {}
    share = max_seconds / max(len(plan), 1)
    try:
        _start_pools(pools, plan, parm_fns, stream, k, g, sv)
        pools_info = [_pool_record(label, pool) for label, pool in pools.items()]
        with stop:
            for name, entry in plan.items():
                pool = pools["parm" if name == "parm" else "shared"]
                results[name] = _serve_scheme(name, entry, k, pool, stream, sv, share)
        restarts = {label: pool.restarts for label, pool in pools.items()}
    finally:
        for pool in pools.values():
            pool.close()
    config["interrupted"] = stop.interrupted
    payload = _payload(stream, ray_info, pools_info, restarts, results, sweep, notes)
    payload["machine"]["load_avg_start"] = load_start
    payload["model_prediction"] = _model_prediction(list(results), k, g, sv, num_queries)
    result = ExperimentResult.of_run("serve_bench", config, seed, METRICS, payload, t_start=t_start)
    return stop.finish(result)


run = run_serve_bench


def _model_prediction(schemes, k: int, g: int, sv: _Serving, num_queries: int) -> dict:
    """The serving-cluster model's latencies (ms) for the same setting: ``k·G`` base instances
    (``(k+1)·G`` for equal resources), the same work, background and deadline; no Ray, no
    compute, ParM's instances independent (one queue per pool). Only with episodes."""
    if sv.episode_ms <= 0 or sv.fail_prob > 0:
        return {}
    out = {}
    for name in schemes:
        deadline = sv.deadline_ms / 1e3 if (sv.deadline_ms and name in ("gcc", "bacc")) else None
        res = simulate(
            name,
            instances=k * g,
            k=k,
            rate=sv.rate,
            num_queries=max(num_queries, 100_000),
            service=ServiceTime(sv.shift_ms / 1e3, sv.scale_ms / 1e3, sv.tail),
            background=Background(sv.straggle_prob, sv.slowdown, sv.episode_ms / 1e3),
            deadline_s=deadline,
            max_wait_s=sv.max_wait_ms / 1e3,
            seed=sv.seed,
        )
        lat = res.latency_s * 1e3
        p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
        out[name] = dict(p50_ms=p50, p99_ms=p99, p999_ms=p999, gap_ms=p999 - p50,
                         mean_ms=lat.mean(), answered=res.answered.mean())  # fmt: skip
    return out


def _ray_version() -> str:
    import ray

    return ray.__version__


def _view(result: ExperimentResult) -> dict:
    """Configuration and results in one dict (what the report functions read)."""
    return {"config": result.config, **result.results}


def format_serve_table(result: ExperimentResult) -> str:
    """The tail table, the gap ratios against ParM's claim, the sweep, and a plain summary."""
    result = _view(result)
    cfg = result["config"]
    head = (
        f"serve-bench: {result['model']['name']} on {cfg['dataset']}, k={cfg['num_inputs']}, "
        f"{cfg['groups']} groups, Poisson {cfg['rate']:g} q/s, service "
        f"{cfg['shift_ms']:g}+{cfg['scale_ms']:g}·{cfg['tail']} ms, background slowdown "
        f"x{cfg['slowdown']:g} with p={cfg['straggle_prob']:g}"
        + (f" in episodes of {cfg['episode_ms']:g} ms" if cfg.get("episode_ms") else " per task")
        + f", release per {cfg['release']}, dispatch {cfg.get('dispatch', 'round-robin')}, "
        f"late tasks cancelled: {cfg.get('cancel', 'coded schemes only')}"
    )
    machine = result["machine"]
    head += (
        f"\nhost: {machine['cpus']} CPUs, load average (1, 5, 15 min) "
        f"{', '.join(f'{v:.2f}' for v in machine.get('load_avg_start', []))} at the start, "
        f"{', '.join(f'{v:.2f}' for v in machine['load_avg'])} at the end"
    )
    cols = (
        f"{'scheme':<12}{'workers':>8} {'wait rule':<36}{'queries':>8}{'errors':>7}{'missed':>7}"
        f"{'median':>8}{'mean':>8}{'p99':>8}{'p99.9':>8}{'gap':>8}{'accuracy':>9}{'agree':>7}"
    )
    lines = [head, f"base model accuracy on these queries: {result['base_accuracy']:.4f}"]
    if cfg.get("interrupted"):
        lines.append("INTERRUPTED (Ctrl-C): only the schemes served in full are below.")
    lines += ["latency in ms (gap = p99.9 − median)", cols, "-" * len(cols)]
    for name, st in result["schemes"].items():
        lines.append(
            f"{name:<12}{st['workers']:>8} {st['wait_rule']:<36}{st['queries']:>8}"
            f"{st['errors']:>7}{st.get('deadline_misses', 0):>7}{st['p50_ms']:>8.1f}"
            f"{st['mean_ms']:>8.1f}{st['p99_ms']:>8.1f}"
            f"{st['p999_ms']:>8.1f}{st['gap_ms']:>8.1f}{st['accuracy']:>9.4f}"
            f"{st['agreement']:>7.3f}"
        )
    model = result.get("model_prediction") or {}
    if model:
        lines.append("the serving-cluster model for the same setting (no Ray, no compute), ms:")
        lines += [
            f"  {name:<12}median {m['p50_ms']:>7.1f}  p99.9 {m['p999_ms']:>7.1f}  "
            f"gap {m['gap_ms']:>7.1f}  answered {m['answered']:.2%}  (Ray: median "
            f"{sch[name]['p50_ms']:.1f}, p99.9 {sch[name]['p999_ms']:.1f})"
            for name, m in model.items()
            if (sch := result["schemes"])
        ]
    ratios = result.get("gap_ratios") or {}
    if ratios:
        lines.append(
            "gap ratio (equal-resources gap / scheme's gap; ParM claims up to "
            f"{PARM_GAP_CLAIM:g}x): "
            + ", ".join(f"{name} {v:.2f}x" for name, v in ratios.items() if name != "equal")
        )
    sweep = result.get("deadline_sweep") or {}
    for name in ("gcc", "bacc"):
        if name not in sweep:
            continue
        sw = sweep[name]
        lines.append(
            f"deadline sweep {name} (K={sw['num_inputs']}, N={sw['num_workers']}, "
            f"S={sw['stragglers']}, {sw['rounds']} rounds, model time):"
        )
        for rule in ("n-s", "deadline"):
            r = sw[rule]
            cells = ", ".join(
                f"{t:g} ms: {a:.3f}" + (f" ({u:.0%} undecodable)" if u > 0 else "")
                for t, a, u in zip(r["deadline_ms"], r["accuracy"], r["undecodable"], strict=True)
            )
            label = "N−S or T" if rule == "n-s" else "T only"
            lines.append(f"  {label:<9} accuracy at T = {cells}")
    lines.append(_plain_summary(result))
    lines.extend(f"note: {note}" for note in result["notes"])
    return "\n".join(lines)


report = format_serve_table


def _plain_summary(result: dict) -> str:
    sch = result["schemes"]
    if not sch:
        return "no scheme ran"
    ranked = [s for s in sch if sch[s]["answered"] >= ANSWERED_MIN * max(sch[s]["queries"], 1)]
    best_acc = max(sch, key=lambda s: sch[s]["accuracy"])
    if ranked:
        order = sorted(ranked, key=lambda s: sch[s]["p999_ms"])
        text = (
            f"In plain words: among the schemes that answered at least {ANSWERED_MIN:.0%} of "
            f"their queries, the shortest tail (p99.9) was {order[0]}'s "
            f"({sch[order[0]]['p999_ms']:.0f} ms; order: {' < '.join(order)})"
        )
    else:
        text = f"In plain words: no scheme answered {ANSWERED_MIN:.0%} of its queries"
    text += f"; the best accuracy {best_acc}'s ({sch[best_acc]['accuracy']:.3f})."
    left = [s for s in sch if s not in ranked]
    if left:
        text += (
            " Not ranked (too many errors): "
            + ", ".join(
                f"{s} ({sch[s]['errors']} errors of {sch[s]['queries']}, "
                f"{sch[s].get('deadline_misses', 0)} deadline misses)"
                for s in left
            )
            + "."
        )
    ratios = result.get("gap_ratios") or {}
    if "parm" in ratios and "parm" in ranked and "equal" in ranked:
        v = ratios["parm"]
        if v >= 1:
            text += f" ParM's p99.9 − median gap was {v:.2f}x smaller than equal resources'"
        else:
            text += f" ParM's p99.9 − median gap was {1 / v:.2f}x LARGER than equal resources'"
        text += f" (ParM's paper: up to {PARM_GAP_CLAIM:g}x smaller)."
    n = len(next(iter(sch.values()))["latencies_ms"])
    if n < 10_000:
        text += f" Only {n} queries per scheme: the p99.9 rests on few queries."
    return text


SCHEME_COLORS = {
    "uncoded": CODE_COLORS["uncoded"],
    "equal": "C4",
    "replication": CODE_COLORS["replication"],
    "parm": CODE_COLORS["ParM"],
    "gcc": CODE_COLORS["GCC"],
    "bacc": CODE_COLORS["BACC"],
}
"""One colour per scheme in every panel (the codes' colours of the other experiments)."""

_MARKERS = {"uncoded": "o", "equal": "s", "replication": "D", "parm": "^", "gcc": "v", "bacc": "P"}


def plot_serve(result: ExperimentResult):
    """Latency CDFs (log tail), and accuracy against p99.9 latency (with GCC/BACC's sweep).

    Each scheme has one colour in every panel; on the accuracy panel its marker and a legend
    entry with its p99.9 and accuracy (no labels on the points, which overlap where the
    schemes' tails are alike).
    """
    result = _view(result)
    fig, (ax, ax2, ax3) = new_figure(1, 3, figsize=(16, 4.8))
    for name, st in result["schemes"].items():
        lat = np.asarray(st["latencies_ms"], dtype=float)
        if lat.size == 0:
            continue
        total = lat.size  # errors are not answers: the curve tops out at the answered fraction
        lat = np.sort(lat[np.asarray(st["predictions"]) >= 0])
        if lat.size == 0:
            continue
        color = SCHEME_COLORS.get(name)
        cdf = np.arange(1, lat.size + 1) / total
        ax.plot(lat, cdf, color=color, label=f"{name} (p99.9 {st['p999_ms']:.0f} ms)")
        ax2.loglog(lat, np.maximum(1.0 - cdf + 1.0 / total, 1.0 / total), color=color)
        ax3.plot(
            st["p999_ms"],
            st["accuracy"],
            linestyle="none",
            marker=_MARKERS.get(name, "o"),
            markersize=7,
            color=color,
            label=f"{name}: p99.9 {st['p999_ms']:.0f} ms, accuracy {st['accuracy']:.3f}",
        )
    ax.set_xscale("log")
    ax.set(xlabel="latency (ms)", ylabel="fraction of queries answered", title="latency CDF")
    handles, labels = ax.get_legend_handles_labels()
    if handles:  # one legend for the two latency panels, below them (outside the data)
        ax.legend(handles, labels, fontsize=8, ncol=2, loc="upper left", bbox_to_anchor=(0, -0.2))
    ax2.set(xlabel="latency t (ms)", ylabel="P(latency ≥ t)", title="tail (colours as left)")
    sweep = result.get("deadline_sweep") or {}
    for name in ("gcc", "bacc"):
        if name in sweep:
            r = sweep[name]["n-s"]
            ax3.plot(
                r["p999_round_ms"],
                r["accuracy"],
                "--",
                marker=".",
                color=SCHEME_COLORS[name],
                alpha=0.6,
                label=f"{name} deadline sweep: round p99.9 (model time, "
                f"K={sweep[name]['num_inputs']}, N={sweep[name]['num_workers']})",
            )
    ax3.set_xscale("log")
    ax3.set(xlabel="p99.9 latency (ms)", ylabel="accuracy", title="accuracy vs p99.9")
    if ax3.get_legend_handles_labels()[0]:
        ax3.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(0, -0.2))
    for a in (ax, ax2, ax3):
        a.grid(True, which="both", alpha=0.3)
    cfg = result["config"]
    fig.suptitle(
        f"{result['model']['name']}/{cfg['dataset']}: k={cfg['num_inputs']}, "
        f"{cfg['groups']} groups, {cfg['rate']:g} q/s on Ray"
    )
    fig.tight_layout()
    return fig


save = save_serve = save_report(format_serve_table, plot_serve)
"""Write ``serve_bench.json``, ``serve_bench.txt`` and ``serve_bench.png`` into ``out``."""
