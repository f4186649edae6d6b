"""The coded inference service: queries in, batches of K coded over N workers, answers out."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import itertools
import queue
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._status import describe_status
from .._types import Float
from ._executor import Executor, RoundResult, WaitFor, as_rule, default_wait_for, describe_rule

__all__ = ["Answer", "CodedInferenceService", "poisson_arrivals"]


@dataclasses.dataclass(frozen=True)
class Answer:
    """The service's reply to one query: a prediction, or an explicit error, with metadata.

    Attributes:
        query_id: the id ``submit`` gave the query (submission order from 0).
        value: the decoded estimate of ``f(x)`` (``None`` on error).
        error: ``None``, or why there is no value.
        status: the decoder's :class:`gcc_jax.Status` for the batch (0 = decoded).
        batch_id: the coded batch (= the executor's round id); ``-1`` if never batched.
        slot: the query's position ``k`` in the batch.
        batch_queries: real queries in the batch (the rest of the ``K`` slots are padding).
        workers_answered: workers whose valid result arrived in time.
        worker_issues: ``{worker: what happened}`` for the others (``"late: ..."``,
            ``"nonfinite: ..."``, ``"dead: ...; restarted"`` …).
        timed_out: the round hit its timeout before its wait rule held.
        latency_s: submission → answer, seconds.
        queue_s: submission → dispatch of its batch (batching and queueing).
        round_s: dispatch → the round's cut-off.
    """

    query_id: int
    value: np.ndarray | None
    error: str | None
    status: int = 0
    batch_id: int = -1
    slot: int = -1
    batch_queries: int = 0
    workers_answered: tuple[int, ...] = ()
    worker_issues: dict[int, str] = dataclasses.field(default_factory=dict)
    timed_out: bool = False
    latency_s: float = 0.0
    queue_s: float = 0.0
    round_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the query got a value."""
        return self.error is None

    @property
    def prediction(self) -> int:
        """``argmax`` of the value (a class label), ``-1`` on error."""
        if self.value is None:
            return -1
        return int(np.argmax(self.value))


@dataclasses.dataclass
class _Query:
    query_id: int
    x: np.ndarray
    t_submit: float
    future: concurrent.futures.Future


_STOP = object()


@functools.partial(jax.jit)
def _encode(code, x):
    return code.encode(x)


@functools.partial(jax.jit)
def _decode(code, y, mask):
    return code.decode_with_status(y, mask)


def _available(code, mask: np.ndarray) -> np.ndarray:
    """Which inputs have a live copy (codes with ``available``); all ``True`` for coded ones."""
    k = int(code.num_inputs)
    if not hasattr(code, "available"):
        return np.ones(k, bool)
    assignment = np.asarray(getattr(code, "assignment", np.arange(code.num_workers)))
    return np.bincount(assignment[mask], minlength=k)[:k] > 0


def poisson_arrivals(rate: float, num: int, *, seed: int = 0) -> Float[np.ndarray, " q"]:
    """Arrival times (seconds from 0) of a Poisson stream: i.i.d. ``Exp(rate)`` gaps, cumulated.

    Example:
        >>> from gcc_jax.distributed import poisson_arrivals
        >>> t = poisson_arrivals(100.0, 5, seed=0)
        >>> t.shape, bool((t[1:] > t[:-1]).all())
        ((5,), True)
    """
    rate = float(rate)
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"`rate` must be finite and > 0 (queries per second); got {rate}")
    if isinstance(num, bool) or not isinstance(num, int) or num < 0:
        raise ValueError(f"`num` must be an int >= 0; got {num!r}")
    gaps = np.random.default_rng([int(seed), 0xA7]).standard_exponential(num) / rate
    return np.cumsum(gaps)


class CodedInferenceService:
    """Serve a stream of queries with a code over an executor's ``N`` workers.

    Queries arrive one at a time (:meth:`submit`, thread-safe; or :meth:`serve` to replay a
    timed stream). A batcher groups them in arrival order into batches of ``K``
    (``code.num_inputs``), closing a batch early ``max_wait_s`` after its first query arrived,
    so a lone query is never held for long; the empty slots of a short batch repeat its last
    query. Each batch is one round, up to ``max_in_flight`` at a time: encode
    (``X~ = code.encode(X)``), :meth:`Executor.run_round` with the wait rule (default:
    :func:`default_wait_for`), then ``code.decode_with_status(Y~, mask)`` on the results that
    arrived valid in time.

    Every submitted query gets an :class:`Answer`: its decoded value, or an explicit error —
    the batch could not be decoded (its status says why: too few live workers, …), the query's
    every copy was lost (uncoded and replication), the query itself was malformed, or the
    round failed — with which workers answered, what happened to the others, and its latency.

    Args:
        executor: a `LocalExecutor` or `RayExecutor` with ``code.num_workers`` workers.
        code: any gcc_jax code (``encode``, ``decode_with_status``; ``available`` for uncoded
            and replication).
        wait_for: the wait rule (an int ``N − S`` or a predicate on the mask).
        stragglers: ``S`` for the default rule ``N − S`` (ignored when ``wait_for`` is given).
        max_wait_s: the longest a batch waits for its ``K`` queries.
        timeout_s: a round's deadline.
        max_in_flight: rounds running at once.
        input_shape: the shape of one query (default: the executor's ``input_shape`` if it has
            one, else the first query's). Queries are cast to the executor's ``input_dtype``
            if it has one, else to the first query's floating dtype.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.distributed import CodedInferenceService, LocalExecutor
        >>> code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
        >>> with CodedInferenceService(LocalExecutor(jnp.tanh, num_workers=6), code,
        ...                            stragglers=1) as svc:
        ...     answers = svc.serve(jnp.linspace(-1, 1, 4)[:, None])
        >>> [a.ok for a in answers], len(answers[0].workers_answered)
        ([True, True, True, True], 5)
    """

    def __init__(
        self,
        executor: Executor,
        code: Any,
        *,
        wait_for: WaitFor | None = None,
        stragglers: int | None = None,
        max_wait_s: float = 0.01,
        timeout_s: float = 1.0,
        max_in_flight: int = 2,
        input_shape: Sequence[int] | None = None,
    ):
        if executor.num_workers != code.num_workers:
            raise ValueError(
                f"the executor has {executor.num_workers} workers but the code needs "
                f"{code.num_workers}"
            )
        self.executor = executor
        self.code = code
        self.wait_for = default_wait_for(code, stragglers) if wait_for is None else wait_for
        as_rule(self.wait_for, code.num_workers)  # checks it
        max_wait_s, timeout_s = float(max_wait_s), float(timeout_s)
        if not (np.isfinite(max_wait_s) and max_wait_s >= 0):
            raise ValueError(f"`max_wait_s` must be finite and >= 0; got {max_wait_s}")
        if not (np.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"`timeout_s` must be finite and > 0; got {timeout_s}")
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int):
            raise ValueError(f"`max_in_flight` must be an int >= 1; got {max_in_flight!r}")
        if max_in_flight < 1:
            raise ValueError(f"`max_in_flight` must be an int >= 1; got {max_in_flight}")
        self.max_wait_s, self.timeout_s, self.max_in_flight = max_wait_s, timeout_s, max_in_flight
        shape = input_shape if input_shape is not None else getattr(executor, "input_shape", None)
        self.input_shape = None if shape is None else tuple(int(s) for s in shape)
        dtype = getattr(executor, "input_dtype", None)
        self.input_dtype = None if dtype is None else np.dtype(dtype)
        self._ids = itertools.count()
        self._batch_ids = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        self._queue: queue.Queue = queue.Queue()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_in_flight, thread_name_prefix="gcc-round"
        )
        self._batcher = threading.Thread(target=self._batch_loop, name="gcc-batcher", daemon=True)
        self._batcher.start()

    @property
    def rule(self) -> str:
        """The wait rule in words."""
        return describe_rule(self.wait_for)

    def warmup(self) -> float:
        """Compile the encoder and decoder for this code and query shape now (not in batch 0).

        Returns:
            The seconds it took.

        Raises:
            ValueError: the query shape is not known yet (give ``input_shape``).
        """
        if self.input_shape is None:
            raise ValueError("the query shape is unknown: pass `input_shape` to the service")
        t0 = time.perf_counter()
        k, n = int(self.code.num_inputs), int(self.code.num_workers)
        dtype = self.input_dtype if self.input_dtype is not None else jnp.zeros(()).dtype
        xt = jax.block_until_ready(_encode(self.code, jnp.zeros((k, *self.input_shape), dtype)))
        out_shape = getattr(self.executor, "output_shape", None)
        if out_shape is not None:  # the decoder's input shape is known: compile it too
            out_dtype = getattr(self.executor, "output_dtype", None)
            out_dtype = jnp.result_type(xt.dtype, jnp.float32) if out_dtype is None else out_dtype
            y = jnp.zeros((n, *out_shape), out_dtype)
            jax.block_until_ready(_decode(self.code, y, jnp.ones(n, bool)))
        return time.perf_counter() - t0

    # -- intake ---------------------------------------------------------------------------

    def submit(self, x: Float[Any, "*d"]) -> concurrent.futures.Future:
        """Queue one query; returns a future of its :class:`Answer`.

        A malformed query (wrong shape, not numeric, NaN/Inf — which the encoder would spread to
        every query of its batch) is answered at once with an error and never batched.

        Raises:
            RuntimeError: the service is closed.
        """
        t = time.monotonic()
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the service is closed")
            qid = next(self._ids)
            problem = None
            try:
                arr = np.asarray(x, dtype=float) if not hasattr(x, "dtype") else np.asarray(x)
                if not np.issubdtype(arr.dtype, np.number):
                    raise TypeError(f"dtype {arr.dtype}")
            except (TypeError, ValueError) as err:
                arr, problem = None, f"query is not a numeric array ({err})"
            if problem is None:
                if self.input_shape is None:
                    self.input_shape = arr.shape
                if self.input_dtype is None:
                    self.input_dtype = np.result_type(arr.dtype, np.float32)
                if arr.shape != self.input_shape:
                    problem = f"query has shape {arr.shape}; the service takes {self.input_shape}"
                elif not np.all(np.isfinite(arr)):
                    problem = "query contains NaN or Inf"
            if problem is not None:
                fut.set_result(Answer(query_id=qid, value=None, error=problem))
                return fut
            self._queue.put(_Query(qid, arr.astype(self.input_dtype, copy=False), t, fut))
        return fut

    def serve(
        self,
        queries: Iterable[Any],
        arrival_times: Sequence[float] | None = None,
        *,
        max_seconds: float | None = None,
        progress: bool = False,
        desc: str = "queries",
    ) -> list[Answer]:
        """Submit ``queries`` (at ``arrival_times`` seconds from now, if given) and wait.

        Args:
            queries: the queries, in arrival order.
            arrival_times: non-decreasing arrival times in seconds (``None``: all at once).
            max_seconds: stop submitting after this long (the rest are not submitted).
            progress: show a progress bar over submissions.
            desc: the progress bar's label.

        Returns:
            The answers of the submitted queries, in submission order.
        """
        queries = list(queries)
        if arrival_times is not None:
            arrival_times = np.asarray(arrival_times, dtype=float)
            if arrival_times.shape != (len(queries),):
                raise ValueError(
                    f"`arrival_times` must have one entry per query ({len(queries)}); "
                    f"got shape {arrival_times.shape}"
                )
            if np.any(np.diff(arrival_times) < 0) or not np.all(np.isfinite(arrival_times)):
                raise ValueError("`arrival_times` must be finite and non-decreasing")
        items: Iterable[int] = range(len(queries))
        if progress:
            from tqdm.auto import tqdm

            items = tqdm(items, desc=desc, unit="q")
        t0 = time.monotonic()
        futures = []
        for i in items:
            if arrival_times is not None:
                if max_seconds is not None and arrival_times[i] > max_seconds:
                    break
                wait = t0 + arrival_times[i] - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            if max_seconds is not None and time.monotonic() - t0 > max_seconds:
                break
            futures.append(self.submit(queries[i]))
        return [f.result() for f in futures]

    # -- batching and rounds --------------------------------------------------------------

    def _batch_loop(self) -> None:
        k = int(self.code.num_inputs)
        stop = False
        while not stop:
            item = self._queue.get()
            if item is _STOP:
                break
            batch = [item]
            deadline = item.t_submit + self.max_wait_s
            while len(batch) < k:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    nxt = self._queue.get(timeout=left)
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                batch.append(nxt)
            self._pool.submit(self._run_batch, next(self._batch_ids), batch)

    def _run_batch(self, batch_id: int, batch: list[_Query]) -> None:
        t_dispatch = time.monotonic()
        k = int(self.code.num_inputs)
        try:
            xs = [q.x for q in batch] + [batch[-1].x] * (k - len(batch))
            xt = np.asarray(_encode(self.code, jnp.asarray(np.stack(xs))))
            rr = self.executor.run_round(
                xt, wait_for=self.wait_for, timeout_s=self.timeout_s, round_id=batch_id
            )
            dec = _decode(self.code, jnp.asarray(rr.outputs), jnp.asarray(rr.mask))
            value, status = np.asarray(dec.value), int(dec.status)
            have = _available(self.code, rr.mask)
            self._answer_batch(batch, batch_id, t_dispatch, rr, value, status, have)
        except Exception as err:  # never lose a query: report the failure to each of them
            msg = f"round failed: {type(err).__name__}: {err}"
            self._answer_all(batch, batch_id, t_dispatch, msg)

    def _answer_all(self, batch, batch_id, t_dispatch, msg) -> None:
        now = time.monotonic()
        for slot, q in enumerate(batch):
            if q.future.done():
                continue
            q.future.set_result(
                Answer(
                    query_id=q.query_id,
                    value=None,
                    error=msg,
                    batch_id=batch_id,
                    slot=slot,
                    batch_queries=len(batch),
                    latency_s=now - q.t_submit,
                    queue_s=t_dispatch - q.t_submit,
                )
            )

    def _answer_batch(self, batch, batch_id, t_dispatch, rr: RoundResult, value, status, have):
        issues = rr.issues()
        now = time.monotonic()
        for slot, q in enumerate(batch):
            error = None
            if status != 0:
                why = describe_status(status)
                error = f"the batch could not be decoded: {why} ({rr.summary()})"
            elif not have[slot]:
                error = f"no copy of this query returned in time ({rr.summary()})"
            q.future.set_result(
                Answer(
                    query_id=q.query_id,
                    value=None if error else value[slot],
                    error=error,
                    status=status,
                    batch_id=batch_id,
                    slot=slot,
                    batch_queries=len(batch),
                    workers_answered=rr.answered,
                    worker_issues=issues,
                    timed_out=rr.timed_out,
                    latency_s=now - q.t_submit,
                    queue_s=t_dispatch - q.t_submit,
                    round_s=rr.elapsed,
                )
            )

    # -- shutdown -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop taking queries, answer every queued one, and wait for the rounds in flight."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._batcher.join()
        self._pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
