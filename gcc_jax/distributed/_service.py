"""The coded inference service: queries in, batches of K coded over N workers, answers out."""

import collections
import concurrent.futures
import dataclasses
import functools
import itertools
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import as_choice, as_int, as_real
from .._core.status import describe_status
from .._core.types import ArrayLike, Float, Real
from ..codes import AbstractCode, check_code
from ._executor import (
    Executor,
    WaitFor,
    as_rule,
    code_available,
    default_wait_for,
    describe_rule,
    systematic_workers,
)

__all__ = [
    "LIARS",
    "RELEASES",
    "Answer",
    "CodedInferenceService",
    "Overloaded",
    "UncheckedResultsWarning",
    "poisson_arrivals",
]

RELEASES = ("query", "batch")
"""Release policies: ``"query"`` answers each query as soon as its own estimate is ready,
``"batch"`` answers the whole batch at the round's cut-off."""

_OVERLOAD = ("reject", "block")

LIARS = ("warn", "raise", "ignore")
"""What the service does when nothing checks the workers' results against liars (its code has
``max_liars = 0`` and its executor no ``validate``): warn (:class:`UncheckedResultsWarning`),
raise a ``ValueError``, or accept it silently (the caller trusts its workers)."""


class UncheckedResultsWarning(UserWarning):
    """A :class:`CodedInferenceService` whose answers no check protects from a worker that
    returns a wrong but finite result: its code corrects no liar (``code.max_liars == 0``)
    and its executor has no ``validate``."""


class Overloaded(RuntimeError):
    """``submit`` found the service's queue full (``on_overload="reject"``).

    Attributes:
        queued: queries waiting for a batch when it was rejected.
        limit: the queue limit (``max_queue``).
    """

    def __init__(self, queued: int, limit: int):
        self.queued, self.limit = int(queued), int(limit)
        super().__init__(
            f"the service is overloaded: {queued} queries are waiting (max_queue={limit}); "
            "the query was not accepted: retry later, raise `max_queue`, or build the service "
            "with on_overload='block'"
        )


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
        timed_out: the round hit its timeout (or deadline) before its wait rule held.
        latency_s: submission → answer, seconds.
        queue_s: submission → dispatch of its batch (batching and queueing).
        round_s: dispatch → the answer's release (the round's cut-off, or the arrival of the
            query's own result when it was released early).
        source: where the value came from: ``"decoder"`` (decoded at the round's cut-off),
            ``"worker n"`` (worker ``n``'s own result for this query, released on arrival),
            or ``""`` (no value).
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
    source: str = ""

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


@jax.jit
def _encode(code, x):
    return code.encode(x)


@jax.jit
def _decode(code, y, mask):
    """The decoded batch, its status and which estimates are available (one compiled call)."""
    dec = code.decode_with_status(y, mask)
    return dec.value, dec.status, code.available(mask)


def poisson_arrivals(rate: float, num: int, *, seed: int = 0) -> Float[np.ndarray, " q"]:
    """Arrival times (seconds from 0) of a Poisson stream: i.i.d. ``Exp(rate)`` gaps, cumulated.

    Example:
        >>> from gcc_jax.distributed import poisson_arrivals
        >>> t = poisson_arrivals(100.0, 5, seed=0)
        >>> t.shape, bool((t[1:] > t[:-1]).all())
        ((5,), True)
    """
    rate = as_real(rate, "rate (queries per second)", 0.0, lo_open=True)
    num = as_int(num, "num", 0)
    gaps = np.random.default_rng([as_int(seed, "seed", 0), 0xA7]).standard_exponential(num) / rate
    return np.cumsum(gaps)


def _answer(q: _Query, slot, batch, batch_id, t_dispatch, now, **fields) -> Answer:
    """The :class:`Answer` to query ``q`` (slot ``slot`` of ``batch``) at time ``now``."""
    return Answer(
        query_id=q.query_id,
        batch_id=batch_id,
        slot=slot,
        batch_queries=len(batch),
        latency_s=now - q.t_submit,
        queue_s=t_dispatch - q.t_submit,
        **fields,
    )


class CodedInferenceService:
    """Serve a stream of queries with any code over an executor's ``N`` workers.

    Queries arrive one at a time (:meth:`submit`, thread-safe; or :meth:`serve` to replay a
    timed stream) into a bounded queue. A batcher takes them in arrival order, ``K``
    (``code.num_inputs``) at a time, whenever a round may start (at most ``max_in_flight``
    run at once): a batch leaves as soon as ``K`` queries are waiting, or ``max_wait_s`` after
    its first query arrived with what is there (the empty slots repeat its last query). Under
    load the queue holds ``K`` or more queries whenever a round frees, so every batch is full.
    Each batch is one round: encode (``X~ = code.encode(X)``), :meth:`Executor.run_round`
    with the wait rule (default :func:`default_wait_for`) and the round's deadline, then
    ``code.decode_with_status(Y~, mask)`` on the results that arrived valid in time.

    **Release.** With ``release="query"`` (default) each query is answered as soon as its own
    estimate is ready: a query whose own result arrives from a *systematic* worker (one whose
    coded input is the query itself, :func:`systematic_workers`) is answered with it at once
    — uncoded when its worker answers, replication at its first replica, ParM at its own base
    output; for *exact* codes (the class constant :attr:`gcc_jax.AbstractCode.is_exact`), as
    soon as ``code.available`` says the results so far decode it — ParM at its parity plus the
    other ``k − 1`` outputs; the others when the round's wait rule holds (or its deadline
    passes) — GCC, BACC, LCC and robust decoders at ``N − S``. Nothing here is special-cased
    per code: any :class:`gcc_jax.AbstractCode` works.
    With ``release="batch"`` every query of a batch is answered at the round's cut-off. With
    Byzantine workers and a robust decoder use ``"batch"``: per-query release answers a query
    with its systematic worker's own output, unchecked by the decoder.

    **Deadline decoding.** ``deadline_s=T`` ends a round at ``T`` seconds after dispatch if its
    wait rule has not held by then ("``N − S`` results or ``T``, whichever first"; with
    ``stragglers=0``, "deadline only": every worker or ``T``) and decodes from whoever
    answered; a decoder that cannot (a spline needs 2 live workers, ParM ``k`` of ``k + 1``)
    gives an explicit error with its status.

    **Backpressure.** At most ``max_queue`` queries wait for a batch. Past that, ``submit``
    raises :class:`Overloaded` at once (``on_overload="reject"``) or blocks until there is room
    (``"block"``); nothing is dropped silently, and the latency of accepted queries stays
    bounded by about ``max_queue / throughput`` plus a round.

    Every accepted query gets an :class:`Answer`: its value, or an explicit error — the batch
    could not be decoded (its status says why), the query's every copy was lost (uncoded,
    replication), the query itself was malformed, or the round failed — with which workers
    answered, what happened to the others, and its latency.

    Args:
        executor: a `LocalExecutor` or `RayExecutor` with ``code.num_workers`` workers.
        code: any :class:`gcc_jax.AbstractCode`.
        wait_for: the wait rule (an int ``N − S`` or a predicate on the mask).
        stragglers: ``S`` for the rule ``N − S`` (ignored when ``wait_for`` is given).
        deadline_s: decode with whoever answered this long after dispatch (``None``: only
            the hard ``timeout_s``).
        release: ``"query"`` or ``"batch"`` (see above).
        max_wait_s: the longest a batch waits for its ``K`` queries.
        timeout_s: a round's hard deadline (the effective one is ``min(deadline_s,
            timeout_s)``).
        max_in_flight: rounds running at once.
        max_queue: queries that may wait for a batch (``≥ K``).
        on_overload: ``"reject"`` (raise :class:`Overloaded`) or ``"block"``.
        input_shape: the shape of one query (default: the executor's ``input_shape`` if it has
            one, else the first query's). Queries are cast to the executor's ``input_dtype``
            if it has one, else to the first query's floating dtype.
        on_liars: what to do when nothing protects the answers from *liars* (workers that
            return a wrong but finite result): the code corrects none
            (:attr:`gcc_jax.AbstractCode.max_liars` is 0: GCC, BACC, LCC, uncoded,
            replication, ParM, learned codes) and the executor has no ``validate``. ``"warn"``
            (default) issues an :class:`UncheckedResultsWarning`, ``"raise"`` refuses with a
            ``ValueError``, ``"ignore"`` says the workers are trusted. A code that corrects
            liars (``RobustSplineCode``, ``ApproxIFERCode``, ``LagrangeECCode``) or an
            executor with a ``validate`` never warns. See docs/adversarial.md.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.distributed import CodedInferenceService, LocalExecutor
        >>> code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
        >>> with CodedInferenceService(LocalExecutor(jnp.tanh, num_workers=6), code,
        ...                            stragglers=1, max_wait_s=5.0) as svc:
        ...     answers = svc.serve(jnp.linspace(-1, 1, 4)[:, None])
        >>> [a.ok for a in answers], len(answers[0].workers_answered), svc.stats()["rounds"]
        ([True, True, True, True], 5, 2)

        (Each round takes ``K = 2`` queries; a batch waits up to ``max_wait_s`` for them, so
        with the default 10 ms a busy machine may send a round with one query.)
    """

    def __init__(
        self,
        executor: Executor,
        code: AbstractCode,
        *,
        wait_for: WaitFor | None = None,
        stragglers: int | None = None,
        deadline_s: float | None = None,
        release: str = "query",
        max_wait_s: float = 0.01,
        timeout_s: float = 1.0,
        max_in_flight: int = 2,
        max_queue: int = 1024,
        on_overload: str = "reject",
        input_shape: Sequence[int] | None = None,
        on_liars: str = "warn",
    ):
        code = check_code(code)
        if not isinstance(executor, Executor):
            raise TypeError(
                "`executor` must be a gcc_jax.distributed Executor (LocalExecutor, RayExecutor, "
                f"RoundRobinExecutor); got {type(executor).__name__}"
            )
        if executor.num_workers != code.num_workers:
            raise ValueError(
                f"the executor has {executor.num_workers} workers but the code needs "
                f"{code.num_workers}"
            )
        self.on_liars = as_choice(on_liars, "on_liars", LIARS)
        if int(code.max_liars) == 0 and executor.validate is None and self.on_liars != "ignore":
            message = (
                f"{type(code).__name__} cannot detect corrupted results (max_liars = 0) and the "
                "executor has no `validate`: a worker that returns a wrong but finite result "
                "changes the answers and nothing reports it. Give the executor a `validate` "
                "(e.g. probability_check()), use a code that corrects liars (RobustSplineCode, "
                "ApproxIFERCode, LagrangeECCode), or pass on_liars='ignore' if the workers are "
                "trusted"
            )
            if self.on_liars == "raise":
                raise ValueError(f"`on_liars`='raise': {message}")
            warnings.warn(message, UncheckedResultsWarning, stacklevel=2)
        self.executor = executor
        self.code = code
        self.wait_for = default_wait_for(code, stragglers) if wait_for is None else wait_for
        as_rule(self.wait_for, code.num_workers)  # checks it
        self.max_wait_s = as_real(max_wait_s, "max_wait_s", 0.0)
        self.timeout_s = as_real(timeout_s, "timeout_s", 0.0, lo_open=True)
        self.deadline_s = (
            None if deadline_s is None else as_real(deadline_s, "deadline_s", 0.0, lo_open=True)
        )
        self.release = as_choice(release, "release", RELEASES)
        self.on_overload = as_choice(on_overload, "on_overload", _OVERLOAD)
        self.max_in_flight = as_int(max_in_flight, "max_in_flight", 1)
        self.max_queue = as_int(max_queue, "max_queue", int(code.num_inputs))
        shape = input_shape if input_shape is not None else getattr(executor, "input_shape", None)
        self.input_shape = None if shape is None else tuple(int(s) for s in shape)
        dtype = getattr(executor, "input_dtype", None)
        self.input_dtype = None if dtype is None else np.dtype(dtype)
        self._systematic: dict[tuple, np.ndarray] = {}
        self._exact = bool(code.is_exact)
        self._ids = itertools.count()
        self._batch_ids = itertools.count()
        self._cond = threading.Condition()
        self._waiting: collections.deque = collections.deque()
        self._closed = False
        self._counts = dict(submitted=0, rejected=0, malformed=0, rounds=0, batched=0)
        self._slots = threading.Semaphore(self.max_in_flight)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.max_in_flight, thread_name_prefix="gcc-round"
        )
        self._batcher = threading.Thread(target=self._batch_loop, name="gcc-batcher", daemon=True)
        self._batcher.start()

    @property
    def rule(self) -> str:
        """The wait rule in words (with the deadline, if any)."""
        text = describe_rule(self.wait_for)
        if self.deadline_s is not None:
            text += f" or {self.deadline_s * 1e3:g} ms"
        return text

    @property
    def round_timeout_s(self) -> float:
        """The executor's timeout for a round: ``min(deadline_s, timeout_s)``."""
        if self.deadline_s is None:
            return self.timeout_s
        return min(self.deadline_s, self.timeout_s)

    def stats(self) -> dict:
        """Counts so far: ``submitted``, ``rejected`` (:class:`Overloaded`), ``malformed``,
        ``rounds``, ``batched`` (queries sent in rounds), ``mean_batch`` and ``queued``."""
        with self._cond:
            out = dict(self._counts)
            out["queued"] = len(self._waiting)
        out["mean_batch"] = out["batched"] / out["rounds"] if out["rounds"] else 0.0
        return out

    def warmup(self) -> float:
        """Compile everything a round runs now, not in round 0: the encoder, the executor's
        worker functions (:meth:`Executor.warmup`), the decoder and the wait rule.

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
        x = np.zeros((k, *self.input_shape), dtype)
        xt = np.asarray(_encode(self.code, jnp.asarray(x)))
        self._systematic_map(self.input_shape, dtype)
        try:
            out = self.executor.warmup(self.input_shape, xt.dtype)
        except ValueError:
            out = None  # an executor that cannot tell its output shape: decoder compiles later
        if out is not None:  # the same calls, on the same argument types, as a round's
            y = np.zeros((n, *out.shape), out.dtype)
            for mask in (np.ones(n, bool), np.zeros(n, bool)):
                self._decode_round(y, mask)
        as_rule(self.wait_for, n)[0](np.zeros(n, bool))
        np.asarray(code_available(self.code, np.zeros(n, bool)))
        return time.perf_counter() - t0

    def _decode_round(self, outputs: np.ndarray, mask: np.ndarray):
        value, status, have = _decode(self.code, jnp.asarray(outputs), jnp.asarray(mask))
        return np.asarray(value), int(status), np.asarray(have)

    def _systematic_map(self, shape, dtype) -> np.ndarray:
        key = (tuple(shape), str(np.dtype(dtype)))
        if key not in self._systematic:
            self._systematic[key] = systematic_workers(self.code, shape, dtype)
        return self._systematic[key]

    # -- intake ---------------------------------------------------------------------------

    def submit(self, x: Any) -> concurrent.futures.Future:
        """Queue one query (an array of the service's input shape); returns a future of its
        :class:`Answer`.

        Any value is accepted: a malformed query (wrong shape, not real and numeric — complex,
        boolean, strings, objects —, NaN/Inf, which the encoder would spread to every query of
        its batch) is answered at once with an error and never batched.

        Raises:
            Overloaded: ``max_queue`` queries are waiting and ``on_overload="reject"``.
            RuntimeError: the service is closed.
        """
        t = time.monotonic()
        fut: concurrent.futures.Future = concurrent.futures.Future()
        problem = None
        try:
            arr = np.asarray(x)
            if arr.dtype.kind == "c":
                raise TypeError(
                    f"complex dtype {arr.dtype}: the service does not drop imaginary parts; "
                    "send the real and imaginary parts as separate entries"
                )
            if arr.dtype.kind not in "iuf":
                raise TypeError(f"dtype {arr.dtype}")
        except (TypeError, ValueError) as err:
            arr, problem = None, f"query is not a real numeric array ({err})"
        with self._cond:
            if self._closed:
                raise RuntimeError("the service is closed")
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
                self._counts["malformed"] += 1
                fut.set_result(Answer(query_id=next(self._ids), value=None, error=problem))
                return fut
            while len(self._waiting) >= self.max_queue:
                if self.on_overload == "reject":
                    self._counts["rejected"] += 1
                    raise Overloaded(len(self._waiting), self.max_queue)
                self._cond.wait()
                if self._closed:
                    raise RuntimeError("the service is closed")
            qid = next(self._ids)
            self._counts["submitted"] += 1
            x = arr.astype(self.input_dtype, copy=False)
            self._waiting.append(_Query(qid, x, t, fut))
            self._cond.notify_all()
        return fut

    def serve(
        self,
        queries: Iterable[Any],
        arrival_times: Sequence[float] | Real[ArrayLike, " q"] | None = None,
        *,
        max_seconds: float | None = None,
        progress: bool = False,
        desc: str = "queries",
    ) -> list[Answer]:
        """Submit ``queries`` (at ``arrival_times`` seconds from now, if given) and wait.

        A query the service rejects (:class:`Overloaded`) gets an :class:`Answer` whose error
        starts with ``"overloaded"`` (``query_id`` ``-1``, latency 0).

        Args:
            queries: the queries, in arrival order.
            arrival_times: non-decreasing arrival times in seconds (``None``: all at once).
            max_seconds: stop submitting after this long (the rest are not submitted).
            progress: show a progress bar over submissions (stderr).
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
                raise ValueError(
                    f"`arrival_times` must be finite and non-decreasing; got {arrival_times[:8]}"
                )
        items: Iterable[int] = range(len(queries))
        if progress:
            from .._core.progress import tqdm

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
            try:
                futures.append(self.submit(queries[i]))
            except Overloaded as err:
                done: concurrent.futures.Future = concurrent.futures.Future()
                done.set_result(Answer(query_id=-1, value=None, error=str(err)))
                futures.append(done)
        return [f.result() for f in futures]

    # -- batching and rounds --------------------------------------------------------------

    def _next_batch(self) -> list | None:
        """Block until a batch can leave; ``None`` once closed and drained."""
        k = int(self.code.num_inputs)
        with self._cond:
            while not self._waiting and not self._closed:
                self._cond.wait()
            if not self._waiting:
                return None
            deadline = self._waiting[0].t_submit + self.max_wait_s
            while len(self._waiting) < k and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch = [self._waiting.popleft() for _ in range(min(k, len(self._waiting)))]
            self._counts["rounds"] += 1
            self._counts["batched"] += len(batch)
            self._cond.notify_all()  # room for blocked submitters
        return batch

    def _batch_loop(self) -> None:
        while True:
            self._slots.acquire()  # a round may start: only now take queries off the queue
            batch = self._next_batch()
            if batch is None:
                self._slots.release()
                return
            self._pool.submit(self._run_batch, next(self._batch_ids), batch)

    def _run_batch(self, batch_id: int, batch: list[_Query]) -> None:
        t_dispatch = time.monotonic()
        k = int(self.code.num_inputs)
        lock = threading.Lock()
        done = [False] * len(batch)
        state = dict(lock=lock, done=done, y=None, mask=np.zeros(int(self.code.num_workers), bool))

        def release(i: int, answer_fn) -> None:
            with lock:
                if done[i]:
                    return
                done[i] = True
            batch[i].future.set_result(answer_fn())

        try:
            try:
                x = np.stack([q.x for q in batch] + [batch[-1].x] * (k - len(batch)))
                xt = np.asarray(_encode(self.code, jnp.asarray(x)))
                on_result = None
                if self.release == "query":
                    owner = self._systematic_map(x.shape[1:], x.dtype)
                    if np.any(owner >= 0) or self._exact:
                        on_result = functools.partial(
                            self._on_result, batch, batch_id, t_dispatch, owner, state, release
                        )
                rr = self.executor.run_round(
                    xt,
                    wait_for=self.wait_for,
                    timeout_s=self.round_timeout_s,
                    round_id=batch_id,
                    **({} if on_result is None else dict(on_result=on_result)),
                )
                value, status, have = self._decode_round(rr.outputs, rr.mask)
            except Exception as err:  # never lose a query: report the failure to each of them
                msg = f"round failed: {type(err).__name__}: {err}"
                now = time.monotonic()
                for i, q in enumerate(batch):
                    release(
                        i,
                        functools.partial(
                            _answer, q, i, batch, batch_id, t_dispatch, now, value=None, error=msg
                        ),
                    )
                return
            issues = rr.issues()
            now = time.monotonic()
            for i, q in enumerate(batch):
                error = None
                if status != 0:
                    why = describe_status(status)
                    error = f"the batch could not be decoded: {why} ({rr.summary()})"
                elif not have[i]:
                    error = f"no estimate of this query in time ({rr.summary()})"
                release(
                    i,
                    functools.partial(
                        _answer,
                        q,
                        i,
                        batch,
                        batch_id,
                        t_dispatch,
                        now,
                        value=None if error else value[i],
                        error=error,
                        status=status,
                        workers_answered=rr.answered,
                        worker_issues=issues,
                        timed_out=rr.timed_out,
                        round_s=rr.elapsed,
                        source="" if error else "decoder",
                    ),  # fmt: skip
                )
        finally:
            self._slots.release()

    def _on_result(self, batch, batch_id, t_dispatch, owner, state, release, worker, y, t):
        """A valid result arrived: release every query whose own estimate is now ready.

        Its own output if ``worker`` is a systematic copy of it; for exact codes
        (``code.is_exact``), the decoded estimate of every query ``code.available`` says is
        decodable from the results so far (ParM: the parity plus the other ``k − 1``).
        """
        now = time.monotonic()
        with state["lock"]:
            if state["y"] is None:
                y0 = np.asarray(y)
                state["y"] = np.zeros((len(state["mask"]), *y0.shape), y0.dtype)
            state["y"][worker] = y
            state["mask"][worker] = True
            ys, mask = state["y"].copy(), state["mask"].copy()
            pending = [i for i in range(len(batch)) if not state["done"][i]]
        if not pending:
            return
        ready: dict[int, tuple[np.ndarray, str]] = {}
        if owner[worker] >= 0:
            ready[min(int(owner[worker]), len(batch) - 1)] = (np.array(y), f"worker {worker}")
        if self._exact:
            avail = np.asarray(code_available(self.code, mask))
            more = [i for i in pending if avail[i] and i not in ready]
            if more:
                value, status, have = self._decode_round(ys, mask)
                if status == 0:
                    ready.update({i: (value[i], "decoder") for i in more if have[i]})
        seen = tuple(int(i) for i in np.flatnonzero(mask))
        for slot, (value, source) in ready.items():
            release(
                slot,
                functools.partial(
                    _answer,
                    batch[slot],
                    slot,
                    batch,
                    batch_id,
                    t_dispatch,
                    now,
                    value=value,
                    error=None,
                    workers_answered=seen,
                    round_s=now - t_dispatch,
                    source=source,
                ),  # fmt: skip
            )

    # -- shutdown -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop taking queries, answer every queued one, and wait for the rounds in flight."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._batcher.join()
        self._pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
