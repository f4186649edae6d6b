"""The executor interface: dispatch ``N`` coded inputs, collect what returns in time.

An executor runs one *round*: worker ``n`` evaluates ``f`` on coded input ``x~_n``; the master
waits until its wait rule holds (e.g. ``N − S`` valid results — ``ray.wait(num_returns=N−S)``)
or the round's timeout passes, whichever is first, and returns a :class:`RoundResult`:
the outputs, the boolean mask the decoders take (``True`` = a valid result arrived in time)
and, per worker, what happened. Results arriving after the cut-off are discarded.

Results are checked *before* decoding: a result that is not finite, has the wrong shape, or
fails the caller's ``validate`` is treated as a straggler (mask ``False``) and does not count
towards the wait rule, so the master keeps waiting for a good one. A caller that wants each
valid result as it arrives (to release a query before the round ends) passes ``on_result``.
"""

import abc
import dataclasses
import enum
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from .._core.checks import as_int, as_real
from .._core.types import Bool, Float, Int
from ..codes import AbstractCode, check_code

__all__ = [
    "Executor",
    "OnResult",
    "Outcome",
    "RoundCounter",
    "RoundRecord",
    "RoundResult",
    "RoundSpec",
    "RoundRobinExecutor",
    "WaitFor",
    "default_wait_for",
    "probability_check",
]

WaitFor = int | Callable[[np.ndarray], bool]
"""How long a round waits: a number of valid results, or a predicate on the boolean mask."""

OnResult = Callable[[int, np.ndarray, float], None]
"""``on_result(worker, output, latency_s)``: called once per valid result, in arrival order,
from the thread running the round, as soon as the result is in (before the cut-off)."""


class Outcome(enum.IntEnum):
    """What happened to one worker in one round."""

    OK = 0
    """Returned a valid result before the cut-off."""
    LATE = 1
    """No result by the cut-off (a straggler); a later result is discarded."""
    NONFINITE = 2
    """Returned NaN or Inf: treated as a straggler."""
    INVALID = 3
    """Returned something of the wrong shape or that ``validate`` rejected: a straggler."""
    ERROR = 4
    """The worker function raised."""
    DEAD = 5
    """The worker process died (it is restarted) or is out of restarts."""


@dataclasses.dataclass(frozen=True)
class RoundResult:
    """The outcome of one round on ``N`` workers.

    Attributes:
        round_id: the round's id (it seeds the injected delays and faults).
        outputs: ``(n, *m)`` results; rows of workers that are not ``OK`` are zero.
        mask: ``(n,)`` booleans, ``True`` = a valid result arrived in time (the decoder's mask).
        outcomes: ``(n,)`` :class:`Outcome` codes.
        latencies: ``(n,)`` seconds from dispatch to each worker's answer (or to the detection
            of its failure); ``inf`` for workers that had not answered by the cut-off.
        elapsed: seconds from dispatch to the cut-off.
        rule_met: whether the wait rule held at the cut-off.
        timed_out: whether the round stopped at its timeout with the rule not met.
        messages: a short reason for every worker that is not ``OK``.
        restarted: workers found dead and restarted during this round (their death seen in
            it, or in a late task of an earlier round).
    """

    round_id: int
    outputs: Float[np.ndarray, "n *m"]
    mask: Bool[np.ndarray, " n"]
    outcomes: Int[np.ndarray, " n"]
    latencies: Float[np.ndarray, " n"]
    elapsed: float
    rule_met: bool
    timed_out: bool
    messages: dict[int, str]
    restarted: tuple[int, ...] = ()

    @property
    def num_workers(self) -> int:
        return int(self.mask.shape[0])

    @property
    def answered(self) -> tuple[int, ...]:
        """Workers with a valid result in time."""
        return tuple(int(i) for i in np.flatnonzero(self.mask))

    def workers_with(self, outcome: Outcome) -> tuple[int, ...]:
        """Workers whose outcome is ``outcome``."""
        return tuple(int(i) for i in np.flatnonzero(self.outcomes == int(outcome)))

    def issues(self) -> dict[int, str]:
        """``{worker: "late" | "nonfinite: ..." | ...}`` for every worker that is not OK."""
        out = {}
        for i in np.flatnonzero(self.outcomes != int(Outcome.OK)):
            name = Outcome(int(self.outcomes[i])).name.lower()
            msg = self.messages.get(int(i), "")
            out[int(i)] = f"{name}: {msg}" if msg else name
        return out

    def summary(self) -> str:
        """One line: how many answered, how long it took, and who misbehaved."""
        parts = [f"{int(self.mask.sum())}/{self.num_workers} workers answered"]
        parts.append(f"cut-off after {self.elapsed * 1e3:.1f} ms")
        if self.timed_out:
            parts.append("timed out")
        for outcome in Outcome:
            if outcome is Outcome.OK:
                continue
            who = self.workers_with(outcome)
            if who:
                parts.append(f"{outcome.name.lower()}: {','.join(map(str, who))}")
        if self.restarted:
            parts.append(f"restarted: {','.join(map(str, self.restarted))}")
        return "; ".join(parts)


class _CountRule:
    """``True`` once ``need`` results are valid (the ``N − S`` rule)."""

    def __init__(self, need: int):
        self.need = need

    def __call__(self, mask: np.ndarray) -> bool:
        return int(np.count_nonzero(mask)) >= self.need

    def __repr__(self) -> str:
        return f"wait for {self.need}"


@jax.jit
def code_available(code: AbstractCode, mask: Any) -> jax.Array:
    """``code.available(mask)``, jitted (one compilation per code structure)."""
    return code.available(mask)


class _EveryInputAvailable:
    """``True`` once ``code.available(mask)`` holds for every input (the contract's rule).

    Uncoded: every worker; replication: one copy of every input; ParM: ``k`` of ``k + 1``;
    LCC: its recovery threshold.
    """

    def __init__(self, code: AbstractCode):
        self.code = code
        self.num_inputs = int(code.num_inputs)
        self.num_workers = int(code.num_workers)

    def __call__(self, mask: np.ndarray) -> bool:
        return bool(np.all(np.asarray(code_available(self.code, np.asarray(mask, bool)))))

    def __repr__(self) -> str:
        if self.num_workers == self.num_inputs:
            return f"wait for all {self.num_inputs}"
        return "wait until every input is available"


def as_rule(wait_for: WaitFor, num_workers: int) -> tuple[Callable[[np.ndarray], bool], int]:
    """``(predicate on the mask, number of results it needs at least)`` for a wait rule."""
    if callable(wait_for):
        return wait_for, 1
    count = as_int(wait_for, "wait_for (results to wait for, or a predicate)", 1, num_workers)
    return _CountRule(count), count


def default_wait_for(code: AbstractCode, stragglers: int | None = None) -> WaitFor:
    """The wait rule that matches a code (any :class:`gcc_jax.AbstractCode`).

    * ``stragglers=S`` given: wait for ``N − S`` valid results (GCC, BACC, LCC, ParM …).
    * Otherwise, for *exact* codes (the class constant :attr:`gcc_jax.AbstractCode.is_exact`:
      uncoded, replication, ParM): wait until ``code.available(mask)`` holds for every input —
      all ``K`` workers for the uncoded scheme, one copy of every input for replication,
      ``k`` of ``k + 1`` for ParM.
    * Otherwise (GCC, BACC, LCC, robust decoders): wait for all ``N``.

    Returns:
        An int or a predicate ``mask -> bool`` for :meth:`Executor.run_round`.

    Example:
        >>> import gcc_jax as gcc
        >>> from gcc_jax.distributed import default_wait_for
        >>> default_wait_for(gcc.SplineCode.chebyshev(num_inputs=4, num_workers=8), 2)
        6
        >>> default_wait_for(gcc.SplineCode.chebyshev(num_inputs=4, num_workers=8))
        8
        >>> default_wait_for(gcc.UncodedCode(num_inputs=4))
        wait for all 4
    """
    code = check_code(code)
    n = int(code.num_workers)
    if stragglers is not None:
        return n - as_int(stragglers, "stragglers", 0, n - 1)
    return _EveryInputAvailable(code) if code.is_exact else n


def systematic_workers(code: AbstractCode, input_shape: Sequence[int], dtype: Any) -> np.ndarray:
    """For each worker, the input whose own result it computes (``-1``: a coded input).

    Worker ``n`` is a systematic copy of input ``k`` when its coded input *is* ``x_k``: found
    once per code and query shape by encoding a random probe and comparing rows exactly.
    Uncoded and replication workers, and ParM's base workers, are; GCC's and BACC's (whose
    nodes differ from the inputs' nodes) and ParM's parity worker are not. A systematic
    worker's result is ``f(x_k)`` itself, so the query can be answered when it arrives.

    Example:
        >>> import gcc_jax as gcc
        >>> from gcc_jax.distributed._executor import systematic_workers
        >>> systematic_workers(gcc.ReplicationCode(num_inputs=2, num_workers=5), (3,), "float32")
        array([0, 1, 0, 1, 0])
    """
    k, n = int(code.num_inputs), int(code.num_workers)
    rng = np.random.default_rng(0x5157)
    probe = rng.standard_normal((k, *tuple(input_shape))).astype(np.dtype(dtype))
    xt = np.asarray(code.encode(jax.numpy.asarray(probe)))
    out = np.full(n, -1, np.int64)
    for i in range(n):
        for j in range(k):
            if xt[i].shape == probe[j].shape and np.array_equal(xt[i], probe[j]):
                out[i] = j
                break
    return out


def describe_rule(wait_for: WaitFor) -> str:
    """A short text for a wait rule (``"wait for 6"``, ``"wait for one copy of every input"``)."""
    if callable(wait_for):
        text = repr(wait_for)
        return text if not text.startswith("<") else "custom wait rule"
    return f"wait for {int(wait_for)}"


def probability_check(atol: float = 1e-3) -> Callable[[np.ndarray], bool]:
    """A ``validate`` for softmax outputs: entries in ``[−atol, 1 + atol]`` summing to 1 ± atol.

    Catches workers returning finite garbage in place of a probability vector; a garbage vector
    that happens to be a valid probability vector cannot be told apart from a real answer.

    Example:
        >>> import numpy as np
        >>> from gcc_jax.distributed import probability_check
        >>> ok = probability_check()
        >>> ok(np.array([0.2, 0.8])), ok(np.array([3.0, -2.0]))
        (True, False)
    """
    atol = float(atol)
    if not (math.isfinite(atol) and atol >= 0):
        raise ValueError(f"`atol` must be finite and >= 0; got {atol}")

    def check(y: np.ndarray) -> bool:
        y = np.asarray(y)
        return bool(
            np.all(y >= -atol) and np.all(y <= 1 + atol) and abs(float(np.sum(y)) - 1.0) <= atol
        )

    return check


def classify_output(
    y: Any,
    shape: tuple[int, ...],
    validate: Callable[[np.ndarray], bool] | None,
) -> tuple[Outcome, np.ndarray | None, str]:
    """Check one worker's result: ``(OK, array, "")`` or ``(NONFINITE|INVALID, None, reason)``."""
    try:
        arr = np.asarray(y, dtype=float)
    except (TypeError, ValueError):
        return Outcome.INVALID, None, f"returned a {type(y).__name__}, not a numeric array"
    if arr.shape != tuple(shape):
        return Outcome.INVALID, None, f"returned shape {arr.shape}, expected {tuple(shape)}"
    if not np.all(np.isfinite(arr)):
        return Outcome.NONFINITE, None, "returned NaN or Inf"
    if validate is not None:
        try:
            good = bool(validate(arr))
        except Exception as err:  # a validator that raises rejects the result
            return Outcome.INVALID, None, f"validate raised {type(err).__name__}: {err}"
        if not good:
            return Outcome.INVALID, None, "rejected by validate"
    return Outcome.OK, arr, ""


def check_timeout(timeout_s: float) -> float:
    """A round's timeout: finite seconds ``> 0`` (a round must end)."""
    return as_real(timeout_s, "timeout_s", 0.0, lo_open=True)


class RoundSpec(NamedTuple):
    """One round's checked settings, as :meth:`Executor.run_round` hands them to ``_run``.

    Attributes:
        rule: the wait rule as a predicate on the boolean mask of valid results.
        need: the number of valid results the rule needs at least (``1`` for a predicate).
        timeout_s: the round's deadline in seconds after dispatch (finite, ``> 0``).
        round_id: the caller's round id, or ``None`` for the executor's next one.
        on_result: the caller's ``on_result`` (or ``None``).
    """

    rule: Callable[[np.ndarray], bool]
    need: int
    timeout_s: float
    round_id: int | None
    on_result: OnResult | None


class RoundCounter:
    """Thread-safe round ids: the next unused id, or the caller's (then later ids follow it)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 0

    def take(self, round_id: int | None) -> int:
        with self._lock:
            if round_id is None:
                round_id = self._next
            else:
                round_id = as_int(round_id, "round_id", 0)
            self._next = max(self._next, round_id + 1)
            return round_id


@dataclasses.dataclass
class RoundRecord:
    """What one round has collected so far, per worker; :meth:`result` freezes it.

    Every worker starts ``LATE`` with an ``inf`` latency and a zero output row.
    """

    outputs: np.ndarray
    mask: np.ndarray
    outcomes: np.ndarray
    latencies: np.ndarray
    messages: dict[int, str] = dataclasses.field(default_factory=dict)
    restarted: list[int] = dataclasses.field(default_factory=list)

    @classmethod
    def empty(cls, num_workers: int, shape: Sequence[int], dtype: Any) -> "RoundRecord":
        n = num_workers
        return cls(
            outputs=np.zeros((n, *shape), dtype),
            mask=np.zeros(n, bool),
            outcomes=np.full(n, int(Outcome.LATE), np.int8),
            latencies=np.full(n, np.inf),
        )

    def accept(self, worker: int, value: Any, validate, on_result, latency: float) -> bool:
        """Check ``value`` (:func:`classify_output`) and record it; ``True`` when it is valid.

        A valid result fills the worker's row and mask entry, then ``on_result`` (if any) is
        called with it; an invalid one records the reason.
        """
        outcome, arr, msg = classify_output(value, self.outputs.shape[1:], validate)
        self.outcomes[worker] = outcome
        if outcome is not Outcome.OK:
            self.messages[worker] = msg
            return False
        self.outputs[worker] = arr
        self.mask[worker] = True
        if on_result is not None:
            on_result(int(worker), self.outputs[worker], float(latency))
        return True

    def result(self, round_id: int, elapsed: float, rule_met: bool, timed_out: bool):
        """The frozen :class:`RoundResult`."""
        return RoundResult(
            round_id=round_id,
            outputs=self.outputs,
            mask=self.mask,
            outcomes=self.outcomes,
            latencies=self.latencies,
            elapsed=float(elapsed),
            rule_met=bool(rule_met),
            timed_out=bool(timed_out),
            messages=self.messages,
            restarted=tuple(self.restarted),
        )


class Executor(abc.ABC):
    """Runs rounds of ``N`` workers (``LocalExecutor`` in process, ``RayExecutor`` on Ray).

    :meth:`run_round` checks the coded inputs (:meth:`_check_inputs`), the wait rule and the
    timeout, then hands them to the one step a subclass implements, ``_run(xt, spec)`` with a
    :class:`RoundSpec`, which dispatches the round and returns its :class:`RoundResult`. A
    subclass that checks its inputs differently overrides :meth:`_check_inputs`. Executors
    are context managers (``close`` on exit) and safe to call from several threads at once
    (the coded inference service keeps several rounds in flight).
    """

    num_workers: int
    validate: Callable[[np.ndarray], bool] | None = None
    """The check every result passes before it counts (``None``: none)."""

    def run_round(
        self,
        xt: Float[Any, "n *d"],
        *,
        wait_for: WaitFor,
        timeout_s: float = 10.0,
        round_id: int | None = None,
        on_result: OnResult | None = None,
    ) -> RoundResult:
        """Send ``xt[n]`` to worker ``n``, wait per ``wait_for`` or ``timeout_s``, collect.

        Args:
            xt: the ``N`` coded inputs, one row per worker.
            wait_for: number of valid results to wait for (``N − S``), or a predicate on the
                boolean mask of valid results so far.
            timeout_s: the round's deadline in seconds after dispatch (finite): the round ends
                then with whatever arrived (deadline decoding).
            round_id: the round's id, which seeds injected delays and faults (default: the next
                id of this executor's counter).
            on_result: called with ``(worker, output, latency_s)`` for each valid result as it
                arrives, before the cut-off (see :data:`OnResult`).

        Returns:
            A :class:`RoundResult`.
        """
        xt = self._check_inputs(xt)
        rule, need = as_rule(wait_for, self.num_workers)
        return self._run(xt, RoundSpec(rule, need, check_timeout(timeout_s), round_id, on_result))

    def _check_inputs(self, xt: Any) -> Any:
        """The coded inputs as a JAX array with one row per worker."""
        n = self.num_workers
        xt = jax.numpy.asarray(xt)
        if xt.ndim < 1 or xt.shape[0] != n:
            raise ValueError(f"`xt` must have one row per worker (n={n}); got shape {xt.shape}")
        return xt

    @abc.abstractmethod
    def _run(self, xt: Any, spec: RoundSpec) -> RoundResult:
        """Dispatch one round of checked inputs and collect it (see :meth:`run_round`)."""

    def warmup(self, input_shape: Sequence[int], input_dtype: Any) -> jax.ShapeDtypeStruct:
        """Compile what a round runs for inputs of this shape; return one output's shape.

        The default evaluates nothing and returns ``output_shape``/``output_dtype`` if the
        executor has them.

        Raises:
            ValueError: the output shape cannot be known without running a round.
        """
        shape = getattr(self, "output_shape", None)
        if shape is None:
            raise ValueError(f"{type(self).__name__} cannot tell its output shape in advance")
        dtype = getattr(self, "output_dtype", np.result_type(input_dtype, np.float32))
        return jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype))

    def close(self) -> None:
        """Release the workers (no-op by default)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RoundRobinExecutor(Executor):
    """Rounds spread over several executors of ``N`` workers each, in turn (load balancing).

    Round ``r`` runs on ``executors[r mod G]``: ``G`` coding groups, each a disjoint set of
    workers (e.g. views of one Ray pool), as a serving frontend spreads its coding groups over
    a larger cluster. ``warmup`` warms every group; ``close`` closes them all.

    Example:
        >>> import jax.numpy as jnp
        >>> from gcc_jax.distributed import LocalExecutor, RoundRobinExecutor
        >>> ex = RoundRobinExecutor([LocalExecutor(jnp.sin, num_workers=2) for _ in range(3)])
        >>> ex.num_workers, ex.run_round(jnp.zeros(2), wait_for=2).rule_met
        (2, True)
    """

    def __init__(self, executors: Sequence[Executor]):
        executors = list(executors)
        if not executors or not all(isinstance(e, Executor) for e in executors):
            raise TypeError("`executors` must be a non-empty sequence of Executors")
        sizes = {e.num_workers for e in executors}
        if len(sizes) != 1:
            raise ValueError(f"`executors` must have equal num_workers; got {sorted(sizes)}")
        self.executors = executors
        self.num_workers = sizes.pop()
        if all(e.validate is not None for e in executors):  # every group checks its results
            self.validate = executors[0].validate
        for name in ("input_shape", "input_dtype", "output_shape", "output_dtype"):
            value = getattr(executors[0], name, None)
            if value is not None:
                setattr(self, name, value)
        self._lock = threading.Lock()
        self._next = 0

    def _check_inputs(self, xt: Any) -> Any:
        return xt  # the group's executor checks them

    def _run(self, xt: Any, spec: RoundSpec) -> RoundResult:
        """Runs the round on the next executor in turn."""
        with self._lock:
            ex = self.executors[self._next % len(self.executors)]
            self._next += 1
        return ex._run(ex._check_inputs(xt), spec)

    def warmup(self, input_shape, input_dtype):
        """Warm every group; the first group's output shape."""
        outs = [e.warmup(input_shape, input_dtype) for e in self.executors]
        return outs[0]

    def close(self) -> None:
        for e in self.executors:
            e.close()
