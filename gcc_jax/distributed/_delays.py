"""Straggler injection shared by every executor: a per-task latency model and explicit faults.

Both are plain data, sampled by ``(seed, round_id)``, so a run replays exactly whatever the
thread interleaving and whichever backend executes it: the in-process simulator takes the
sampled latency *as* the worker's latency; the Ray backend tells the worker to wait that long
before it computes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np

from .._core.checks import as_choice, as_floats, as_int, as_prob, as_real, check_instance
from .._core.types import Float

__all__ = ["FAULT_KINDS", "DelayModel", "Fault", "faults_for_round"]

_TAILS = ("exponential", "pareto")


@dataclasses.dataclass(frozen=True)
class DelayModel:
    """Random per-task worker latencies: shifted exponential (or Lomax) times, stragglers, failures.

    In round ``t`` worker ``n`` answers after

        ``T_{n,t} = s_n · B_{n,t} · (shift + scale · L_{n,t})``

    or never (``T = ∞``) with probability ``fail_prob``, where

    * ``L ~ Exp(1)`` (``tail="exponential"``: the shifted-exponential model of the coded
      computing literature) or ``L ~ Lomax(a)``, ``P(L > u) = (1 + u)^(−a)``
      (``tail="pareto"``: heavy-tailed, ``a = pareto_shape``);
    * ``B = straggle_factor`` with probability ``straggle_prob``, else ``1``: independently
      per task (transient stragglers) when ``episode_rounds = 0``; otherwise while worker ``n``
      is in a *background-load episode*, an on/off process over round ids with episodes of
      mean ``episode_rounds`` rounds, on a fraction ``straggle_prob`` of the rounds
      (persistent slowdowns: a slowed worker stays slow for many consecutive rounds);
    * ``s_n = slowdown[n]`` is a persistent per-worker multiplier (slow machines).

    All draws are independent across workers and rounds and depend only on
    ``(seed, round_id)``. The CDF of ``T_{n,t}`` is, in closed form (:meth:`cdf`),

        ``F_n(t) = (1 − q) [(1 − p) G((t/s_n − shift)/scale) + p G((t/(s_n f) − shift)/scale)]``

    with ``G(u) = 1 − e^{−u}`` (exponential) or ``1 − (1 + u)^{−a}`` (Lomax) for ``u ≥ 0`` and
    ``0`` below, ``p = straggle_prob``, ``q = fail_prob``, ``f = straggle_factor``. With
    ``p = q = 0``, equal ``s_n = 1`` and the exponential tail, the ``j``-th fastest of ``N``
    workers answers after ``shift + scale · (H_N − H_{N−j})`` on average (``H`` harmonic
    numbers): waiting for ``N − S`` instead of ``N`` saves ``scale · H_S``.

    Attributes:
        num_workers: ``N ≥ 1``.
        shift: minimum latency in seconds (``≥ 0``).
        scale: scale of the random part in seconds (``≥ 0``; the mean of ``scale · L`` is
            ``scale`` for the exponential tail, ``scale/(a − 1)`` for Lomax with ``a > 1``).
        tail: ``"exponential"`` or ``"pareto"``.
        pareto_shape: ``a > 0`` of the Lomax tail.
        slowdown: per-worker multipliers ``s_n > 0`` (``None`` = all 1).
        straggle_prob: per-task probability ``p`` of a transient slow-down.
        straggle_factor: its factor ``f ≥ 1``.
        episode_rounds: mean length of a worker's slowdown episode in rounds (``0``: none,
            each task slowed independently).
        fail_prob: per-task probability ``q`` of never answering.
        seed: the seed of every draw.

    Example:
        >>> from gcc_jax.distributed import DelayModel
        >>> dm = DelayModel(num_workers=4, shift=0.01, scale=0.005, seed=0)
        >>> t = dm.sample(0)
        >>> t.shape, bool((t >= 0.01).all()), bool((dm.sample(0) == t).all())
        ((4,), True, True)
    """

    num_workers: int
    shift: float = 0.0
    scale: float = 0.0
    tail: str = "exponential"
    pareto_shape: float = 2.0
    slowdown: tuple[float, ...] | None = None
    straggle_prob: float = 0.0
    straggle_factor: float = 10.0
    fail_prob: float = 0.0
    seed: int = 0
    episode_rounds: float = 0.0

    def __post_init__(self):
        n = as_int(self.num_workers, "num_workers", 1)
        as_choice(self.tail, "tail", _TAILS)
        if self.slowdown is not None:
            s = as_floats(self.slowdown, "slowdown", 0.0, lo_open=True)
            if len(s) != n:
                raise ValueError(f"`slowdown` must have one entry per worker (n={n}); got {len(s)}")
            object.__setattr__(self, "slowdown", s)
        for name, value in (
            ("num_workers", n),
            ("shift", as_real(self.shift, "shift", 0.0)),
            ("scale", as_real(self.scale, "scale", 0.0)),
            ("pareto_shape", as_real(self.pareto_shape, "pareto_shape", 0.0, lo_open=True)),
            ("straggle_prob", as_prob(self.straggle_prob, "straggle_prob")),
            ("straggle_factor", as_real(self.straggle_factor, "straggle_factor", 1.0)),
            ("fail_prob", as_prob(self.fail_prob, "fail_prob")),
            ("seed", as_int(self.seed, "seed", 0)),
            ("episode_rounds", as_real(self.episode_rounds, "episode_rounds", 0.0)),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def with_slow_workers(
        cls, num_workers: int, num_slow: int, factor: float = 10.0, *, seed: int = 0, **kwargs
    ) -> DelayModel:
        """A model where ``num_slow`` workers, chosen by ``seed``, are ``factor`` times slower.

        Example:
            >>> from gcc_jax.distributed import DelayModel
            >>> dm = DelayModel.with_slow_workers(5, 2, 10.0, shift=0.01, seed=1)
            >>> sorted(dm.slowdown)
            [1.0, 1.0, 1.0, 10.0, 10.0]
        """
        n = as_int(num_workers, "num_workers", 1)
        k = as_int(num_slow, "num_slow", 0, n)
        slow = np.random.default_rng([as_int(seed, "seed", 0), 0x51]).permutation(n)[:k]
        s = np.ones(n)
        s[slow] = float(factor)
        return cls(num_workers=n, slowdown=tuple(s), seed=seed, **kwargs)

    @property
    def slowdowns(self) -> Float[np.ndarray, " n"]:
        """The per-worker multipliers ``s_n`` as an array (ones when ``slowdown`` is None)."""
        if self.slowdown is None:
            return np.ones(self.num_workers)
        return np.asarray(self.slowdown, dtype=float)

    def sample(self, round_id: int) -> Float[np.ndarray, " n"]:
        """The latencies ``T_{n,t}`` (seconds; ``inf`` = never answers) of round ``t``."""
        rid = as_int(round_id, "round_id", 0)
        rng = np.random.default_rng([self.seed, rid])
        n = self.num_workers
        fail = rng.random(n) < self.fail_prob
        slow = rng.random(n) < self.straggle_prob
        if self.episode_rounds > 0:
            slow = self.in_episode(rid)
        if self.tail == "exponential":
            tail = rng.standard_exponential(n)
        else:
            tail = rng.pareto(self.pareto_shape, n)  # NumPy's pareto is Lomax (Pareto II)
        t = self.slowdowns * np.where(slow, self.straggle_factor, 1.0)
        t = t * (self.shift + self.scale * tail)
        return np.where(fail, np.inf, t)

    def in_episode(self, round_id: int) -> np.ndarray:
        """``(n,)`` which workers are in a slowdown episode in round ``round_id`` (all
        ``False`` when ``episode_rounds = 0``).

        Worker ``n``'s episodes alternate with quiet spells, geometric lengths of means
        ``episode_rounds`` and ``episode_rounds · (1 − p) / p``, starting in the stationary
        state, drawn from ``(seed, n)`` alone: the same whatever rounds are asked for.

        Example:
            >>> from gcc_jax.distributed import DelayModel
            >>> dm = DelayModel(num_workers=3, straggle_prob=0.1, episode_rounds=50.0, seed=0)
            >>> on = [dm.in_episode(r) for r in range(2000)]
            >>> 0.03 < float(np.mean(on)) < 0.3 and bool((dm.in_episode(7) == on[7]).all())
            True
        """
        rid = as_int(round_id, "round_id", 0)
        if self.episode_rounds <= 0 or self.straggle_prob <= 0:
            return np.zeros(self.num_workers, dtype=bool)
        horizon = max(4096, 1 << int(rid).bit_length())
        return np.array([
            _episodes(self.seed, w, self.straggle_prob, self.episode_rounds, horizon)[rid]
            for w in range(self.num_workers)
        ])  # fmt: skip

    def cdf(self, t: Float[np.ndarray, "*q"], worker: int = 0) -> Float[np.ndarray, "*q"]:
        """The closed-form ``P(T_{worker} ≤ t)`` (see the class docstring)."""
        w = as_int(worker, "worker", 0, self.num_workers - 1)
        t = np.asarray(t, dtype=float)
        s = self.slowdowns[w]

        def g(base):
            if self.scale == 0.0:
                return (base >= self.shift).astype(float)
            u = np.maximum((base - self.shift) / self.scale, 0.0)
            if self.tail == "exponential":
                return -np.expm1(-u)
            return 1.0 - (1.0 + u) ** (-self.pareto_shape)

        p, q, f = self.straggle_prob, self.fail_prob, self.straggle_factor
        return (1.0 - q) * ((1.0 - p) * g(t / s) + p * g(t / (s * f)))


@functools.lru_cache(maxsize=256)
def _episodes(seed: int, worker: int, p: float, mean_on: float, horizon: int) -> np.ndarray:
    """``(horizon,)`` one worker's episode state per round (a longer horizon extends the same
    draws: the prefix never changes)."""
    rng = np.random.default_rng([seed, 0xE9, worker])
    mean_off = max(mean_on * (1.0 - p) / p, 1.0)
    state = np.zeros(horizon, dtype=bool)
    on = bool(rng.random() < p)
    t = 0
    while t < horizon:
        length = int(rng.geometric(1.0 / max(mean_on if on else mean_off, 1.0)))
        state[t : t + length] = on
        t += length
        on = not on
    return state


FAULT_KINDS = ("nan", "garbage", "malformed", "error", "hang", "crash")
"""Injected faults: the worker returns all-NaN (``"nan"``), finite random numbers
(``"garbage"``), an array of the wrong shape (``"malformed"``), raises (``"error"``), never
answers (``"hang"``), or its process dies (``"crash"``; the Ray backend restarts it)."""


@dataclasses.dataclass(frozen=True)
class Fault:
    """An injected fault: worker ``worker`` misbehaves as ``kind`` in rounds ``[first, last]``.

    Attributes:
        worker: the worker index.
        kind: one of :data:`FAULT_KINDS`.
        first_round: first round id it applies to (default 0).
        last_round: last round id it applies to, inclusive (``None`` = every later round).

    Example:
        >>> from gcc_jax.distributed import Fault
        >>> Fault(worker=2, kind="nan", first_round=3, last_round=3).active(3)
        True
    """

    worker: int
    kind: str
    first_round: int = 0
    last_round: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "worker", as_int(self.worker, "worker", 0))
        as_choice(self.kind, "kind", FAULT_KINDS)
        object.__setattr__(self, "first_round", as_int(self.first_round, "first_round", 0))
        if self.last_round is not None:
            last = as_int(self.last_round, "last_round", 0)
            if last < self.first_round:
                raise ValueError(f"`last_round` ({last}) is before `first_round`")
            object.__setattr__(self, "last_round", last)

    def active(self, round_id: int) -> bool:
        """Whether the fault applies in round ``round_id``."""
        return round_id >= self.first_round and (
            self.last_round is None or round_id <= self.last_round
        )


def faults_for_round(faults: Sequence[Fault], num_workers: int, round_id: int) -> list[str | None]:
    """The fault kind of each worker in a round (the first active one listed; ``None`` = none)."""
    kinds: list[str | None] = [None] * num_workers
    for fault in faults:
        if fault.worker < num_workers and kinds[fault.worker] is None and fault.active(round_id):
            kinds[fault.worker] = fault.kind
    return kinds


def check_faults(faults: Sequence[Fault], num_workers: int) -> tuple[Fault, ...]:
    """Validate a sequence of faults against the number of workers."""
    faults = tuple(faults)
    for i, fault in enumerate(faults):
        check_instance(fault, Fault, f"faults[{i}]", "gcc_jax.distributed.Fault")
        if fault.worker >= num_workers:
            raise ValueError(
                f"fault on worker {fault.worker} but there are only {num_workers} workers"
            )
    return faults


def garbage_like(shape: tuple[int, ...], round_id: int, worker: int) -> np.ndarray:
    """The finite random numbers a ``"garbage"`` worker returns (reproducible)."""
    return 1e3 * np.random.default_rng([round_id, worker, 0x6A]).standard_normal(shape)
