"""Gradient-based tuning of a SplineCode's λs and nodes (Optax), and the grid-search baseline."""

import dataclasses
import functools
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from .._core.checks import as_int, check_key
from .._core.memory import release_memory
from .._core.precision import Float32PrecisionWarning
from .._core.status import GCCValueError
from .._core.types import ArrayLike, Float, PRNGKeyArray
from ..codes import SplineCode
from ..evaluation._evaluator import MaskEvaluator
from ..evaluation._stragglers import contiguous_masks
from ..evaluation._worst_case import search_worst_case
from ._evaluate import (
    DEFAULT_SEARCH,
    Evaluation,
    check_jobs,
    job_outputs,
    make_evaluator,
    search_chunk,
    summarise,
)
from ._loss import job_pattern_loss, mask_losses, reduce_losses, worker_outputs
from ._params import GROUPS, SplineParams, params_from_code
from ._stragglers import StragglerModel

__all__ = [
    "TuneHistory",
    "TuneResult",
    "GridResult",
    "default_optimizer",
    "tune",
    "grid_search",
]

#: the (lighter) worst-case search of :func:`tune`'s adversarial pool and validation
TUNE_SEARCH = dict(max_exhaustive=2_000, restarts=4, proposals=64, max_iters=10, patience=2)

_LEAVES = {
    "lam_enc": "log_lam_enc",
    "lam_dec": "log_lam_dec",
    "alpha": "alpha_logits",
    "beta": "beta_logits",
}


@functools.lru_cache(maxsize=16)
def default_optimizer(lam_lr: float = 0.1, node_lr: float = 0.01) -> optax.GradientTransformation:
    """Adam with one learning rate for ``log λ`` and a smaller one for the node gap logits.

    ``log λ`` typically travels several units (λ spans decades), while a node logit step of
    ``node_lr`` changes a gap by about ``node_lr · 100`` percent; one rate for both is either
    slow for λ or rough for the nodes. Cached: equal arguments return the same object, so
    repeated :func:`tune` calls reuse the compiled step.
    """

    def label_fn(params):  # a tree like params (no __init__, see SplineParams)
        return jax.tree_util.tree_map_with_path(
            lambda path, _: "lam" if path[0].name.startswith("log_lam") else "nodes", params
        )

    return optax.multi_transform(
        {"lam": optax.adam(lam_lr), "nodes": optax.adam(node_lr)}, label_fn
    )


class TuneHistory(NamedTuple):
    """The course of :func:`tune`.

    Attributes:
        train_loss: training objective at every step (before its update), ``(steps_run,)``.
        val_step: steps at which the validation loss was measured (0 = the initial code).
        val_loss: validation loss at those steps.
        lam_enc, lam_dec: the λs at those steps.
    """

    train_loss: np.ndarray
    val_step: np.ndarray
    val_loss: np.ndarray
    lam_enc: np.ndarray
    lam_dec: np.ndarray


class TuneResult(NamedTuple):
    """Result of :func:`tune`.

    Attributes:
        code: the tuned code (the same type and solver as the input), taken at the step with
            the lowest validation loss; the input code itself when no step improved on it.
        params: its :class:`SplineParams` (at step 0 the input's, with λ raised to the floor).
        history: :class:`TuneHistory`.
        best_step: the step ``code`` was taken at.
        initial_val_loss: validation loss of the input code.
        best_val_loss: validation loss of ``code``.
        stopped_early: whether early stopping ended the run before ``steps``.
    """

    code: SplineCode
    params: SplineParams
    history: TuneHistory
    best_step: int
    initial_val_loss: float
    best_val_loss: float
    stopped_early: bool


def _check_int(value, name: str, lo: int) -> int:
    return as_int(value, name, lo)


def _split_jobs(x, x_val, val_fraction, key, code):
    xs = check_jobs(x, code, "x_train")
    if x_val is not None:
        xv = check_jobs(x_val, code, "x_val")
        if xv.shape[2:] != xs.shape[2:]:
            raise ValueError(f"`x_val` inputs have shape {xv.shape[2:]}, x_train {xs.shape[2:]}")
        return xs, xv
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in (0, 1); got {val_fraction}")
    b = xs.shape[0]
    if b < 2:
        raise ValueError(
            "`x_train` holds a single job; pass `x_val` (held-out jobs) or at least 2 jobs so "
            "that some can be held out for validation"
        )
    n_val = min(max(int(round(val_fraction * b)), 1), b - 1)
    perm = np.asarray(jr.permutation(key, b))
    return xs[np.sort(perm[n_val:])], xs[np.sort(perm[:n_val])]


def _group_mask(params: SplineParams, trainable: tuple[str, ...]) -> SplineParams:
    """1.0 on the leaves of the trainable groups, 0.0 elsewhere (an array pytree like params)."""
    return dataclasses.replace(
        params,
        **{
            leaf: jnp.full_like(getattr(params, leaf), 1.0 if group in trainable else 0.0)
            for group, leaf in _LEAVES.items()
        },
    )


@functools.lru_cache(maxsize=32)
def _make_step(f, optimizer):
    """The jitted ``step(params, state, group_mask, use_max, xs, fx, masks) -> (params, state,
    loss)``.

    Cached per ``(f, optimizer)``; which groups train (``group_mask``) and whether patterns are
    averaged or maximised (``use_max``) are data, so all tuning runs of one ``f`` with equal
    shapes share one compilation.
    """

    def loss_fn(params, use_max, xs, fx, masks):
        code = params.to_code()
        yt = worker_outputs(code, f, xs)
        losses, status = mask_losses(code, yt, fx, masks)
        return reduce_losses(losses, status, use_max)

    @jax.jit
    def step(params, opt_state, group_mask, use_max, xs, fx, masks):
        loss, grads = jax.value_and_grad(loss_fn)(params, use_max, xs, fx, masks)
        grads = jax.tree.map(jnp.multiply, grads, group_mask)
        updates, new_state = optimizer.update(grads, opt_state, params)
        updates = jax.tree.map(jnp.multiply, updates, group_mask)
        new_params = optax.apply_updates(params, updates)
        finite = jnp.isfinite(loss) & jnp.all(
            jnp.stack([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)])
        )
        # A step whose loss or gradient is not finite changes nothing.
        keep = lambda new, old: jnp.where(finite, new, old)  # noqa: E731
        return (
            jax.tree.map(keep, new_params, params),
            jax.tree.map(keep, new_state, opt_state),
            loss,
        )

    return step


def tune(
    code: SplineCode,
    f: Callable,
    x_train: Float[ArrayLike, "b k ..."],
    *,
    key: PRNGKeyArray,
    straggler_model: StragglerModel,
    optimizer: optax.GradientTransformation | None = None,
    steps: int = 200,
    x_val: Float[ArrayLike, "v k ..."] | None = None,
    val_fraction: float = 0.25,
    num_masks: int = 32,
    val_masks: int = 256,
    jobs_per_step: int | None = None,
    trainable: Sequence[str] = GROUPS,
    eval_every: int = 10,
    patience: int = 5,
    min_delta: float = 0.01,
    lam_floor: float = 1e-12,
    pin_beta: bool | None = None,
    adversarial: int = 8,
    refresh_every: int = 10,
    search: dict | None = None,
    progress: bool = True,
) -> TuneResult:
    """Tune ``λ_enc``, ``λ_dec`` and the nodes of ``code`` by gradient descent on the loss.

    Minimises the end-to-end loss of :func:`expected_loss` — the mean over training jobs of
    ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²``, averaged over random straggler patterns (``exact``,
    ``iid``) or maximised over candidate patterns (``worst``) — with respect to the
    unconstrained :class:`SplineParams` (``log λ``, node gap logits), using an Optax optimiser.
    Every step draws fresh patterns; for ``worst`` the candidates are all contiguous blocks,
    ``num_masks`` random ``S``-subsets and a pool of ``adversarial`` patterns found by the
    worst-case local search for the current code every ``refresh_every`` steps.

    Validation runs on held-out jobs (``x_val``, or a ``val_fraction`` of the jobs of
    ``x_train``) with patterns never used in training (``val_masks`` fixed fresh patterns; for
    ``worst`` a worst-case search on the validation jobs) every ``eval_every`` steps, starting
    with the input code at step 0. A validation loss counts as an improvement only when it is
    below ``(1 − min_delta)`` times the best so far (smaller gains are within the noise of a
    finite validation set and rarely carry over to new inputs); the returned code is the best
    one by that rule — never worse than the input on the validation data, and the input itself
    when nothing improved on it. Training stops after ``patience`` validations without
    improvement.

    Args:
        code: the :class:`~gcc_jax.SplineCode` to start from (nodes inside ``[−1, 1]``).
        f: worker function, one input → one output (any JAX function, e.g.
            :func:`gcc_jax.nn.models.worker_function` of a Flax model).
        x_train: training jobs, shape ``(B, K, ...)``.
        key: PRNG key (validation split, patterns, job minibatches, search).
        straggler_model: a :class:`StragglerModel`.
        optimizer: an Optax transformation of :class:`SplineParams` (default
            :func:`default_optimizer`: Adam, rate 0.1 for ``log λ`` and 0.01 for the nodes).
        steps: maximum number of optimisation steps.
        x_val: validation jobs ``(V, K, ...)``; default: split off ``x_train``.
        val_fraction: share of ``x_train``'s jobs held out when ``x_val`` is None.
        num_masks: random patterns per step.
        val_masks: validation patterns (random models).
        jobs_per_step: training jobs per step (a random subset; default all).
        trainable: parameter groups to tune, a subset of ``("lam_enc", "lam_dec", "alpha",
            "beta")``; e.g. ``("lam_enc", "lam_dec")`` keeps the nodes.
        eval_every: steps between validations.
        patience: validations without improvement before stopping.
        min_delta: relative validation improvement that counts (0: any decrease).
        lam_floor: starting λ for a code with λ below it (e.g. 0), see
            :func:`params_from_code`.
        pin_beta: keep the worker nodes' ends at ``±1`` (default: if they start there).
        adversarial: size of the pool of searched worst-case patterns (``worst`` only).
        refresh_every: steps between worst-case searches (``worst`` only).
        search: worst-case search settings of the pool refreshes and the validations
            (default :data:`TUNE_SEARCH`, lighter than :func:`evaluate`'s).
        progress: show a progress bar.

    Returns:
        :class:`TuneResult` ``(code, params, history, best_step, initial_val_loss,
        best_val_loss, stopped_early)``.

    Raises:
        TypeError: ``code`` is not a SplineCode or ``straggler_model`` not a StragglerModel.
        ValueError: bad shapes or settings.
        GCCValueError: ``f(x_train)`` is not finite, or nodes outside ``[−1, 1]``.

    Example:
        >>> import jax, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.tuning import StragglerModel, tune
        >>> code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=8)
        >>> x = jax.random.uniform(jax.random.key(1), (4, 3, 1), minval=-2.0, maxval=2.0)
        >>> res = tune(code, jnp.sin, x, key=jax.random.key(0), steps=4, eval_every=2,
        ...            straggler_model=StragglerModel.exact(2), progress=False)
        >>> type(res.code).__name__, res.best_val_loss <= res.initial_val_loss
        ('SplineCode', True)
    """
    if not isinstance(straggler_model, StragglerModel):
        raise TypeError(
            f"`straggler_model` must be a StragglerModel; got {type(straggler_model).__name__}"
        )
    trainable = tuple(trainable)
    unknown = [g for g in trainable if g not in GROUPS]
    if unknown or not trainable:
        raise ValueError(f"`trainable` must be a non-empty subset of {GROUPS}; got {trainable}")
    steps = _check_int(steps, "steps", 0)
    for name, value, lo in (
        ("num_masks", num_masks, 1),
        ("val_masks", val_masks, 1),
        ("eval_every", eval_every, 1),
        ("patience", patience, 1),
        ("adversarial", adversarial, 1),
        ("refresh_every", refresh_every, 1),
    ):
        _check_int(value, name, lo)
    if not 0.0 <= min_delta < 1.0:
        raise ValueError(f"`min_delta` must be in [0, 1); got {min_delta}")
    params = params_from_code(code, lam_floor=lam_floor, pin_beta=pin_beta)
    n = code.num_workers
    straggler_model.check(n)
    optimizer = default_optimizer() if optimizer is None else optimizer
    search = TUNE_SEARCH | dict(search or {})
    k_split, k_val, k_run = jr.split(check_key(key), 3)
    xs_train, xs_val = _split_jobs(x_train, x_val, val_fraction, k_split, code)
    b_train = xs_train.shape[0]
    per_step = b_train if jobs_per_step is None else _check_int(jobs_per_step, "jobs_per_step", 1)
    per_step = min(per_step, b_train)
    _, fx_train = job_outputs(code, f, xs_train)
    if not bool(jnp.all(jnp.isfinite(fx_train))):
        raise GCCValueError("`f(x_train)` is not finite; the loss is undefined")
    if params.beta_logits.dtype != jnp.float64:
        warnings.warn(
            f"tuning in {params.beta_logits.dtype}: smoothing with λ > 0 is inaccurate on "
            'clustered nodes; enable x64 (jax.config.update("jax_enable_x64", True))',
            Float32PrecisionWarning,
            stacklevel=2,
        )

    worst = straggler_model.kind == "worst"
    s = straggler_model.stragglers
    val_patterns = np.asarray(straggler_model.sample(k_val, n, num=val_masks))
    val_chunk = search_chunk(n, straggler_model, search, 256, val_masks)
    k_val_search = jr.fold_in(k_val, 1)

    def validate(p: SplineParams) -> float:
        ev = make_evaluator(p.to_code(), f, xs_val, chunk=val_chunk)
        result: Evaluation = summarise(
            ev, straggler_model, val_patterns, key=k_val_search, search=search
        )
        return result.loss

    pool = None
    train_chunk = search_chunk(n, straggler_model, search, 256, 1)
    if worst:
        blocks = np.asarray(contiguous_masks(n, s))
        pool = np.repeat(blocks[:1], adversarial, axis=0)
        pool_next = 0

    def refresh(p: SplineParams, k) -> None:
        nonlocal pool, pool_next
        yt, fx = job_outputs(p.to_code(), f, xs_train)
        ev = MaskEvaluator(p.to_code(), yt, fx, per_mask=job_pattern_loss, chunk_size=train_chunk)
        wc = search_worst_case(ev, n, s, key=k, **search)
        pool[pool_next % adversarial] = wc.mask
        pool_next += 1

    step = _make_step(f, optimizer)
    use_max = jnp.asarray(straggler_model.reduce == "max")
    group_mask = _group_mask(params, trainable)
    opt_state = optimizer.init(params)

    best_params, best_step = params, 0
    best_val = initial_val = validate(params)
    val_steps, val_losses = [0], [initial_val]
    lam_hist = [(float(params.lam_enc), float(params.lam_dec))]
    train_losses: list[float] = []
    stale = 0
    stopped = False
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc=f"tune ({straggler_model.describe()})", unit="step")
        bar.set_postfix(val=f"{initial_val:.3e}")
    for i in range(steps):
        k_i = jr.fold_in(k_run, i)
        k_masks, k_jobs, k_search = jr.split(k_i, 3)
        if worst:
            if i % refresh_every == 0:
                refresh(params, k_search)
            masks = np.concatenate(
                [np.asarray(straggler_model.sample(k_masks, n, num=n - s + 1 + num_masks)), pool]
            )
        else:
            masks = np.asarray(straggler_model.sample(k_masks, n, num=num_masks))
        if i == 0:  # the step's compilation is the largest (0.5-0.7 GB of temporaries): first
            release_memory()  # hand back what the validation's and search's compilations freed
        if per_step < b_train:
            pick = np.sort(np.asarray(jr.permutation(k_jobs, b_train))[:per_step])
            xb, fb = xs_train[pick], fx_train[:, pick]
        else:
            xb, fb = xs_train, fx_train
        params, opt_state, loss = step(
            params, opt_state, group_mask, use_max, xb, fb, jnp.asarray(masks)
        )
        train_losses.append(float(loss))
        done = i + 1
        if done % eval_every == 0 or done == steps:
            val = validate(params)
            val_steps.append(done)
            val_losses.append(val)
            lam_hist.append((float(params.lam_enc), float(params.lam_dec)))
            if val < (1.0 - min_delta) * best_val:
                best_val, best_params, best_step, stale = val, params, done, 0
            else:
                stale += 1
            if bar is not None:
                bar.set_postfix(loss=f"{float(loss):.3e}", val=f"{val:.3e}", best=f"{best_val:.3e}")
            if stale >= patience and done < steps:
                stopped = True
        if bar is not None:
            bar.update(1)
        if stopped:
            break
    if bar is not None:
        bar.close()
    lam = np.asarray(lam_hist)
    history = TuneHistory(
        train_loss=np.asarray(train_losses),
        val_step=np.asarray(val_steps),
        val_loss=np.asarray(val_losses),
        lam_enc=lam[:, 0],
        lam_dec=lam[:, 1],
    )
    # No step beat the input on validation: return the input itself (not its λ-floored copy).
    return TuneResult(
        code=code if best_step == 0 else best_params.to_code(),
        params=best_params,
        history=history,
        best_step=best_step,
        initial_val_loss=float(initial_val),
        best_val_loss=float(best_val),
        stopped_early=stopped,
    )


class GridResult(NamedTuple):
    """Result of :func:`grid_search`.

    Attributes:
        code: the input code with the best ``(λ_enc, λ_dec)``.
        lam_enc, lam_dec: the chosen pair.
        loss: its loss (for ``worst``: the full worst-case search).
        lam_enc_grid, lam_dec_grid: the grids.
        losses: ``(len(lam_enc_grid), len(lam_dec_grid))`` losses of every pair (for
            ``worst``: the maximum over the candidate patterns, see :func:`grid_search`).
    """

    code: SplineCode
    lam_enc: float
    lam_dec: float
    loss: float
    lam_enc_grid: np.ndarray
    lam_dec_grid: np.ndarray
    losses: np.ndarray


def _default_grid(lo: int, hi: int) -> np.ndarray:
    return np.concatenate([[0.0], 10.0 ** np.arange(lo, hi + 1, dtype=float)])


def grid_search(
    code: SplineCode,
    f: Callable,
    x: Float[ArrayLike, "b k ..."],
    *,
    key: PRNGKeyArray,
    straggler_model: StragglerModel,
    lam_enc_grid: Sequence[float] | None = None,
    lam_dec_grid: Sequence[float] | None = None,
    num_masks: int = 256,
    top: int = 4,
    search: dict | None = None,
    progress: bool = True,
) -> GridResult:
    """The papers' baseline: choose ``(λ_enc, λ_dec)`` on a grid by the loss on jobs ``x``.

    Every pair of the grids (default ``λ_enc ∈ {0, 10⁻¹⁰, …, 10⁻²}``,
    ``λ_dec ∈ {0, 10⁻¹⁰, …, 10⁰}``) is scored on the same patterns (common random numbers):
    the mean loss over ``num_masks`` patterns for ``exact``/``iid``; for ``worst`` the largest
    loss over a candidate set — all contiguous blocks, ``num_masks`` random ``S``-subsets and
    the worst pattern the local search finds for the input code — after which the ``top``
    pairs are re-scored by a full worst-case search each (:func:`evaluate`) and the best of
    those is chosen. Nodes stay fixed.

    Args:
        code: a :class:`~gcc_jax.SplineCode` (its nodes and solver are kept).
        f: worker function.
        x: jobs ``(B, K, ...)`` the loss is measured on (the training data).
        key: PRNG key of the patterns and searches.
        straggler_model: a :class:`StragglerModel`.
        lam_enc_grid, lam_dec_grid: non-negative λ values.
        num_masks: random patterns.
        top: ``worst`` only: pairs re-scored by a full search.
        search: worst-case search settings.
        progress: show a progress bar over ``λ_enc``.

    Returns:
        :class:`GridResult`.
    """
    if not isinstance(code, SplineCode):
        raise TypeError(f"`code` must be a gcc_jax.SplineCode; got {type(code).__name__}")
    if not isinstance(straggler_model, StragglerModel):
        raise TypeError(
            f"`straggler_model` must be a StragglerModel; got {type(straggler_model).__name__}"
        )
    enc = np.asarray(_default_grid(-10, -2) if lam_enc_grid is None else lam_enc_grid, float)
    dec = np.asarray(_default_grid(-10, 0) if lam_dec_grid is None else lam_dec_grid, float)
    for name, g in (("lam_enc_grid", enc), ("lam_dec_grid", dec)):
        if g.ndim != 1 or g.size < 1 or not np.all(np.isfinite(g)) or np.any(g < 0):
            raise ValueError(f"`{name}` must be a non-empty 1-D list of finite λ >= 0; got {g}")
    _check_int(num_masks, "num_masks", 1)
    _check_int(top, "top", 1)
    xs = check_jobs(x, code)
    n = code.num_workers
    straggler_model.check(n)
    search = DEFAULT_SEARCH | dict(search or {})
    k_masks, k_search = jr.split(check_key(key))
    worst = straggler_model.kind == "worst"
    dtype = code.alpha.dtype

    def with_lams(le, ld):
        return dataclasses.replace(
            code, lam_enc=jnp.asarray(le, dtype), lam_dec=jnp.asarray(ld, dtype)
        )

    if worst:
        s = straggler_model.stragglers
        candidates = np.asarray(straggler_model.sample(k_masks, n, num=n - s + 1 + num_masks))
        chunk = search_chunk(n, straggler_model, search, 256, 1)
        ev0 = make_evaluator(code, f, xs, chunk=chunk)
        wc = search_worst_case(ev0, n, s, key=k_search, **search)
        candidates = np.concatenate([candidates, np.asarray(wc.mask)[None]])
    else:
        candidates = np.asarray(straggler_model.sample(k_masks, n, num=num_masks))
    cand_chunk = min(256, candidates.shape[0])

    losses = np.full((enc.size, dec.size), np.nan)
    rows = range(enc.size)
    if progress:
        from tqdm.auto import tqdm

        rows = tqdm(rows, desc=f"grid search ({straggler_model.describe()})", unit="λ_enc")
    for i in rows:
        ev = make_evaluator(with_lams(enc[i], 0.0), f, xs, chunk=cand_chunk)
        for j in range(dec.size):
            ev.code = with_lams(enc[i], dec[j])
            loss, status = ev(candidates)
            ok = status == 0
            if worst:
                losses[i, j] = np.max(np.where(ok, loss, np.inf))
            else:
                losses[i, j] = np.mean(loss[ok]) if ok.any() else np.nan
    order = np.argsort(np.where(np.isnan(losses), np.inf, losses), axis=None)
    if worst:
        best = (np.inf, None)
        for flat in order[:top]:
            i, j = np.unravel_index(flat, losses.shape)
            full = summarise(
                make_evaluator(with_lams(enc[i], dec[j]), f, xs, chunk=chunk),
                straggler_model,
                candidates,
                key=k_search,
                search=search,
            )
            if full.loss < best[0]:
                best = (full.loss, (i, j))
        loss_best, (i, j) = best
    else:
        i, j = np.unravel_index(order[0], losses.shape)
        loss_best = losses[i, j]
    return GridResult(
        code=with_lams(enc[i], dec[j]),
        lam_enc=float(enc[i]),
        lam_dec=float(dec[j]),
        loss=float(loss_best),
        lam_enc_grid=enc,
        lam_dec_grid=dec,
        losses=losses,
    )
