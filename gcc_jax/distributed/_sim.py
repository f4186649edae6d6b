"""A discrete-event model of a prediction-serving cluster (ParM's setting, in model time).

Queries arrive as a Poisson stream at a frontend that holds one FCFS queue per pool of model
instances; an instance serves one query at a time (batch size 1), taking the next queued query
as soon as it is free, and nothing that runs is ever cancelled: a copy or a coded task whose
result is not needed occupies its instance to the end (as in Kosaian, Rashmi, Venkataraman,
"Parity Models", SOSP'19, where a slowed instance stays busy and builds a queue).

A query's *work* ``w = shift + scale · L`` (``L ~ Exp(1)`` or Lomax) is drawn when it arrives.
Each instance alternates between quiet periods and **background-load episodes** (an on/off
process: exponential episode lengths of mean ``episode_s``, a fraction ``fraction`` of the time
on); during an episode it works ``slowdown`` times slower, so a long episode slows many
consecutive queries on that instance, and a query that straddles an episode's start or end
runs at each rate for the part it spends there.

Schemes (``m`` base instances, ``k`` queries per coding group, ``m/k`` extra instances):

* ``uncoded``: ``m`` instances, one queue; a query is answered when its instance finishes it;
* ``equal``: ParM's equal-resources baseline: the same on ``m + m/k`` instances, one queue;
* ``replication``: ``m`` base instances and ``m/k`` replica instances (each pool one queue); the
  first query of every group of ``k`` is also queued at the replicas; answered at the first copy;
* ``parm``: ``m`` base instances and ``m/k`` parity-model instances; when the ``k``-th query of a
  group arrives its parity query joins the parity queue; a query is answered at its own output,
  or decoded from the parity output and the other ``k − 1`` outputs, whichever comes first;
* ``gcc`` / ``bacc`` (any approximate code of ``k`` inputs on ``N = k + 1`` workers): a group
  closes at its ``k``-th query or ``max_wait_s`` after its first; its ``N`` coded tasks join one
  queue of ``m + m/k`` instances; the group decodes at its ``(N − S)``-th result or
  ``deadline_s`` after it closed, whichever first, from the results in by then; with fewer than
  ``min_live`` results it answers none of its queries (a deadline miss).

Which outputs a query was answered from is recorded (:class:`SimResult`), so accuracy comes
from the real codes' decoders evaluated on those patterns
(:mod:`gcc_jax.experiments.serve_sim`).

Two engines give the same latencies. ``"heap"`` (default): a pool's FCFS queue is the
recursion *start = max(enqueue time, the earliest time an instance is free)* over a heap of
instance free times, with the work drawn up front by NumPy. It exists because SimPy's generator
processes cost several events per query, more than 10 µs each, far slower than the heap for
the millions of queries a load map needs. ``"simpy"``: the same cluster as SimPy processes
(instances pulling from ``simpy.Store`` queues, queries waiting on completion events), an
independent implementation the tests hold the heap engine to; it needs the ``serving`` extra.
Both share the episode schedules (:class:`_Episodes`), drawn per instance from the seed.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Sequence

import numpy as np

from .._core.scalars import as_choice, as_int, as_real
from .._core.types import Float

__all__ = [
    "SIM_SCHEMES",
    "Background",
    "ServiceTime",
    "SimResult",
    "cluster_sizes",
    "simulate",
]

SIM_SCHEMES = ("uncoded", "equal", "replication", "parm", "gcc", "bacc")
"""The schemes :func:`simulate` models (``gcc`` and ``bacc`` are both "approximate code on
``k + 1`` workers with deadline decoding"; they differ only in the decoder the accuracy uses)."""

OWN, DECODED, MISSED = 0, 1, 2
""":attr:`SimResult.source` codes: the query's own output (or a copy), a decoded estimate, none."""

_ENGINES = ("heap", "simpy")


@dataclasses.dataclass(frozen=True)
class ServiceTime:
    """A query's work on a quiet instance: ``shift + scale · L`` seconds.

    ``L ~ Exp(1)`` (``tail="exponential"``) or Lomax, ``P(L > u) = (1 + u)^(−a)``
    (``tail="pareto"``, ``a = pareto_shape > 1`` so that the mean is finite).

    Example:
        >>> from gcc_jax.distributed import ServiceTime
        >>> ServiceTime(shift=0.004, scale=0.002).mean_s
        0.006
    """

    shift: float = 0.004
    scale: float = 0.002
    tail: str = "exponential"
    pareto_shape: float = 3.0

    def __post_init__(self):
        object.__setattr__(self, "shift", as_real(self.shift, "shift", 0.0))
        object.__setattr__(self, "scale", as_real(self.scale, "scale", 0.0))
        as_choice(self.tail, "tail", ("exponential", "pareto"))
        shape = as_real(self.pareto_shape, "pareto_shape", 1.0, lo_open=True)
        object.__setattr__(self, "pareto_shape", shape)
        if self.shift + self.scale <= 0:
            raise ValueError("`shift` + `scale` must be positive: a query takes some time")

    @property
    def mean_s(self) -> float:
        """The mean work ``shift + scale · E[L]``."""
        mean_l = 1.0 if self.tail == "exponential" else 1.0 / (self.pareto_shape - 1.0)
        return self.shift + self.scale * mean_l

    def draw(self, rng: np.random.Generator, size: int) -> Float[np.ndarray, " q"]:
        """``size`` independent works (seconds)."""
        if self.tail == "exponential":
            tail = rng.standard_exponential(size)
        else:
            tail = rng.pareto(self.pareto_shape, size)  # NumPy's pareto is Lomax (Pareto II)
        return self.shift + self.scale * tail


@dataclasses.dataclass(frozen=True)
class Background:
    """Background-load episodes on every instance: an on/off process per instance.

    Episode lengths are ``Exp`` with mean ``episode_s``; quiet periods ``Exp`` with mean
    ``episode_s · (1 − fraction) / fraction``, so an instance is under background load a fraction
    ``fraction`` of the time; during an episode it works ``slowdown`` times slower. Each instance
    starts in its stationary state (on with probability ``fraction``). ``fraction = 0``: no load.

    Example:
        >>> from gcc_jax.distributed import Background
        >>> round(Background(fraction=0.1, slowdown=5.0).mean_factor, 6)
        1.4
    """

    fraction: float = 0.0
    slowdown: float = 5.0
    episode_s: float = 0.5

    def __post_init__(self):
        object.__setattr__(
            self, "fraction", as_real(self.fraction, "fraction", 0.0, 1.0, hi_open=True)
        )
        object.__setattr__(self, "slowdown", as_real(self.slowdown, "slowdown", 1.0))
        object.__setattr__(
            self, "episode_s", as_real(self.episode_s, "episode_s", 0.0, lo_open=True)
        )

    @property
    def mean_factor(self) -> float:
        """The long-run mean slowdown ``1 − fraction + fraction · slowdown`` (what a query's
        mean service time is multiplied by when episodes are much longer than queries)."""
        return 1.0 - self.fraction + self.fraction * self.slowdown


class _Episodes:
    """One instance's episode schedule, drawn lazily from its own seed; ``finish(t, work)``
    is when ``work`` seconds of quiet-instance work started at ``t`` ends (``t`` never
    decreases between calls: an instance serves its queries in order)."""

    __slots__ = ("_bg", "_rng", "_starts", "_ends", "_horizon", "finish")

    def __init__(self, background: Background, seed: int, instance: int):
        self._bg = background
        self._rng = np.random.default_rng([seed, 0xB6, instance])
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._horizon = 0.0  # episodes are drawn up to here
        if background.fraction > 0 and self._rng.random() < background.fraction:
            self._starts.append(0.0)  # on at time 0: the stationary state
            self._horizon = float(self._rng.exponential(background.episode_s))
            self._ends.append(self._horizon)
        self.finish = self._finisher()

    def _draw(self, until: float) -> None:
        bg, rng = self._bg, self._rng
        if bg.fraction <= 0:
            self._horizon = math.inf
            return
        quiet = bg.episode_s * (1.0 - bg.fraction) / bg.fraction
        while self._horizon <= until:
            start = self._horizon + float(rng.exponential(quiet))
            end = start + float(rng.exponential(bg.episode_s))
            self._starts.append(start)
            self._ends.append(end)
            self._horizon = end

    def _finisher(self):
        """``finish`` as a closure over the schedule (one call per query: a plain function,
        outside the runtime type checks that wrap methods)."""
        slow = self._bg.slowdown
        starts, ends = self._starts, self._ends
        pos = 0  # the first episode that may end after the last start asked about

        def finish(t, work):
            nonlocal pos
            if self._horizon <= t + work * slow:
                self._draw(t + work * slow)
            while pos < len(starts) and ends[pos] <= t:
                pos += 1
            p = pos
            while p < len(starts):
                start, end = starts[p], ends[p]
                if t < start:
                    if t + work <= start:
                        return t + work
                    work -= start - t
                    t = start
                room = (end - t) / slow  # work done before the episode ends
                if work <= room:
                    return t + work * slow
                work -= room
                t = end
                p += 1
            return t + work

        return finish


@dataclasses.dataclass(frozen=True)
class SimResult:
    """Per query (arrival order): when it arrived, how long it waited for its answer, and where
    the answer came from.

    Attributes:
        scheme: the scheme simulated.
        arrival_s: ``(q,)`` arrival times.
        latency_s: ``(q,)`` arrival → answer (→ the decoder's give-up for a miss), seconds.
        source: ``(q,)`` :data:`OWN` (its own output or a copy), :data:`DECODED`, or
            :data:`MISSED` (no answer: a coded group decoded from too few results).
        mask: ``(q,)`` for a decoded or missed query, the bit mask of its group's workers whose
            results were in when it was released (bit ``n`` = worker ``n``; ParM: bit ``k`` is
            the parity model); ``0`` otherwise.
        slot: ``(q,)`` the query's position in its coding group (``-1`` without groups).
        instances: model instances the scheme used.
        busy_fraction: the instances' mean busy fraction over the run (utilisation).
    """

    scheme: str
    arrival_s: np.ndarray
    latency_s: np.ndarray
    source: np.ndarray
    mask: np.ndarray
    slot: np.ndarray
    instances: int
    busy_fraction: float

    @property
    def answered(self) -> np.ndarray:
        """``(q,)`` whether the query got an answer."""
        return self.source != MISSED


def cluster_sizes(scheme: str, instances: int, k: int) -> tuple[int, int]:
    """``(base-pool instances, extra-pool instances)`` of a scheme on ``m = instances``.

    Example:
        >>> from gcc_jax.distributed import cluster_sizes
        >>> [cluster_sizes(s, 12, 3) for s in ("uncoded", "equal", "parm")]
        [(12, 0), (16, 0), (12, 4)]
    """
    scheme = as_choice(scheme, "scheme", SIM_SCHEMES)
    m, k = as_int(instances, "instances", 1), as_int(k, "k", 1)
    if m % k:
        raise ValueError(f"`instances` ({m}) must be a multiple of `k` ({k}): m/k extra instances")
    extra = m // k
    if scheme == "uncoded":
        return m, 0
    if scheme in ("equal", "gcc", "bacc"):
        return m + extra, 0
    return m, extra


class _Pool:
    """FCFS over some instances by the heap recursion: a job enqueued at ``t`` starts when the
    earliest-free instance is free (instances ``first, first + 1, ...`` of the episode list).
    Instances free at the same instant are taken in the order they were given their last job
    (the order an event queue finishes them in)."""

    def __init__(self, episodes: Sequence[_Episodes], first: int, size: int):
        self._eps = episodes
        self._free = [(0.0, j, first + j) for j in range(size)]
        self._order = size
        self.busy = 0.0

    def run_all(self, times: np.ndarray, works: np.ndarray) -> np.ndarray:
        """The ends of jobs enqueued at ``times`` (non-decreasing) with ``works``."""
        free, eps = self._free, self._eps
        ends = []
        for t, work in zip(times.tolist(), works.tolist(), strict=True):
            ready, _, j = heapq.heappop(free)
            start = t if t > ready else ready
            end = eps[j].finish(start, work)
            self.busy += end - start
            heapq.heappush(free, (end, self._order, j))
            self._order += 1
            ends.append(end)
        return np.array(ends)


def _groups(
    arrivals: np.ndarray, k: int, max_wait_s: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Coding groups in arrival order: ``(group of each query, close time of each group)``.

    A group closes at its ``k``-th query, or ``max_wait_s`` after its first (``None``: only at
    its ``k``-th; the last group closes at its last query).
    """
    q = len(arrivals)
    if max_wait_s is None:
        group = np.arange(q) // k
        close = arrivals[np.minimum(np.arange(0, q, k) + k - 1, q - 1)]
        return group, close
    group = np.empty(q, dtype=np.int64)
    closes: list[float] = []
    a = arrivals.tolist()
    i = 0
    while i < q:
        limit = a[i] + max_wait_s
        j = i + 1
        while j < q and j - i < k and a[j] <= limit:
            j += 1
        group[i:j] = len(closes)
        closes.append(a[j - 1] if j - i == k else limit)
        i = j
    return group, np.array(closes)


@dataclasses.dataclass(frozen=True)
class _Setup:
    """Everything a scheme's run draws from the seed (shared by the two engines)."""

    scheme: str
    k: int
    arrivals: np.ndarray
    work: np.ndarray  # (q,) base work of each query
    extra_work: np.ndarray  # (groups,) work of each group's parity / replica / last coded task
    base: int
    extra: int
    episodes: list
    group: np.ndarray  # (q,) coding group of each query
    close: np.ndarray  # (groups,) when each group closes
    max_wait_s: float | None  # GCC/BACC: a group closes this long after its first query
    deadline_s: float
    need: int
    min_live: int


def _setup(scheme, instances, k, rate, num_queries, service, background, deadline_s, stragglers,
           min_live, max_wait_s, seed) -> _Setup:  # fmt: skip
    scheme = as_choice(scheme, "scheme", SIM_SCHEMES)
    k = as_int(k, "k", 1)
    base, extra = cluster_sizes(scheme, instances, k)
    q = as_int(num_queries, "num_queries", 1)
    rate = as_real(rate, "rate", 0.0, lo_open=True)
    seed = as_int(seed, "seed", 0)
    arrivals = np.cumsum(np.random.default_rng([seed, 0xA7]).standard_exponential(q) / rate)
    work = service.draw(np.random.default_rng([seed, 0x3C]), q)
    coded = scheme in ("gcc", "bacc")
    wait = None
    if coded and max_wait_s is not None:
        wait = as_real(max_wait_s, "max_wait_s", 0.0)
    group, close = _groups(arrivals, k, wait)
    extra_work = service.draw(np.random.default_rng([seed, 0x3D]), len(close))
    deadline = (
        math.inf if deadline_s is None else as_real(deadline_s, "deadline_s", 0.0, lo_open=True)
    )
    n = k + 1
    s = as_int(stragglers, "stragglers", 0, n - 1)
    lo = as_int(min_live, "min_live", 1, n)
    episodes = [_Episodes(background, seed, j) for j in range(base + extra)]
    return _Setup(scheme, k, arrivals, work, extra_work, base, extra, episodes, group, close,
                  wait, deadline, n - s, lo)  # fmt: skip


def _coded_tasks(st: _Setup) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The approximate codes' tasks in queue order: ``(enqueue time, work, group)``; group
    ``g``'s ``N = k + 1`` tasks are enqueued at its close, task ``n < k`` with the work of its
    ``n``-th query (the last query's for a short group), task ``k`` with ``extra_work[g]``."""
    k, groups = st.k, len(st.close)
    first = np.searchsorted(st.group, np.arange(groups))
    size = np.diff(np.append(first, len(st.group)))
    idx = first[:, None] + np.minimum(np.arange(k)[None, :], size[:, None] - 1)
    works = np.concatenate([st.work[idx], st.extra_work[:, None]], axis=1)
    times = np.repeat(st.close, k + 1)
    return times, works.reshape(-1), np.repeat(np.arange(groups), k + 1)


def _decode_times(st: _Setup, done: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group, from its tasks' finish times ``done (groups, N)``: the release time
    ``min(t_(N−S), close + deadline)``, the mask of results in by then, and whether it decodes."""
    t_need = np.sort(done, axis=1)[:, st.need - 1]
    release = np.minimum(t_need, st.close + st.deadline_s)
    inside = done <= release[:, None]
    bits = (inside * (1 << np.arange(done.shape[1]))).sum(axis=1)
    return release, bits, inside.sum(axis=1) >= st.min_live


def _heap_engine(st: _Setup) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(answer time, source, mask, busy time)`` per query, by the heap recursion."""
    q = len(st.arrivals)
    mask = np.zeros(q, dtype=np.int64)
    source = np.full(q, OWN, dtype=np.int8)
    if st.scheme in ("gcc", "bacc"):
        pool = _Pool(st.episodes, 0, st.base)
        times, works, _ = _coded_tasks(st)
        done = pool.run_all(times, works).reshape(-1, st.k + 1)
        release, bits, ok = _decode_times(st, done)
        answer = release[st.group]
        source[:] = np.where(ok[st.group], DECODED, MISSED)
        return answer, source, bits[st.group], pool.busy
    pool = _Pool(st.episodes, 0, st.base)
    own = pool.run_all(st.arrivals, st.work)
    busy = pool.busy
    if st.scheme in ("uncoded", "equal"):
        return own, source, mask, busy
    extra = _Pool(st.episodes, st.base, st.extra)
    if st.scheme == "replication":
        firsts = np.arange(0, q, st.k)
        copy = extra.run_all(st.arrivals[firsts], st.extra_work[: len(firsts)])
        answer = own.copy()
        answer[firsts] = np.minimum(own[firsts], copy)
        return answer, source, mask, busy + extra.busy
    return _parm_release(st, own, extra, source, mask) + (busy + extra.busy,)


def _parm_release(st: _Setup, own, extra: _Pool, source, mask):
    """ParM: each full group's parity query runs on the parity pool; a query is answered at
    ``min(own, max(parity, the other k − 1))``."""
    k = st.k
    full = len(st.arrivals) // k
    parity = extra.run_all(st.close[:full], st.extra_work[:full])
    answer = own.copy()
    if full == 0:
        return answer, source, mask
    grid = own[: full * k].reshape(full, k)
    order = np.sort(grid, axis=1)
    # the latest of the other k − 1 outputs: the group's max, or its second largest for the max
    others = np.where(grid == order[:, -1:], order[:, -2:-1], order[:, -1:])
    decoded = np.maximum(parity[:, None], others)
    use = decoded < grid
    answer[: full * k] = np.where(use, decoded, grid).reshape(-1)
    source[: full * k][use.reshape(-1)] = DECODED
    everyone = (1 << (k + 1)) - 1
    bits = everyone & ~(1 << np.arange(k))  # all but the query's own output
    mask[: full * k] = np.where(use, bits[None, :], 0).reshape(-1)
    return answer, source, mask


def simulate(
    scheme: str,
    *,
    instances: int,
    k: int,
    rate: float,
    num_queries: int,
    service: ServiceTime | None = None,
    background: Background | None = None,
    deadline_s: float | None = None,
    stragglers: int = 1,
    min_live: int = 2,
    max_wait_s: float | None = None,
    seed: int = 0,
    engine: str = "heap",
) -> SimResult:
    """Serve ``num_queries`` Poisson queries with one scheme on the model cluster.

    Every scheme sees the same arrivals and the same per-query work for the same seed, and
    instance ``j``'s episodes are the same in every scheme (common random numbers), so
    differences between schemes are differences of the schemes.

    Args:
        scheme: one of :data:`SIM_SCHEMES` (see the module docstring).
        instances: ``m``, the base model instances (a multiple of ``k``).
        k: queries per coding group (ParM's ``k``).
        rate: Poisson arrival rate, queries per second.
        num_queries: queries to serve.
        service: the work distribution (default :class:`ServiceTime`'s).
        background: the background-load episodes (default none).
        deadline_s: GCC/BACC: decode at ``N − S`` results or this long after the group closed.
        stragglers: GCC/BACC: ``S``.
        min_live: GCC/BACC: fewest results a decoder needs (a spline or Berrut: 2).
        max_wait_s: GCC/BACC: a group closes this long after its first query if not full
            (``None``: only when full).
        seed: seeds arrivals, work and episodes.
        engine: ``"heap"`` (default) or ``"simpy"`` (the reference; needs the ``serving`` extra).

    Example:
        >>> from gcc_jax.distributed import ServiceTime, simulate
        >>> r = simulate("parm", instances=4, k=2, rate=300.0, num_queries=2000,
        ...              service=ServiceTime(0.004, 0.002), seed=0)
        >>> r.latency_s.shape, bool((r.latency_s >= 0.004).all()), r.instances
        ((2000,), True, 6)
    """
    service = ServiceTime() if service is None else service
    background = Background() if background is None else background
    engine = as_choice(engine, "engine", _ENGINES)
    st = _setup(scheme, instances, k, rate, num_queries, service, background, deadline_s,
                stragglers, min_live, max_wait_s, seed)  # fmt: skip
    if engine == "heap":
        answer, source, mask, busy = _heap_engine(st)
    else:
        from ._sim_simpy import simpy_engine

        answer, source, mask, busy = simpy_engine(st)
    slot = np.arange(len(st.arrivals)) - np.searchsorted(st.group, st.group)
    if st.scheme in ("uncoded", "equal"):
        slot = np.full(len(st.arrivals), -1)
    horizon = max(float(np.max(answer)), float(st.arrivals[-1]))
    return SimResult(
        scheme=st.scheme,
        arrival_s=st.arrivals,
        latency_s=answer - st.arrivals,
        source=source,
        mask=mask,
        slot=np.asarray(slot, dtype=np.int64),
        instances=st.base + st.extra,
        busy_fraction=float(min(busy / (horizon * (st.base + st.extra)), 1.0)),
    )
