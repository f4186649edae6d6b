"""Status flags: value problems are data.

Every kernel that can meet a *value* problem (too few live workers, a non-finite output from a
live worker, non-increasing nodes, a negative λ seen only under tracing) returns a ``status``
alongside its value. Flags combine with bitwise OR; ``Status.OK`` (0) means the value is valid.
Under ``jax.vmap`` each straggler pattern carries its own status.

Policy, shared by every public function:

* *Static* problems (wrong shapes or ranks, non-boolean masks, K < 2 or N < 2) raise
  ``ValueError``/``TypeError`` at trace time.
* *Value* problems raise :class:`GCCValueError` when the call is eager (concrete inputs). Under
  ``jit``/``vmap`` they cannot raise; the value is then filled with NaN **and** flagged in the
  status returned by the ``*_with_status`` variants (and by ``Spline.status``).
"""

import enum
import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


class Status(enum.IntFlag):
    """Bit flags describing why a result is not valid (``OK`` = 0 = valid)."""

    OK = 0
    TOO_FEW_LIVE = 1
    NONFINITE_DATA = 2
    BAD_NODES = 4
    NEGATIVE_LAM = 8
    NONFINITE_RESULT = 16
    BELOW_RECOVERY_THRESHOLD = 32
    TOO_MANY_ERASURES = 64
    BAD_WEIGHTS = 128
    ILL_CONDITIONED = 256
    BAD_ARGUMENT = 512


_MESSAGES = {
    Status.TOO_FEW_LIVE: (
        "too few live workers: fewer than 2 live points for a smoothing spline (SplineCode), "
        "none for BerrutCode or LagrangeCode"
    ),
    Status.NONFINITE_DATA: "NaN or Inf in the output of a live (non-straggling) worker",
    Status.BAD_NODES: "nodes are not strictly increasing and finite (unsorted or duplicate nodes)",
    Status.NEGATIVE_LAM: "the smoothing parameter lam is negative or not finite",
    Status.NONFINITE_RESULT: "the solve produced a non-finite result (ill-conditioned system)",
    Status.BELOW_RECOVERY_THRESHOLD: (
        "fewer live workers than the code's recovery threshold "
        "(LagrangeCode needs (K−1)·deg f + 1 live workers)"
    ),
    Status.TOO_MANY_ERASURES: (
        "more outputs missing than the code's redundancy r (ParityModelCode and LearnedCode "
        "recover at most r unavailable outputs)"
    ),
    Status.BAD_WEIGHTS: "a weight is negative, NaN or Inf (weights must be finite and >= 0)",
    Status.ILL_CONDITIONED: (
        "the kernel (Gram-form) solve is too ill-conditioned for this precision (its estimated "
        "error exceeds the tolerance); use solver='kalman'"
    ),
    Status.BAD_ARGUMENT: (
        "an argument is outside its domain (NaN/Inf query points `tq`, `dof` outside "
        "(2, n_live], non-finite targets f(x))"
    ),
}


class GCCValueError(ValueError):
    """A value problem found in an eager call (see :class:`Status`)."""


def describe_status(status, code=None) -> str:
    """Human-readable description of a (scalar) status value.

    Args:
        status: a status value (an int, a NumPy or JAX scalar).
        code: optionally the :class:`gcc_jax.AbstractCode` that produced it; each flag's
            message is then the code's ``status_message(flag)`` (naming the code and what it
            needs, e.g. how many live workers) where it gives one.

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.describe_status(0)
        'ok'
        >>> code = gcc.BerrutCode.chebyshev(num_inputs=2, num_workers=4)
        >>> gcc.describe_status(gcc.Status.TOO_FEW_LIVE, code)
        'no live worker (BerrutCode needs at least 1 live worker to decode)'
    """
    s = Status(int(status))
    if s == Status.OK:
        return "ok"
    parts = []
    for flag, msg in _MESSAGES.items():
        if s & flag:
            parts.append((code.status_message(flag) if code is not None else None) or msg)
    return "; ".join(parts)


def is_concrete(*xs) -> bool:
    """True when none of ``xs`` is a JAX tracer (the call is eager)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(xs))


def raise_if_bad(status, what: str, code=None) -> None:
    """In eager mode, raise :class:`GCCValueError` if any entry of ``status`` is not OK.

    ``code`` (optional) makes the message name the code and its requirement (see
    :func:`describe_status`).
    """
    if not is_concrete(status):
        return
    st = np.asarray(status)
    if not st.any():
        return
    bad = np.flatnonzero(st.reshape(-1))
    first = int(st.reshape(-1)[bad[0]])
    where = "" if st.ndim == 0 else f" for {bad.size} of {st.size} patterns (first: index {bad[0]})"
    raise GCCValueError(f"{what}: {describe_status(first, code)}{where}")


def combine(*flags) -> jax.Array:
    """Bitwise OR of the flags whose condition holds: ``combine((cond, Status.X), …)``."""
    out = jnp.zeros((), jnp.int32)
    for cond, flag in flags:
        out = out | jnp.where(cond, jnp.int32(int(flag)), jnp.int32(0))
    return out


class _Messages:
    """Per-flag messages in the place of a code's :meth:`status_message` (for
    :func:`describe_status`): what a function says about a flag, naming its arguments."""

    def __init__(self, messages: dict):
        self.messages = messages

    def status_message(self, flag) -> str | None:
        return self.messages.get(flag)


def raising_form(
    what: str,
    split: Callable[[Any], tuple[Any, Any]],
    check: Callable[..., None] | None = None,
    returns: Any = None,
    messages: dict | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: the raising form of a function that reports value problems as a status.

    The decorated function (its signature and docstring are the public ones) never raises on
    value problems. The decorator returns a function with the same signature and docstring
    that, in an eager call, first runs ``check`` on the same arguments (precise messages for
    the values it can judge), then calls the decorated function, splits its result into
    ``(value, status)`` with ``split``, raises :class:`GCCValueError` naming ``what`` on a bad
    status, and returns the value. Under ``jit``/``vmap`` nothing raises (the value is NaN, as
    the status says). The decorated function stays available as the raising form's
    ``with_status`` attribute, named ``what + "_with_status"``, for callers that need the
    status as data. The decorated function's return annotation is what it returns (the value
    with its status); ``returns``, when given, is the raising form's (the value alone).
    ``messages`` (``{Status flag: text}``) replaces a flag's generic message in the error, so
    that it names the argument at fault (``{Status.BAD_ARGUMENT: "`f(x)` is not finite"}``).

    Example:
        >>> import jax.numpy as jnp
        >>> @raising_form("safe_log", lambda out: out)
        ... def safe_log(x):
        ...     x = jnp.asarray(x)
        ...     bad = jnp.any(x <= 0)
        ...     return jnp.where(bad, jnp.nan, jnp.log(x)), combine((bad, Status.NONFINITE_DATA))
        >>> float(safe_log(1.0)), int(safe_log.with_status(-1.0)[1])
        (0.0, 2)
    """

    described = None if messages is None else _Messages(messages)

    def wrap(status_form: Callable) -> Callable:
        @functools.wraps(status_form)
        def raising(*args, **kwargs):
            if check is not None and is_concrete(args, kwargs):
                check(*args, **kwargs)
            value, status = split(status_form(*args, **kwargs))
            raise_if_bad(status, what, described)
            return value

        @functools.wraps(status_form)
        def with_status(*args, **kwargs):
            return status_form(*args, **kwargs)

        with_status.__name__ = with_status.__qualname__ = f"{what}_with_status"
        if returns is not None:
            signature = inspect.signature(status_form)
            raising.__signature__ = signature.replace(return_annotation=returns)
        with_status.__doc__ = (
            f"Like :func:`{what}` but never raises on value problems: they are reported in the "
            "returned status (and the value is NaN). Use this form under ``jit``/``vmap`` when "
            "each straggler pattern must carry its own status."
        )
        raising.with_status = with_status
        return raising

    return wrap
