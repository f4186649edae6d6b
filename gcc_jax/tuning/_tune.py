"""Gradient-based tuning of a SplineCode's λs and nodes (Optax), and the grid-search baseline."""

import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from .._core.checks import as_int, as_lam_grid, as_real, check_instance, check_key
from .._core.memory import release_memory
from .._core.precision import Float32PrecisionWarning
from .._core.status import GCCValueError
from .._core.types import Array, ArrayLike, Float, PRNGKeyArray
from ..codes import SplineCode
from ..evaluation import (
    DEFAULT_SEARCH,
    LIGHT_SEARCH,
    MaskEvaluator,
    SearchBudget,
    as_budget,
    contiguous_masks,
    search_worst_case,
)
from ._evaluate import check_jobs, job_outputs, make_evaluator, search_chunk, summarise
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


class TuneSettings(NamedTuple):
    """The knobs of :func:`tune` (see its arguments), checked by :meth:`check`."""

    steps: int = 200
    val_fraction: float = 0.25
    num_masks: int = 32
    val_masks: int = 256
    jobs_per_step: int | None = None
    trainable: tuple[str, ...] = GROUPS
    eval_every: int = 10
    patience: int = 5
    min_delta: float = 0.01
    adversarial: int = 8
    refresh_every: int = 10
    search: SearchBudget = LIGHT_SEARCH

    def check(self) -> "TuneSettings":
        """The settings with every value checked (``ValueError``/``TypeError`` naming it)."""
        trainable = tuple(self.trainable)
        if not trainable or any(g not in GROUPS for g in trainable):
            raise ValueError(f"`trainable` must be a non-empty subset of {GROUPS}; got {trainable}")
        counts = {
            name: as_int(getattr(self, name), name, 1)
            for name in ("num_masks", "val_masks", "eval_every", "patience", "adversarial")
        }
        return self._replace(
            steps=as_int(self.steps, "steps", 0),
            val_fraction=as_real(
                self.val_fraction, "val_fraction", 0, 1, lo_open=True, hi_open=True
            ),
            jobs_per_step=None
            if self.jobs_per_step is None
            else as_int(self.jobs_per_step, "jobs_per_step", 1),
            trainable=trainable,
            refresh_every=as_int(self.refresh_every, "refresh_every", 1),
            min_delta=as_real(self.min_delta, "min_delta", 0, 1, hi_open=True),
            search=as_budget(self.search, LIGHT_SEARCH),
            **counts,
        )


class _Jobs(NamedTuple):
    """Training and validation jobs, and the targets ``f(x)`` of the training jobs."""

    train: Array  # (b, K, ...)
    val: Array  # (v, K, ...)
    fx_train: Array  # (K, b, *out)


def _split_jobs(x, x_val, val_fraction, key, code) -> tuple[Array, Array]:
    """``(train, val)`` jobs: ``x_val`` as given, or a random ``val_fraction`` of ``x``."""
    xs = check_jobs(x, code, "x_train")
    if x_val is not None:
        xv = check_jobs(x_val, code, "x_val")
        if xv.shape[2:] != xs.shape[2:]:
            raise ValueError(f"`x_val` inputs have shape {xv.shape[2:]}, x_train {xs.shape[2:]}")
        return xs, xv
    b = xs.shape[0]
    if b < 2:
        raise ValueError(
            "`x_train` holds a single job; pass `x_val` (held-out jobs) or at least 2 jobs so "
            "that some can be held out for validation"
        )
    n_val = min(max(int(round(val_fraction * b)), 1), b - 1)
    perm = np.asarray(jr.permutation(key, b))
    return xs[np.sort(perm[n_val:])], xs[np.sort(perm[:n_val])]


def _prepare_jobs(code, f, x_train, x_val, val_fraction, key) -> _Jobs:
    """Split the jobs and run the uncoded ``f`` on the training jobs once."""
    train, val = _split_jobs(x_train, x_val, val_fraction, key, code)
    _, fx_train = job_outputs(code, f, train)
    if not bool(jnp.all(jnp.isfinite(fx_train))):
        raise GCCValueError("`f(x_train)` is not finite; the loss is undefined")
    return _Jobs(train, val, fx_train)


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


class _Validator:
    """The validation loss of parameters: held-out jobs, fixed patterns never used in
    training (for ``worst``, a worst-case search on the validation jobs)."""

    def __init__(self, f, xs_val, model: StragglerModel, n: int, settings: TuneSettings, key):
        self.f, self.xs, self.model, self.search = f, xs_val, model, settings.search
        self.patterns = np.asarray(model.sample(key, n, num=settings.val_masks))
        self.chunk = search_chunk(n, model, settings.search, 256, settings.val_masks)
        self.key = jr.fold_in(key, 1)

    def __call__(self, params: SplineParams) -> float:
        ev = make_evaluator(params.to_code(), self.f, self.xs, chunk=self.chunk)
        return summarise(ev, self.model, self.patterns, key=self.key, search=self.search).loss


class _TrainingPatterns:
    """The patterns and jobs of each training step, drawn on the device by one compiled call
    (:func:`_draw`): ``num_masks`` fresh random patterns; for ``worst``, also all contiguous
    blocks and a pool of ``adversarial`` patterns that a worst-case search for the current code
    refreshes (one entry at a time) every ``refresh_every`` steps."""

    def __init__(self, f, jobs: _Jobs, model: StragglerModel, n: int, settings: TuneSettings):
        self.f, self.jobs, self.model, self.n, self.settings = f, jobs, model, n, settings
        self.pool = jnp.zeros((0, n), bool)
        self.num = settings.num_masks
        if model.kind == "worst":
            blocks = contiguous_masks(n, model.stragglers)
            self.pool = jnp.repeat(blocks[:1], settings.adversarial, axis=0)
            self.chunk = search_chunk(n, model, settings.search, 256, 1)
            self.refreshed = 0
            self.num = n - model.stragglers + 1 + settings.num_masks

    def _refresh(self, params: SplineParams, key) -> None:
        code = params.to_code()
        yt, fx = job_outputs(code, self.f, self.jobs.train)
        ev = MaskEvaluator(code, yt, fx, per_mask=job_pattern_loss, chunk_size=self.chunk)
        wc = search_worst_case(
            ev, self.n, self.model.stragglers, key=key, search=self.settings.search
        )
        self.pool = self.pool.at[self.refreshed % self.settings.adversarial].set(wc.mask)
        self.refreshed += 1

    def __call__(self, step: int, params: SplineParams, key, per_step: int):
        """``(masks, jobs, targets)`` of step ``step``, device arrays."""
        k_masks, k_jobs, k_search = jr.split(jr.fold_in(key, step), 3)
        if self.model.kind == "worst" and step % self.settings.refresh_every == 0:
            self._refresh(params, k_search)
        return _draw(k_masks, k_jobs, self.jobs.train, self.jobs.fx_train, self.pool,
                     model=self.model, n=self.n, num=self.num, per_step=per_step)  # fmt: skip


@functools.partial(jax.jit, static_argnames=("model", "n", "num", "per_step"))
def _draw(k_masks, k_jobs, train, fx_train, pool, *, model, n, num, per_step):
    """``num`` patterns of ``model`` followed by the ``pool``, and ``per_step`` random training
    jobs with their targets (all of them, in order, when ``per_step ≥ b``)."""
    masks = jnp.concatenate([model.sample(k_masks, n, num=num), pool])
    b = train.shape[0]
    if per_step >= b:
        return masks, train, fx_train
    pick = jnp.sort(jr.permutation(k_jobs, b)[:per_step])
    return masks, train[pick], fx_train[:, pick]


class _Record:
    """The course of a run: training losses, validations, the best parameters so far and the
    early-stopping count. A validation loss improves on the best only when it is below
    ``(1 − min_delta)`` times it."""

    def __init__(self, params: SplineParams, val: float, min_delta: float):
        self.min_delta = min_delta
        self.best_params, self.best_step, self.best_val = params, 0, val
        self.initial_val = val
        self.val_steps, self.val_losses = [0], [val]
        self.lams = [(float(params.lam_enc), float(params.lam_dec))]
        self.train_losses: list[Array] = []  # device scalars, read once at the end
        self.stale = 0

    def validated(self, step: int, params: SplineParams, val: float) -> None:
        self.val_steps.append(step)
        self.val_losses.append(val)
        self.lams.append((float(params.lam_enc), float(params.lam_dec)))
        if val < (1.0 - self.min_delta) * self.best_val:
            self.best_val, self.best_params, self.best_step, self.stale = val, params, step, 0
        else:
            self.stale += 1

    def result(self, code: SplineCode, stopped: bool) -> "TuneResult":
        lam = np.asarray(self.lams)
        history = TuneHistory(
            train_loss=np.asarray(jnp.stack(self.train_losses) if self.train_losses else []),
            val_step=np.asarray(self.val_steps),
            val_loss=np.asarray(self.val_losses),
            lam_enc=lam[:, 0],
            lam_dec=lam[:, 1],
        )
        # no step beat the input on validation: the input itself (not its λ-floored copy)
        return TuneResult(
            code=code if self.best_step == 0 else self.best_params.to_code(),
            params=self.best_params,
            history=history,
            best_step=self.best_step,
            initial_val_loss=float(self.initial_val),
            best_val_loss=float(self.best_val),
            stopped_early=stopped,
        )


def _warn_float32(params: SplineParams) -> None:
    if params.beta_logits.dtype != jnp.float64:
        warnings.warn(
            f"tuning in {params.beta_logits.dtype}: smoothing with λ > 0 is inaccurate on "
            'clustered nodes; enable x64 (jax.config.update("jax_enable_x64", True))',
            Float32PrecisionWarning,
            stacklevel=3,
        )


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
    search: SearchBudget | Mapping[str, int] | None = None,
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
        search: the :class:`gcc_jax.evaluation.SearchBudget` of the pool refreshes and the
            validations, or a mapping of the fields that differ from the default,
            :data:`gcc_jax.evaluation.LIGHT_SEARCH` (a search runs every few steps).
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
    check_instance(straggler_model, StragglerModel, "straggler_model")
    settings = TuneSettings(
        steps, val_fraction, num_masks, val_masks, jobs_per_step, tuple(trainable), eval_every,
        patience, min_delta, adversarial, refresh_every,
        as_budget(search, LIGHT_SEARCH),
    ).check()  # fmt: skip
    params = params_from_code(code, lam_floor=lam_floor, pin_beta=pin_beta)
    n = code.num_workers
    straggler_model.check(n)
    optimizer = default_optimizer() if optimizer is None else optimizer
    k_split, k_val, k_run = jr.split(check_key(key), 3)
    jobs = _prepare_jobs(code, f, x_train, x_val, settings.val_fraction, k_split)
    _warn_float32(params)

    problem = _Problem(
        step=_make_step(f, optimizer),
        use_max=jnp.asarray(straggler_model.reduce == "max"),
        group_mask=_group_mask(params, settings.trainable),
        jobs=jobs,
        per_step=settings.jobs_per_step or jobs.train.shape[0],
        validate=_Validator(f, jobs.val, straggler_model, n, settings, k_val),
        patterns=_TrainingPatterns(f, jobs, straggler_model, n, settings),
    )
    record = _Record(params, problem.validate(params), settings.min_delta)
    label = f"tune ({straggler_model.describe()})"
    stopped = _optimise(settings, problem, params, optimizer.init(params), record, k_run, label,
                        progress)  # fmt: skip
    return record.result(code, stopped)


class _Problem(NamedTuple):
    """What every step of :func:`tune` uses: the compiled step and its fixed inputs, the jobs,
    the validation and the training patterns."""

    step: Callable
    use_max: Array
    group_mask: SplineParams
    jobs: _Jobs
    per_step: int
    validate: _Validator
    patterns: _TrainingPatterns


def _optimise(
    settings: TuneSettings,
    problem: _Problem,
    params: SplineParams,
    opt_state,
    record: _Record,
    key,
    label: str,
    progress: bool,
) -> bool:
    """The optimisation loop of :func:`tune`: a step per iteration, a validation every
    ``eval_every`` steps (into ``record``); whether early stopping (``patience`` validations
    without gain) ended it."""
    steps = settings.steps
    stopped = False
    bar = None
    if progress:
        from .._core.progress import tqdm

        bar = tqdm(total=steps, desc=label, unit="step")
        bar.set_postfix(val=f"{record.initial_val:.3e}")
    # Each step's patterns, jobs, update and loss stay on the device: the loop only dispatches
    # (no transfer or synchronisation per step) until a validation reads the parameters.
    for i in range(steps):
        masks, xb, fb = problem.patterns(i, params, key, problem.per_step)
        if i == 0:  # the step's compilation needs the most temporary memory: hand back first
            release_memory()  # what the validation's and search's compilations freed
        params, opt_state, loss = problem.step(
            params, opt_state, problem.group_mask, problem.use_max, xb, fb, masks
        )
        record.train_losses.append(loss)
        done = i + 1
        if done % settings.eval_every == 0 or done == steps:
            record.validated(done, params, problem.validate(params))
            if bar is not None:
                bar.set_postfix(
                    loss=f"{float(loss):.3e}",
                    val=f"{record.val_losses[-1]:.3e}",
                    best=f"{record.best_val:.3e}",
                )
            stopped = record.stale >= settings.patience and done < steps
        if bar is not None:
            bar.update(1)
        if stopped:
            break
    if bar is not None:
        bar.close()
    return stopped


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
    search: SearchBudget | Mapping[str, int] | None = None,
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
        search: a :class:`gcc_jax.evaluation.SearchBudget`, or a mapping of the fields that
            differ from the default, :data:`gcc_jax.evaluation.DEFAULT_SEARCH`.
        progress: show a progress bar over ``λ_enc``.

    Returns:
        :class:`GridResult`.
    """
    check_instance(code, SplineCode, "code", "gcc_jax.SplineCode")
    check_instance(straggler_model, StragglerModel, "straggler_model")
    enc = (
        _default_grid(-10, -2)
        if lam_enc_grid is None
        else as_lam_grid(lam_enc_grid, "lam_enc_grid")
    )
    dec = (
        _default_grid(-10, 0) if lam_dec_grid is None else as_lam_grid(lam_dec_grid, "lam_dec_grid")
    )
    num_masks = as_int(num_masks, "num_masks", 1)
    top = as_int(top, "top", 1)
    xs = check_jobs(x, code)
    n = code.num_workers
    straggler_model.check(n)
    search = as_budget(search, DEFAULT_SEARCH)
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
        wc = search_worst_case(ev0, n, s, key=k_search, search=search)
        candidates = np.concatenate([candidates, np.asarray(wc.mask)[None]])
    else:
        candidates = np.asarray(straggler_model.sample(k_masks, n, num=num_masks))
    cand_chunk = min(256, candidates.shape[0])

    losses = np.full((enc.size, dec.size), np.nan)
    rows = range(enc.size)
    if progress:
        from .._core.progress import tqdm

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
