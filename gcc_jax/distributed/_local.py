"""`LocalExecutor`: the in-process simulator (workers vmapped, latencies from a delay model)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._types import Float
from ._delays import DelayModel, Fault, check_faults, faults_for_round, garbage_like
from ._executor import (
    Executor,
    Outcome,
    RoundResult,
    WaitFor,
    as_rule,
    check_timeout,
    classify_output,
)

__all__ = ["LocalExecutor"]


def as_worker_fns(fn: Callable | Sequence[Callable], num_workers: int) -> list[Callable]:
    """One function per worker: ``fn`` for all, or a sequence of ``num_workers`` functions."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"`num_workers` must be an int >= 1; got {num_workers!r}")
    if callable(fn):
        return [fn] * num_workers
    fns = list(fn)
    if len(fns) != num_workers or not all(callable(f) for f in fns):
        raise ValueError(
            f"`fn` must be a callable or a sequence of {num_workers} callables (one per worker)"
        )
    return fns


class RoundCounter:
    """Thread-safe round ids: the next unused id, or the caller's (then later ids follow it)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 0

    def take(self, round_id: int | None) -> int:
        with self._lock:
            if round_id is None:
                round_id = self._next
            elif isinstance(round_id, bool) or not isinstance(round_id, int) or round_id < 0:
                raise ValueError(f"`round_id` must be an int >= 0; got {round_id!r}")
            self._next = max(self._next, round_id + 1)
            return round_id


def check_delays(delays: DelayModel | None, num_workers: int) -> DelayModel | None:
    if delays is None:
        return None
    if not isinstance(delays, DelayModel):
        raise TypeError(f"`delays` must be a DelayModel or None; got {type(delays).__name__}")
    if delays.num_workers != num_workers:
        raise ValueError(
            f"`delays` models {delays.num_workers} workers but the executor has {num_workers}"
        )
    return delays


class LocalExecutor(Executor):
    """In-process executor: all ``N`` workers computed at once (vmapped), latencies simulated.

    Each round evaluates ``f`` on every coded input with one jitted ``jax.vmap`` call, draws the
    workers' latencies from ``delays`` (a :class:`DelayModel`, seeded by the round id; none
    means every worker answers at time 0), applies the injected ``faults``, and replays the
    arrivals in latency order: the cut-off is the arrival that makes ``wait_for`` hold, or
    ``timeout_s``. Workers arriving later are ``LATE``. Results that are not finite, have the
    wrong shape or fail ``validate`` count as stragglers, exactly as on Ray.

    Latencies are *model* time: ``RoundResult.elapsed`` is the simulated cut-off. With
    ``sleep=True`` a round also takes that long in wall time (so a service on top of it sees
    realistic timing); with ``sleep=False`` it returns at once (Monte Carlo over rounds).

    Faults: ``"crash"`` is reported as ``DEAD`` and counted as restarted (there is no process
    to restart here); ``"hang"`` never arrives; the rest as in :data:`FAULT_KINDS`.

    Args:
        fn: the worker function (one input → one output) or one function per worker.
        num_workers: ``N``.
        delays: the latency model (``None``: no delays).
        faults: injected :class:`Fault` s.
        validate: optional check of one output (e.g. :func:`probability_check`); a result it
            rejects is ``INVALID``.
        sleep: sleep for the simulated cut-off.

    Example:
        >>> import jax.numpy as jnp
        >>> from gcc_jax.distributed import DelayModel, LocalExecutor
        >>> ex = LocalExecutor(jnp.sin, num_workers=5,
        ...                    delays=DelayModel(num_workers=5, shift=0.01, scale=0.01, seed=0))
        >>> r = ex.run_round(jnp.linspace(0, 1, 5), wait_for=3)
        >>> int(r.mask.sum()), bool(r.elapsed == sorted(r.latencies)[2])
        (3, True)
    """

    def __init__(
        self,
        fn: Callable | Sequence[Callable],
        *,
        num_workers: int,
        delays: DelayModel | None = None,
        faults: Sequence[Fault] = (),
        validate: Callable[[np.ndarray], bool] | None = None,
        sleep: bool = False,
    ):
        fns = as_worker_fns(fn, num_workers)
        self.num_workers = num_workers
        self.delays = check_delays(delays, num_workers)
        self.faults = check_faults(faults, num_workers)
        self.validate = validate
        self.sleep = bool(sleep)
        groups: dict[int, tuple[Callable, list[int]]] = {}
        for i, f in enumerate(fns):
            groups.setdefault(id(f), (f, []))[1].append(i)
        self._groups = [(jax.jit(jax.vmap(f)), np.asarray(idx)) for f, idx in groups.values()]
        self._rounds = RoundCounter()

    def _compute(self, xt) -> np.ndarray:
        out = None
        for apply, idx in self._groups:
            y = np.asarray(apply(xt[idx]))
            if out is None:
                out = np.zeros((self.num_workers, *y.shape[1:]), y.dtype)
            if y.shape[1:] != out.shape[1:]:
                raise ValueError("the worker functions give outputs of different shapes")
            out[idx] = y
        return out

    def run_round(
        self,
        xt: Float[Any, "n *d"],
        *,
        wait_for: WaitFor,
        timeout_s: float = 10.0,
        round_id: int | None = None,
    ) -> RoundResult:
        """See :meth:`Executor.run_round`; latencies are simulated (model time)."""
        n = self.num_workers
        xt = jnp.asarray(xt)
        if xt.ndim < 1 or xt.shape[0] != n:
            raise ValueError(f"`xt` must have one row per worker (n={n}); got shape {xt.shape}")
        rule, _ = as_rule(wait_for, n)
        timeout_s = check_timeout(timeout_s)
        rid = self._rounds.take(round_id)
        t_start = time.perf_counter()
        y = self._compute(xt)
        out_shape = y.shape[1:]
        lat = self.delays.sample(rid) if self.delays is not None else np.zeros(n)
        kinds = faults_for_round(self.faults, n, rid)
        lat = np.where([k == "hang" for k in kinds], np.inf, lat)

        outputs = np.zeros_like(y, dtype=np.result_type(y.dtype, np.float32))
        mask = np.zeros(n, bool)
        outcomes = np.full(n, int(Outcome.LATE), np.int8)
        latencies = np.full(n, np.inf)
        messages: dict[int, str] = {}
        restarted = []
        cutoff, met, last = None, False, 0.0
        for i in np.lexsort((np.arange(n), lat)):  # arrival order, ties by index
            t = float(lat[i])
            if t > timeout_s:
                break
            last = t
            latencies[i] = t
            kind = kinds[i]
            if kind == "error":
                outcomes[i], messages[i] = Outcome.ERROR, "raised RuntimeError (injected error)"
            elif kind == "crash":
                outcomes[i], messages[i] = Outcome.DEAD, "process died (injected crash); restarted"
                restarted.append(int(i))
            else:
                value = y[i]
                if kind == "nan":
                    value = np.full(out_shape, np.nan)
                elif kind == "garbage":
                    value = garbage_like(out_shape, rid, int(i))
                elif kind == "malformed":
                    value = np.zeros((int(np.prod(out_shape)) + 1,))
                outcome, arr, msg = classify_output(value, out_shape, self.validate)
                outcomes[i] = outcome
                if outcome is Outcome.OK:
                    outputs[i] = arr
                    mask[i] = True
                else:
                    messages[i] = msg
            if rule(mask):
                cutoff, met = t, True
                break
        timed_out = False
        if cutoff is None:
            arrived_all = bool(np.all(np.isfinite(latencies)))
            cutoff = last if arrived_all else timeout_s
            timed_out = not arrived_all
        for i in np.flatnonzero(outcomes == int(Outcome.LATE)):
            latencies[i] = np.inf
            messages[int(i)] = f"no answer within {cutoff * 1e3:.1f} ms"
        if self.sleep:
            time.sleep(max(0.0, t_start + cutoff - time.perf_counter()))
        return RoundResult(
            round_id=rid,
            outputs=outputs,
            mask=mask,
            outcomes=outcomes,
            latencies=latencies,
            elapsed=float(cutoff),
            rule_met=met,
            timed_out=timed_out,
            messages=messages,
            restarted=tuple(restarted),
        )
