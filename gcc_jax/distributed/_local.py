"""`LocalExecutor`: the in-process simulator (workers vmapped, latencies from a delay model)."""

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import as_int, check_instance
from ._delays import DelayModel, Fault, check_faults, faults_for_round, garbage_like
from ._executor import (
    Executor,
    OnResult,
    Outcome,
    RoundCounter,
    RoundRecord,
    RoundResult,
    RoundSpec,
)

__all__ = ["LocalExecutor"]


def as_worker_fns(fn: Callable | Sequence[Callable], num_workers: int) -> list[Callable]:
    """One function per worker: ``fn`` for all, or a sequence of ``num_workers`` functions."""
    num_workers = as_int(num_workers, "num_workers", 1)
    if callable(fn):
        return [fn] * num_workers
    fns = list(fn)
    if len(fns) != num_workers or not all(callable(f) for f in fns):
        raise ValueError(
            f"`fn` must be a callable or a sequence of {num_workers} callables (one per worker)"
        )
    return fns


def check_delays(delays: DelayModel | None, num_workers: int) -> DelayModel | None:
    if delays is None:
        return None
    check_instance(delays, DelayModel, "delays", "gcc_jax.distributed.DelayModel or None")
    if delays.num_workers != num_workers:
        raise ValueError(
            f"`delays` models {delays.num_workers} workers but the executor has {num_workers}"
        )
    return delays


COMPILE_GRACE_S = 120.0
"""Wall seconds a worker function may take on its first call for an input shape (compiling)
before it counts as hung; later calls get the round's timeout."""


class LocalExecutor(Executor):
    """In-process executor: all ``N`` workers computed at once (vmapped), latencies simulated.

    Each round evaluates ``f`` on every coded input with one jitted ``jax.vmap`` call per
    distinct worker function, draws the workers' latencies from ``delays`` (a
    :class:`DelayModel`, seeded by the round id; none means every worker answers at time 0),
    applies the injected ``faults``, and replays the arrivals in latency order: the cut-off is
    the arrival that makes ``wait_for`` hold, or ``timeout_s``. Workers arriving later are
    ``LATE``.

    Faults are isolated per worker exactly as on Ray: a worker whose result is not finite, has
    the wrong shape (not the shape of ``fn[0]``'s output, or ``output_shape``) or fails
    ``validate`` is a straggler (``NONFINITE``/``INVALID``); a worker function that raises is
    ``ERROR`` (a group of workers sharing a function that raises under ``vmap`` is re-run one
    worker at a time, so only the raising inputs fail); one that does not return within the
    round's timeout (wall time; :data:`COMPILE_GRACE_S` on the first call for an input shape,
    which compiles — :meth:`warmup` does that ahead) is ``LATE`` and the round goes on without
    it.

    Latencies are *model* time: ``RoundResult.elapsed`` is the simulated cut-off. With
    ``sleep=True`` a round also takes that long in wall time and ``on_result`` is called at
    each arrival's time (so a service on top of it sees realistic timing); with
    ``sleep=False`` it returns at once (Monte Carlo over rounds).

    Injected faults: ``"crash"`` is reported as ``DEAD`` and counted as restarted (there is no
    process to restart here); ``"hang"`` never arrives; the rest as in :data:`FAULT_KINDS`.

    Args:
        fn: the worker function (one input → one output) or one function per worker.
        num_workers: ``N``.
        delays: the latency model (``None``: no delays).
        faults: injected :class:`Fault` s.
        validate: optional check of one output (e.g. :func:`probability_check`); a result it
            rejects is ``INVALID``.
        sleep: sleep for the simulated cut-off.
        output_shape: the shape of one valid output (default: ``fn[0]``'s, by
            ``jax.eval_shape``).

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
        output_shape: Sequence[int] | None = None,
    ):
        fns = as_worker_fns(fn, num_workers)
        self.num_workers = num_workers
        self.delays = check_delays(delays, num_workers)
        self.faults = check_faults(faults, num_workers)
        self.validate = validate
        self.sleep = bool(sleep)
        self.output_shape = None if output_shape is None else tuple(int(v) for v in output_shape)
        groups: dict[int, tuple[Callable, list[int]]] = {}
        for i, f in enumerate(fns):
            groups.setdefault(id(f), (f, []))[1].append(i)
        self._first = fns[0]
        self._groups = [
            (jax.jit(jax.vmap(f)), jax.jit(f), np.asarray(idx)) for f, idx in groups.values()
        ]
        self._rounds = RoundCounter()
        self._shapes: dict[tuple, tuple[int, ...] | None] = {}
        self._seen: set[tuple] = set()  # input signatures already compiled

    def _expected_shape(self, row: jax.ShapeDtypeStruct) -> tuple[int, ...] | None:
        """The shape of a valid output: ``output_shape``, else ``fn[0]``'s (``None``: unknown)."""
        if self.output_shape is not None:
            return self.output_shape
        key = (row.shape, str(row.dtype))
        if key not in self._shapes:
            try:
                self._shapes[key] = tuple(jax.eval_shape(self._first, row).shape)
            except Exception:  # fn[0] cannot trace: take the first valid group's shape
                self._shapes[key] = None
        return self._shapes[key]

    def warmup(self, input_shape: Sequence[int], input_dtype: Any) -> jax.ShapeDtypeStruct:
        """Compile every worker function for ``N`` inputs of this shape; return the output's.

        Runs one round's computation on zeros (no delays, no faults), so round 0 does not
        compile.

        Raises:
            ValueError: no worker function gives a valid output for this input shape.
        """
        xt = jnp.asarray(np.zeros((self.num_workers, *tuple(input_shape)), input_dtype))
        results = self._compute(xt, timeout_s=600.0)
        for value in results:
            if isinstance(value, np.ndarray):
                dtype = np.result_type(value.dtype, np.float32)
                return jax.ShapeDtypeStruct(value.shape, dtype)
        raise ValueError(
            f"no worker function gives a valid output for inputs of shape {tuple(input_shape)}"
        )

    def _compute(self, xt, timeout_s: float) -> list:
        """Per worker: its output (NumPy) or ``(Outcome, message)``; groups run in threads."""
        n = self.num_workers
        expected = self._expected_shape(jax.ShapeDtypeStruct(xt.shape[1:], xt.dtype))
        results: list = [None] * n
        key = (tuple(xt.shape), str(xt.dtype))
        if key not in self._seen:  # compiling: a slow first call is not a hang
            timeout_s = max(timeout_s, COMPILE_GRACE_S)
        threads = []
        for apply, single, idx in self._groups:
            box: dict[str, Any] = {}
            t = threading.Thread(target=_run_group, args=(apply, single, xt, idx, box), daemon=True)
            t.start()
            threads.append((t, idx, box))
        t_end = time.perf_counter() + timeout_s
        for t, idx, box in threads:
            t.join(max(0.0, t_end - time.perf_counter()))
            if t.is_alive():  # a worker function that hangs: late for this round
                for i in idx:
                    results[i] = (Outcome.LATE, "the worker function did not return")
                continue
            for i, value in zip(idx, box["out"], strict=True):
                results[i] = value
        if not any(t.is_alive() for t, _, _ in threads):
            self._seen.add(key)
        if expected is None:  # take the first computed output's shape
            shapes = [np.shape(v) for v in results if isinstance(v, np.ndarray)]
            expected = shapes[0] if shapes else None
        for i, value in enumerate(results):
            if isinstance(value, np.ndarray) and expected is not None and value.shape != expected:
                results[i] = (Outcome.INVALID, f"returned shape {value.shape}, expected {expected}")
        return results

    def _run(self, xt: Any, spec: RoundSpec) -> RoundResult:
        """One round; latencies are simulated (model time)."""
        n = self.num_workers
        timeout_s = spec.timeout_s
        rid = self._rounds.take(spec.round_id)
        t_start = time.perf_counter()
        computed = self._compute(xt, timeout_s)
        good = [v for v in computed if isinstance(v, np.ndarray)]
        out_shape = good[0].shape if good else (self._expected_shape_or_empty(xt))
        out_dtype = np.result_type(good[0].dtype if good else xt.dtype, np.float32)
        lat = self.delays.sample(rid) if self.delays is not None else np.zeros(n)
        kinds = faults_for_round(self.faults, n, rid)
        lat = np.where([k == "hang" for k in kinds], np.inf, lat)

        record = RoundRecord.empty(n, out_shape, out_dtype)
        outcomes, latencies, messages = record.outcomes, record.latencies, record.messages
        for i, value in enumerate(computed):
            if isinstance(value, tuple) and value[0] is Outcome.LATE:
                messages[i] = f"{value[1]} within {timeout_s * 1e3:.1f} ms (wall time)"
        cutoff, met, last = None, False, 0.0
        for i in map(int, np.lexsort((np.arange(n), lat))):  # arrival order, ties by index
            t = float(lat[i])
            if t > timeout_s:
                break
            computed_i = computed[i]
            if isinstance(computed_i, tuple) and computed_i[0] is Outcome.LATE:
                continue  # its function hangs: it never arrives
            last = t
            latencies[i] = t
            kind = kinds[i]
            if kind == "error":
                outcomes[i], messages[i] = Outcome.ERROR, "raised RuntimeError (injected error)"
            elif kind == "crash":
                outcomes[i], messages[i] = Outcome.DEAD, "process died (injected crash); restarted"
                record.restarted.append(i)
            elif isinstance(computed_i, tuple):
                outcomes[i], messages[i] = computed_i
            else:
                value = computed_i
                if kind == "nan":
                    value = np.full(out_shape, np.nan)
                elif kind == "garbage":
                    value = garbage_like(out_shape, rid, i)
                elif kind == "malformed":
                    value = np.zeros((int(np.prod(out_shape)) + 1,))
                on_result = spec.on_result
                if on_result is not None and self.sleep:
                    on_result = self._at_arrival(on_result, t_start + t)
                record.accept(i, value, self.validate, on_result, t)
            if spec.rule(record.mask):
                cutoff, met = t, True
                break
        timed_out = False
        if cutoff is None:
            arrived_all = bool(np.all(np.isfinite(latencies)))
            cutoff = last if arrived_all else timeout_s
            timed_out = not arrived_all
        for i in np.flatnonzero(outcomes == int(Outcome.LATE)):
            latencies[i] = np.inf
            messages.setdefault(int(i), f"no answer within {cutoff * 1e3:.1f} ms")
        if self.sleep:
            time.sleep(max(0.0, t_start + cutoff - time.perf_counter()))
        return record.result(rid, cutoff, met, timed_out)

    @staticmethod
    def _at_arrival(on_result: OnResult, wall_time: float) -> OnResult:
        """``on_result`` called no earlier than ``wall_time`` (``time.perf_counter`` clock)."""

        def call(worker: int, output: np.ndarray, latency: float) -> None:
            time.sleep(max(0.0, wall_time - time.perf_counter()))
            on_result(worker, output, latency)

        return call

    def _expected_shape_or_empty(self, xt) -> tuple[int, ...]:
        shape = self._expected_shape(jax.ShapeDtypeStruct(xt.shape[1:], xt.dtype))
        return () if shape is None else shape


def _run_group(apply, single, xt, idx, box) -> None:
    """``box["out"]``: one entry per worker of ``idx`` — its output or ``(Outcome, message)``.

    The group's inputs run as one vmapped call; if that raises, each input runs alone so that
    only the failing workers fail.
    """
    try:
        y = np.asarray(apply(xt[idx]))
        if y.ndim >= 1 and y.shape[0] == len(idx) and np.issubdtype(y.dtype, np.number):
            box["out"] = list(y)
            return
    except Exception:
        pass
    out: list = []
    for i in idx:
        try:
            value = single(xt[i])
            try:
                arr = np.asarray(value)
            except Exception:
                arr = None
            if arr is None or not np.issubdtype(arr.dtype, np.number):
                out.append((Outcome.INVALID, f"returned a {type(value).__name__}, not an array"))
            else:
                out.append(arr)
        except Exception as err:
            msg = f"raised {type(err).__name__}: {err}".splitlines()[0]
            out.append((Outcome.ERROR, msg))
    box["out"] = out
