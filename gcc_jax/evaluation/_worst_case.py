"""Worst-case straggler patterns: exhaustive search when small, local search otherwise."""

import functools
import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .._core.checks import as_float_array, as_int, check_inputs, check_instance, check_key
from .._core.status import GCCValueError
from .._core.types import Array, ArrayLike, Bool, Float, Int, PRNGKeyArray
from ..codes import AbstractCode, check_code
from ._evaluator import MaskEvaluator, blocks_fn
from ._pipeline import outputs_and_targets as _outputs_and_targets

__all__ = [
    "DEFAULT_SEARCH",
    "LIGHT_SEARCH",
    "THOROUGH_SEARCH",
    "SearchBudget",
    "WorstCase",
    "as_budget",
    "search_worst_case",
    "worst_case_mask",
]


class SearchBudget(NamedTuple):
    """How much work one worst-case search may do (the settings of :func:`worst_case_mask`).

    The search decodes all ``C(N, S)`` patterns when there are at most ``max_exhaustive`` of
    them; otherwise it runs ``restarts`` local-search chains that decode up to ``proposals``
    swap neighbours per step, for at most ``max_iters`` steps, a chain stopping after
    ``patience`` steps without gain. Presets: :data:`THOROUGH_SEARCH` (one search of one
    code, :func:`worst_case_mask`), :data:`DEFAULT_SEARCH` (a search per code of a comparison,
    :func:`gcc_jax.tuning.evaluate`, :func:`gcc_jax.tuning.grid_search`) and
    :data:`LIGHT_SEARCH` (searches repeated inside a loop: :func:`gcc_jax.tuning.tune`, and
    :func:`worst_case_adversaries`, where each candidate is a whole attack).

    Example:
        >>> from gcc_jax.evaluation import DEFAULT_SEARCH, SearchBudget
        >>> DEFAULT_SEARCH == SearchBudget()
        True
        >>> DEFAULT_SEARCH._replace(max_exhaustive=0).chunk_size(20, 3, 1024)
        408
    """

    max_exhaustive: int = 10_000
    restarts: int = 8
    proposals: int = 128
    max_iters: int = 25
    patience: int = 3

    def check(self) -> "SearchBudget":
        """The budget with every field checked: integers, ``restarts``, ``proposals`` and
        ``patience`` at least 1, ``max_exhaustive`` and ``max_iters`` at least 0."""
        return SearchBudget(
            *(
                as_int(v, name, 0 if name in ("max_exhaustive", "max_iters") else 1)
                for name, v in zip(self._fields, self, strict=True)
            )
        )

    def chunk_size(self, n: int, s: int, most: int) -> int:
        """Masks per compiled call that waste little padding: every pattern (rounded up to a
        power of two) when the search is exhaustive, else one local-search step of all
        chains; at most ``most``."""
        total = math.comb(n, s)
        if total <= self.max_exhaustive:
            return min(most, 1 << max(total - 1, 0).bit_length())
        return min(most, self.restarts * min(s * (n - s), self.proposals))


#: one search of one code (:func:`worst_case_mask`)
THOROUGH_SEARCH = SearchBudget(
    max_exhaustive=20_000, restarts=8, proposals=256, max_iters=100, patience=5
)
#: one search per code of a comparison (:func:`gcc_jax.tuning.evaluate`, ``grid_search``)
DEFAULT_SEARCH = SearchBudget()
#: searches repeated inside a loop (:func:`gcc_jax.tuning.tune`, worst-case adversaries)
LIGHT_SEARCH = SearchBudget(
    max_exhaustive=2_000, restarts=4, proposals=64, max_iters=10, patience=2
)


def as_budget(
    search: SearchBudget | Mapping[str, int] | None, default: SearchBudget
) -> SearchBudget:
    """``search`` as a checked :class:`SearchBudget`: ``None`` is ``default``; a mapping
    overrides some fields of ``default`` (e.g. ``{"max_exhaustive": 0}``)."""
    if search is None:
        return default.check()
    if isinstance(search, SearchBudget):
        return search.check()
    check_instance(search, Mapping, "search", "SearchBudget (or a mapping of its fields)")
    unknown = sorted(set(search) - set(SearchBudget._fields))
    if unknown:
        raise ValueError(
            f"`search` has unknown settings {unknown}; the fields are {SearchBudget._fields}"
        )
    return default._replace(**search).check()


class WorstCase(NamedTuple):
    """Result of :func:`worst_case_mask`.

    Attributes:
        mask: the worst pattern found, boolean ``(N,)`` with exactly ``S`` False entries.
        loss: its loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` (``inf`` if it cannot be decoded).
        status: its :class:`gcc_jax.Status` (non-zero: the code cannot decode that pattern).
        exhaustive: True when every ``S``-subset was evaluated (``loss`` is the exact maximum);
            False for the heuristic search (``loss`` is a lower bound on the true worst case).
        num_evaluated: number of patterns decoded (the local search may decode one twice).
    """

    mask: Bool[np.ndarray, " n"]
    loss: float
    status: int
    exhaustive: bool
    num_evaluated: int


def _combination_masks(n: int, s: int, total: int, chunk: int):
    """All ``C(n, s)`` masks with exactly ``s`` False entries, yielded in blocks of ``chunk``."""
    combos = itertools.combinations(range(n), s)
    done = 0
    while done < total:
        size = min(chunk, total - done)
        block = np.ones((size, n), bool)
        for row, dead in zip(range(size), combos, strict=False):
            block[row, list(dead)] = False
        done += size
        yield block


def _contiguous(n: int, s: int) -> np.ndarray:
    start = np.arange(n - s + 1)[:, None]
    idx = np.arange(n)[None, :]
    return ~((idx >= start) & (idx < start + s))


def worst_case_mask(
    code: AbstractCode,
    f: Callable | None = None,
    x: ArrayLike | None = None,
    *,
    stragglers: int,
    outputs: tuple[ArrayLike, ArrayLike] | None = None,
    key: PRNGKeyArray | None = None,
    search: SearchBudget | Mapping[str, int] | None = None,
    chunk_size: int = 1024,
) -> WorstCase:
    """The straggler pattern with ``S`` stragglers that maximises the loss (or the worst found).

    The loss of a pattern ``F`` is the paper's ``(1/K) Σ_k ‖f^_F(x_k) − f(x_k)‖²`` (the same as
    :func:`gcc_jax.monte_carlo_loss`); a pattern the code cannot decode (non-zero status) counts
    as ``+inf``. The workers run once (``code.worker_outputs(f, x)``), or their outputs are
    given (``outputs=(y~, f(x))``, e.g. a DNN's logits computed in batches elsewhere); every
    candidate pattern is then decoded by the one mask evaluator (:class:`gcc_jax.MaskEvaluator`).

    The search's settings are a :class:`SearchBudget` (default :data:`THOROUGH_SEARCH`):

    * **Exhaustive** when ``C(N, S) ≤ max_exhaustive``: every ``S``-subset is decoded and the
      result is the exact worst case (``exhaustive=True``).
    * **Heuristic** otherwise (``exhaustive=False``, the loss is a **lower bound** on the true
      worst case): (1) all ``N − S + 1`` contiguous blocks of ``S`` stragglers; (2) local search
      from ``restarts`` starting patterns — the best blocks and random ``S``-subsets (half each)
      — where each step decodes, for every chain at once, all swap neighbours (revive one
      straggler, kill one live worker) when there are at most ``proposals`` of them, else
      ``proposals`` random ones (half move a straggler by at most ``max(1, N // 16)`` places,
      half anywhere), and each chain moves to its best neighbour if that is strictly worse
      (higher loss). A chain stops at a local optimum of the full neighbourhood, or after
      ``patience`` steps without gain; the search stops after ``max_iters`` steps. The whole
      search is one compiled program (a ``lax.while_loop`` over the steps, proposals drawn
      with ``key`` on the device): no step waits on the host, and only the worst pattern comes
      back. Every step decodes the neighbours of every chain, stopped chains included, so a
      pattern may be decoded more than once (``num_evaluated`` counts every decode).

    Args:
        code: any :class:`gcc_jax.AbstractCode`.
        f: the worker function, one input → one output (with ``x``; or give ``outputs``).
        x: inputs, shape ``(K, ...)``.
        stragglers: ``S``, the number of dead workers, ``0 ≤ S ≤ N``.
        outputs: precomputed ``(y~, f(x))``: the workers' outputs ``(N, *m)`` and the targets
            ``(K, *m)``, instead of ``f`` and ``x``.
        key: PRNG key for the random restarts and proposals (default ``jax.random.key(0)``).
        search: a :class:`SearchBudget`, or a mapping of the fields that differ from
            :data:`THOROUGH_SEARCH` (e.g. ``{"max_exhaustive": 0}`` forces the local search).
        chunk_size: masks decoded per compiled call.

    Returns:
        A :class:`WorstCase` ``(mask, loss, status, exhaustive, num_evaluated)``.

    Raises:
        ValueError/TypeError: bad sizes, both or neither of ``(f, x)`` and ``outputs``;
        GCCValueError: ``f(x)`` is not finite.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> code = gcc.BerrutCode.chebyshev(num_inputs=3, num_workers=8)
        >>> x = jnp.linspace(-1.0, 1.0, 3)[:, None]
        >>> wc = gcc.worst_case_mask(code, jnp.sin, x, stragglers=2)
        >>> wc.exhaustive, int((~wc.mask).sum()), wc.num_evaluated
        (True, 2, 28)
    """
    code = check_code(code)
    n = code.num_workers
    s = as_int(stragglers, "stragglers", 0, n)
    budget = as_budget(search, THOROUGH_SEARCH)
    chunk_size = as_int(chunk_size, "chunk_size", 1)
    key = jr.key(0) if key is None else check_key(key)
    if outputs is not None:
        if f is not None or x is not None:
            raise ValueError("give either `f` and `x` or `outputs=(y~, f(x))`, not both")
        yt, fx = (as_float_array(a, name) for a, name in zip(outputs, ("y~", "f(x)"), strict=True))
        if yt.ndim < 1 or yt.shape[0] != n or fx.shape != (code.num_inputs, *yt.shape[1:]):
            raise ValueError(
                f"`outputs` must be (y~ of shape ({n}, *m), f(x) of shape "
                f"({code.num_inputs}, *m)); got {yt.shape} and {fx.shape}"
            )
    else:
        if f is None or x is None:
            raise ValueError("give `f` and `x` (or `outputs=(y~, f(x))`)")
        yt, fx = _outputs_and_targets(code, f, check_inputs(x, code.num_inputs))
    if not bool(jnp.all(jnp.isfinite(fx))):
        raise GCCValueError("`f(x)` on the uncoded inputs is not finite; the loss is undefined")

    ev = MaskEvaluator(code, yt, fx, chunk_size=budget.chunk_size(n, s, chunk_size))
    return search_worst_case(ev, n, s, key=key, search=budget)


def search_worst_case(
    evaluator: MaskEvaluator,
    n: int,
    s: int,
    *,
    key: PRNGKeyArray,
    search: SearchBudget | Mapping[str, int] | None = None,
) -> WorstCase:
    """The search of :func:`worst_case_mask` over a :class:`MaskEvaluator` (any ``per_mask``
    whose first output is the loss and last the status; any chunk size), with the settings
    ``search`` (default :data:`DEFAULT_SEARCH`; a mapping overrides some of its fields)."""
    max_exhaustive, restarts, proposals, max_iters, patience = as_budget(search, DEFAULT_SEARCH)

    def ev(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = evaluator(masks)
        loss, status = np.asarray(out[0], float), np.asarray(out[-1])
        # A pattern the code cannot decode is the worst possible outcome.
        return np.where((status != 0) | ~np.isfinite(loss), np.inf, loss), status

    total = math.comb(n, s)
    if total <= max_exhaustive:
        best = (-np.inf, None, 0)
        for block in _combination_masks(n, s, total, evaluator.chunk):
            loss, status = ev(block)
            i = int(np.argmax(loss))
            if loss[i] > best[0] or best[1] is None:
                best = (float(loss[i]), block[i].copy(), int(status[i]))
        return WorstCase(best[1], best[0], best[2], True, evaluator.count)

    budget = SearchBudget(max_exhaustive, restarts, proposals, max_iters, patience)
    first = _contiguous(n, s)[:1]  # every pattern of the search has S stragglers
    state = evaluator._state_for(first)
    options = tuple(sorted(evaluator.policy.compiler_options(state).items()))
    full = s * (n - s) <= proposals
    width = s * (n - s) if full else proposals
    chunk = min(evaluator.chunk, 1 << (restarts * width - 1).bit_length())
    found = _local_search_on(options)(
        evaluator.per_mask,
        evaluator._treedef,
        _Sizes(n, s, chunk),
        budget,
        evaluator._leaves,
        evaluator.yt,
        evaluator.fx,
        state,
        key,
    )
    mask, loss, status, count = jax.device_get(found)
    evaluator.count += int(count)
    return WorstCase(np.asarray(mask), float(loss), int(status), False, evaluator.count)


class _Sizes(NamedTuple):
    """The static sizes of one local search: ``N``, ``S`` and the masks per chunk."""

    n: int
    s: int
    chunk: int


class _Chains(NamedTuple):
    """The local search's loop state: one row per chain."""

    step: Int[Array, ""]
    key: PRNGKeyArray
    masks: Bool[Array, "r n"]
    loss: Float[Array, " r"]
    status: Int[Array, " r"]
    stale: Int[Array, " r"]
    active: Bool[Array, " r"]
    count: Int[Array, ""]


def _score(per_mask, treedef, sizes: _Sizes, leaves, yt, fx, state, masks):
    """Loss and status of every row of ``masks`` through the evaluator's compiled block
    (:func:`gcc_jax.evaluation._evaluator.blocks_fn`), padded to whole chunks with copies of
    the first row; a pattern the code cannot decode scores ``+inf`` (the worst outcome)."""
    num = masks.shape[0]
    groups = -(-num // sizes.chunk)
    pad = groups * sizes.chunk - num
    padded = jnp.concatenate([masks, jnp.repeat(masks[:1], pad, axis=0)], axis=0)
    out = blocks_fn(
        per_mask, treedef, leaves, yt, fx, padded.reshape(groups, sizes.chunk, sizes.n), state
    )
    loss = out[0].reshape(-1)[:num]
    status = out[-1].reshape(-1)[:num].astype(jnp.int32)
    bad = (status != 0) | ~jnp.isfinite(loss)
    return jnp.where(bad, jnp.inf, loss), status


def _dead_and_live(mask: Bool[Array, " n"], s: int) -> tuple[Int[Array, " s"], Int[Array, " l"]]:
    """The indices of the ``s`` dead and the ``n − s`` live workers of ``mask``."""
    order = jnp.argsort(mask, stable=True)  # False (dead) first
    return order[:s], order[s:]


def _all_swaps(mask: Bool[Array, " n"], s: int) -> Bool[Array, "q n"]:
    """Every pattern reached by reviving one dead worker and killing one live one."""
    n = mask.shape[0]
    dead, live = _dead_and_live(mask, s)
    rows = jnp.arange(s * (n - s))
    out = jnp.broadcast_to(mask, (rows.size, n))
    out = out.at[rows, jnp.repeat(dead, n - s)].set(True)
    return out.at[rows, jnp.tile(live, s)].set(False)


def _random_swaps(
    key: PRNGKeyArray, mask: Bool[Array, " n"], s: int, num: int, radius: int
) -> Bool[Array, "q n"]:
    """``num`` swap neighbours: half move a dead worker by ≤ ``radius`` places, half anywhere."""
    n = mask.shape[0]
    dead, live = _dead_and_live(mask, s)
    k_dead, k_shift, k_sign, k_live = jr.split(key, 4)
    i = dead[jr.randint(k_dead, (num,), 0, s)]
    shift = jr.randint(k_shift, (num,), 1, radius + 1) * jnp.where(
        jr.bernoulli(k_sign, 0.5, (num,)), 1, -1
    )
    j_local = i + shift
    inside = (j_local >= 0) & (j_local < n)
    ok = inside & mask[jnp.clip(j_local, 0, n - 1)] & (jnp.arange(num) % 2 == 0)
    j = jnp.where(ok, j_local, live[jr.randint(k_live, (num,), 0, n - s)])
    rows = jnp.arange(num)
    out = jnp.broadcast_to(mask, (num, n))
    return out.at[rows, i].set(True).at[rows, j].set(False)


def _random_starts(key: PRNGKeyArray, n: int, s: int, num: int) -> Bool[Array, "r n"]:
    """``num`` uniformly random patterns with exactly ``s`` stragglers."""
    ranks = jnp.argsort(jnp.argsort(jr.uniform(key, (num, n)), axis=1), axis=1)
    return ranks >= s


def _local_search(
    per_mask, treedef, sizes: _Sizes, budget: SearchBudget, leaves, yt, fx, state, key
):
    """The heuristic search of :func:`worst_case_mask`, every step on the device: the
    contiguous blocks, the restarts, and ``lax.while_loop`` over the chains' steps; only the
    best pattern, its loss and status and the number of decoded patterns leave it."""
    n, s, _ = sizes
    restarts, proposals, max_iters, patience = budget[1:]
    score = functools.partial(_score, per_mask, treedef, sizes, leaves, yt, fx, state)
    full = s * (n - s) <= proposals
    width = s * (n - s) if full else proposals
    radius = max(1, n // 16)

    blocks = jnp.asarray(_contiguous(n, s))
    block_loss, block_status = score(blocks)
    n_block = min(max(restarts // 2, 1), blocks.shape[0])
    best_blocks = jnp.argsort(-block_loss, stable=True)[:n_block]
    key, k_start = jr.split(key)
    starts = jnp.concatenate(
        [blocks[best_blocks], _random_starts(k_start, n, s, restarts - n_block)]
    )
    loss, status = score(starts)
    init = _Chains(
        step=jnp.zeros((), jnp.int32),
        key=key,
        masks=starts,
        loss=loss,
        status=status,
        stale=jnp.zeros(restarts, jnp.int32),
        active=jnp.ones(restarts, bool),
        count=jnp.asarray(blocks.shape[0] + restarts, jnp.int32),
    )

    def go_on(c: _Chains):
        return (c.step < max_iters) & jnp.any(c.active)

    def step(c: _Chains) -> _Chains:
        key, k_prop = jr.split(c.key)
        if full:
            cands = jax.vmap(lambda m: _all_swaps(m, s))(c.masks)
        else:
            keys = jr.split(k_prop, restarts)
            cands = jax.vmap(lambda k, m: _random_swaps(k, m, s, proposals, radius))(keys, c.masks)
        cand_loss, cand_status = score(cands.reshape(restarts * width, n))
        cand_loss = cand_loss.reshape(restarts, width)
        j = jnp.argmax(cand_loss, axis=1)
        rows = jnp.arange(restarts)
        gain = c.active & (cand_loss[rows, j] > c.loss)
        stale = jnp.where(gain, 0, c.stale + c.active)
        return _Chains(
            step=c.step + 1,
            key=key,
            masks=jnp.where(gain[:, None], cands[rows, j], c.masks),
            loss=jnp.where(gain, cand_loss[rows, j], c.loss),
            status=jnp.where(gain, cand_status.reshape(restarts, width)[rows, j], c.status),
            stale=stale,
            active=c.active & (gain | (not full) & (stale < patience)),
            count=c.count + restarts * width,
        )

    end = jax.lax.while_loop(go_on, step, init)
    all_loss = jnp.concatenate([block_loss, end.loss])
    i = jnp.argmax(all_loss)
    return (
        jnp.concatenate([blocks, end.masks])[i],
        all_loss[i],
        jnp.concatenate([block_status, end.status])[i],
        end.count,
    )


@functools.cache
def _local_search_on(options: tuple[tuple[str, Any], ...]) -> Callable:
    """:func:`_local_search` compiled with XLA ``options`` (the evaluator's backend policy):
    one compile per code structure, sizes and budget; new λs, nodes or outputs reuse it."""
    kw = dict(compiler_options=dict(options)) if options else {}
    return jax.jit(_local_search, static_argnames=("per_mask", "treedef", "sizes", "budget"), **kw)
