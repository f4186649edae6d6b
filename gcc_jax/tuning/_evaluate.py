"""Held-out evaluation of a code on jobs of inputs, for any straggler model."""

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .._core.checks import as_int, as_masks, check_instance, check_key
from .._core.status import GCCValueError, Status
from .._core.types import ArrayLike, Bool, Float, PRNGKeyArray
from ..codes import AbstractCode
from ..evaluation import (
    DEFAULT_SEARCH,
    MaskEvaluator,
    SearchBudget,
    as_budget,
    search_worst_case,
)
from ._loss import job_pattern_loss, targets, worker_outputs
from ._stragglers import StragglerModel

__all__ = ["Evaluation", "evaluate"]


class Evaluation(NamedTuple):
    """Loss of a code on held-out jobs and patterns (:func:`evaluate`).

    Attributes:
        loss: mean loss over the decodable patterns (``exact``/``iid``), or the largest loss
            found (``worst``; exact when all ``C(N, S)`` patterns were decoded, otherwise a
            lower bound from the local search).
        ci95: half-width of the 95% normal confidence interval of the mean (0 for ``worst``).
        failed: patterns that could not be decoded (fewer than 2 live workers).
        num_patterns: patterns decoded.
        worst_mask: the worst pattern (``worst`` only, else ``None``).
        exhaustive: ``worst`` only: every pattern was decoded.
        losses: random models only: the loss of every decodable pattern, in the order drawn
            (the same key gives the same patterns, so two codes' arrays are paired).
    """

    loss: float
    ci95: float
    failed: int
    num_patterns: int
    worst_mask: Bool[np.ndarray, " n"] | None = None
    exhaustive: bool = False
    losses: Float[np.ndarray, " p"] | None = None


def check_jobs(x: ArrayLike, code: AbstractCode, name: str = "x") -> jax.Array:
    """``x`` must be ``(B, K, ...)``: ``B ≥ 1`` jobs of ``K`` inputs."""
    x = jnp.asarray(x)
    k = code.num_inputs
    if x.ndim < 2 or x.shape[1] != k or x.shape[0] < 1:
        raise ValueError(
            f"`{name}` must have shape (B, {k}, ...): B jobs of K={k} inputs each; got "
            f"{x.shape} (add a leading axis for a single job: x[None])"
        )
    return x


@functools.partial(jax.jit, static_argnums=1)
def job_outputs(code: AbstractCode, f: Callable, xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Workers' outputs ``(N, B, *out)`` and targets ``(K, B, *out)`` of ``B`` jobs."""
    return worker_outputs(code, f, xs), targets(f, xs)


def _select_pattern_loss(select, code, yt, fx, mask):
    """Loss of one pattern when ``λ_dec`` is chosen per job by ``select`` (mean over jobs)."""

    def job(y_b, fx_b):
        choice = select(code, y_b, mask)
        dec = dataclasses.replace(code, lam_dec=choice.lam).decode_with_status(y_b, mask)
        status = dec.status | choice.status
        ok = status == 0
        err = jnp.where(ok, dec.value - fx_b, 0.0).reshape(-1)
        return jnp.where(ok, jnp.sum(err * err) / fx_b.shape[0], jnp.nan), status

    loss, status = jax.vmap(job, in_axes=(1, 1))(yt, fx)
    status = jnp.bitwise_or.reduce(status)
    return jnp.where(status == 0, jnp.mean(loss), jnp.nan), status


@functools.lru_cache(maxsize=64)
def _select_per_mask(select: Callable) -> Callable:
    """One hashable per-mask function per rule, so the evaluator compiles once per rule."""
    return functools.partial(_select_pattern_loss, select)


def make_evaluator(code, f, xs, *, chunk: int, select=None) -> MaskEvaluator:
    """The one mask evaluator over the workers' outputs of jobs ``xs`` ``(B, K, ...)``."""
    yt, fx = job_outputs(code, f, xs)
    if not bool(jnp.all(jnp.isfinite(fx))):
        raise GCCValueError("`f(x)` on the uncoded inputs is not finite; the loss is undefined")
    if select is None:
        return MaskEvaluator(code, yt, fx, per_mask=job_pattern_loss, chunk_size=chunk)
    # a per-pattern λ rule compiles slowly (a grid of fits per job): one block shape for all
    return MaskEvaluator(
        code, yt, fx, per_mask=_select_per_mask(select), chunk_size=chunk, one_shape=True
    )


def search_chunk(
    n: int, model: StragglerModel, search: SearchBudget, chunk_size: int, num: int
) -> int:
    """A chunk size that wastes little padding: the patterns per search step, or ``num``."""
    if model.kind != "worst":
        return max(1, min(chunk_size, num))
    return search.chunk_size(n, model.stragglers, chunk_size)


def summarise(
    ev: MaskEvaluator,
    model: StragglerModel,
    masks: np.ndarray,
    *,
    key: PRNGKeyArray,
    search: SearchBudget,
    candidates: np.ndarray | None = None,
) -> Evaluation:
    """Mean over ``masks`` (random models) or the worst-case search (``worst``)."""
    n = masks.shape[1]
    if model.kind == "worst":
        wc = search_worst_case(ev, n, model.stragglers, key=key, search=search)
        loss, mask, count = wc.loss, np.asarray(wc.mask), int(wc.num_evaluated)
        if candidates is not None and len(candidates):
            extra, extra_status = ev(np.asarray(candidates, bool))
            extra = np.where((extra_status != 0) | ~np.isfinite(extra), np.inf, extra)
            count += len(candidates)
            if np.max(extra) > loss:
                loss, mask = float(np.max(extra)), np.asarray(candidates)[int(np.argmax(extra))]
        if not np.isfinite(loss):
            raise GCCValueError(f"a worst-case pattern could not be decoded (status {wc.status})")
        return Evaluation(float(loss), 0.0, 0, count, mask, wc.exhaustive)
    loss, status = ev(masks)
    too_few = status == int(Status.TOO_FEW_LIVE)
    ok = status == 0
    if np.any(~ok & ~too_few):
        raise GCCValueError(
            f"{int(np.sum(~ok & ~too_few))} patterns failed to decode for a reason other than "
            "too few live workers (non-finite worker outputs or a failed solve)"
        )
    if not ok.any():
        return Evaluation(float("nan"), float("nan"), int(too_few.sum()), masks.shape[0])
    vals = loss[ok]
    ci = 1.96 * float(np.std(vals)) / math.sqrt(vals.size) if vals.size > 1 else 0.0
    return Evaluation(float(np.mean(vals)), ci, int(too_few.sum()), masks.shape[0], losses=vals)


def evaluate(
    code: AbstractCode,
    f: Callable,
    x: Float[ArrayLike, "b k ..."],
    *,
    key: PRNGKeyArray,
    straggler_model: StragglerModel,
    num_masks: int = 256,
    select_lam_dec: Callable | None = None,
    search: SearchBudget | Mapping[str, int] | None = None,
    candidates: Bool[ArrayLike, "c n"] | None = None,
    chunk_size: int = 256,
) -> Evaluation:
    """The loss of ``code`` on jobs ``x`` under ``straggler_model`` (held-out evaluation).

    The loss of a pattern is the mean over the ``B`` jobs of ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²``
    (all jobs see the same pattern). Random models (``exact``, ``iid``) average it over
    ``num_masks`` patterns drawn with ``key``; ``worst`` reports the largest loss over all
    ``C(N, S)`` patterns when there are at most ``search.max_exhaustive`` of them, else over
    the contiguous blocks and a local search (:func:`gcc_jax.worst_case_mask`'s, with the
    budget ``search``; default :data:`gcc_jax.evaluation.DEFAULT_SEARCH`).

    Args:
        code: any gcc_jax code.
        f: worker function, one input → one output.
        x: ``B`` jobs of ``K`` inputs, shape ``(B, K, ...)``.
        key: PRNG key of the patterns and of the search.
        straggler_model: a :class:`StragglerModel`.
        num_masks: patterns for the random models.
        select_lam_dec: optional per-pattern rule ``(code, y, mask) -> LamChoice`` such as
            :func:`gcv_lam_dec`; each job and pattern is then decoded with its own ``λ_dec``
            (SplineCode only).
        search: a :class:`gcc_jax.evaluation.SearchBudget`, or a mapping of the fields that
            differ from :data:`gcc_jax.evaluation.DEFAULT_SEARCH`.
        candidates: ``worst`` only: extra patterns ``(C, N)`` (exactly ``S`` stragglers each)
            decoded besides the search, e.g. the worst patterns found for other codes; the
            result is the largest loss over both.
        chunk_size: patterns decoded per compiled call.

    Returns:
        :class:`Evaluation`.

    Raises:
        GCCValueError: ``f(x)`` is not finite, or a pattern fails to decode for a reason other
            than too few live workers.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.tuning import StragglerModel, evaluate
        >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=10)
        >>> x = jnp.linspace(-1.0, 1.0, 6).reshape(2, 3, 1)
        >>> ev = evaluate(code, jnp.sin, x, key=jax.random.key(0),
        ...               straggler_model=StragglerModel.worst(2))
        >>> ev.exhaustive, ev.num_patterns, bool(ev.loss > 0)
        (True, 45, True)
    """
    check_instance(straggler_model, StragglerModel, "straggler_model")
    xs = check_jobs(x, code)
    n = code.num_workers
    straggler_model.check(n)
    num_masks = as_int(num_masks, "num_masks", 1)
    chunk_size = as_int(chunk_size, "chunk_size", 1)
    search = as_budget(search, DEFAULT_SEARCH)
    k_masks, k_search = jr.split(check_key(key))
    masks = np.asarray(straggler_model.sample(k_masks, n, num=num_masks))
    if select_lam_dec is not None:  # per-job λ choices: memory grows with jobs × grid;
        chunk = min(chunk_size, 32)  # one shape for every batch (see make_evaluator)
    else:
        chunk = search_chunk(n, straggler_model, search, chunk_size, num_masks)
    ev = make_evaluator(code, f, xs, chunk=chunk, select=select_lam_dec)
    if candidates is not None:
        candidates = np.asarray(as_masks(candidates, n, "candidates"))
        dead = (~candidates).sum(axis=1)
        if np.any(dead != straggler_model.stragglers):
            raise ValueError(
                f"`candidates` must have exactly {straggler_model.stragglers} stragglers per "
                f"row; got rows with {sorted(set(dead.tolist()))}"
            )
    return summarise(ev, straggler_model, masks, key=k_search, search=search, candidates=candidates)
