"""Training ParM's parity model (:class:`gcc_jax.ParityModelCode`), and what learned codes share.

Minimise ``mean((F_P(E(x_1..x_k)) − Σ_i F(x_i))²)`` over random groups of ``k`` training images
(regrouped every epoch) with Adam and an L2 weight decay added to the gradient (PyTorch's
``Adam(weight_decay=…)``, ParM's ``parity_model_trainer``), ``F`` being the base model's raw
outputs; cached by :func:`gcc_jax.nn.training.cached_fit`.
"""

import dataclasses
import functools
import math
import os
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..._core.checks import as_int, as_real
from ..._core.types import Array, ArrayLike, Float
from ...codes import AbstractCode
from ...codes.parity import ParityModelCode, check_encoder, check_num_inputs, parity_input
from ._cached import CachedFit, TrainingRun, cached_fit, tree_fingerprint
from ._loop import fit

__all__ = [
    "TrainSettings",
    "TrainedCode",
    "fit_on_groups_cached",
    "adam_l2",
    "base_outputs",
    "batched",
    "check_train_args",
    "trained_code",
    "split_groups",
    "train_parity_model",
]


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedCode(TrainingRun):
    """A trained learning-based code and how it was obtained.

    After the fields below come, keyword-only, those of its `TrainingRun` (``train_losses``,
    ``num_steps``, ``from_cache``, ``cache_path``, ``train_time_s``, ``config``).

    Attributes:
        code: the :class:`gcc_jax.ParityModelCode` or :class:`gcc_jax.LearnedCode`.
        val_metrics: degraded-mode reconstruction accuracy (argmax of the decoded output equal
            to the base model's argmax, on the unavailable outputs) on the held-out groups after
            each epoch.
        num_steps: optimiser steps of the training (also when loaded).
    """

    code: AbstractCode
    val_metrics: tuple[float, ...]


def batched(apply: Callable, params: Any, x: Array) -> Array:
    """A single-input ``apply(params, x_one)`` mapped over the leading axis of ``x``."""
    return jax.vmap(lambda xi: apply(params, xi))(x)


@functools.partial(jax.jit, static_argnames="apply")
def _forward(apply: Callable, params: Any, x: Array) -> Array:
    return batched(apply, params, x)


def base_outputs(apply: Callable, params: Any, x: np.ndarray, chunk: int = 1000) -> np.ndarray:
    """Single-input ``apply(params, ·)`` over the leading axis of ``x`` in fixed-size (padded)
    chunks: one compilation."""
    x = np.asarray(x)
    n = x.shape[0]
    size = min(chunk, n)
    out = []
    for start in range(0, n, size):
        xb = x[start : start + size]
        pad = size - xb.shape[0]
        if pad:
            xb = np.concatenate([xb, np.zeros((pad, *xb.shape[1:]), xb.dtype)])
        out.append(np.asarray(_forward(apply, params, jnp.asarray(xb)))[: size - pad])
    return np.concatenate(out)


@functools.lru_cache(maxsize=16)
def adam_l2(lr: float, weight_decay: float):
    """Adam with an L2 penalty added to the gradient (PyTorch ``Adam(weight_decay=…)``).

    ``g ← ∇L + weight_decay·θ`` then Adam(lr); one object per setting, so the compiled training
    step is reused.
    """
    import optax

    return optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(lr))


def split_groups(n: int, k: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train indices and held-out validation *groups* ``(g, k)`` of a training split of ``n``."""
    val_fraction = as_real(val_fraction, "val_fraction", 0.0, 1.0, lo_open=True, hi_open=True)
    perm = np.random.default_rng((seed, 0xC0DE)).permutation(n)
    n_val = max(k, int(round(val_fraction * n)) // k * k)
    if n - n_val < k:
        raise ValueError(f"{n} training images are too few for groups of k={k} plus validation")
    return np.sort(perm[n_val:]), perm[:n_val].reshape(-1, k)


def check_train_args(x_train, k: int, settings: "TrainSettings") -> np.ndarray:
    """``x_train`` as a NumPy array of ``n`` inputs; ``epochs`` and ``batch_size`` ``>= 1``."""
    x_train = np.asarray(x_train)
    if x_train.ndim < 2:
        raise ValueError(f"`x_train` must have shape (n, ...) with n inputs; got {x_train.shape}")
    as_int(settings.epochs, "epochs", 1)
    as_int(settings.groups(k), "batch_size", 1)
    return x_train


@dataclasses.dataclass(frozen=True)
class _ParityTask:
    """Static description of a parity-model training step (hashable: one compile per task)."""

    parity_apply: Callable
    num_inputs: int
    encoder: str


def _parity_loss(task: _ParityTask, params: Any, batch) -> Array:
    """``mean((F_P(E(x_1..x_k)) − Σ_i F(x_i))²)`` over the ``b = len(x)/k`` groups of a batch."""
    k = task.num_inputs
    x = batch.x.reshape(-1, k, *batch.x.shape[1:])
    target = batch.y.reshape(-1, k, *batch.y.shape[1:]).sum(axis=1)
    p = jax.vmap(functools.partial(parity_input, encoder=task.encoder))(x)
    out = batched(task.parity_apply, params, p)
    return jnp.mean((out - target.astype(out.dtype)) ** 2)


@functools.partial(jax.jit, static_argnames="task")
def _parity_val_agreement(task: _ParityTask, params: Any, x: Array, y: Array) -> Array:
    """Degraded-mode agreement with the base argmax on groups ``x (g, k, ...)``, ``y (g, k, m)``."""
    p = jax.vmap(functools.partial(parity_input, encoder=task.encoder))(x)
    out = batched(task.parity_apply, params, p).astype(y.dtype)  # (g, m)
    recon = out[:, None, :] - (jnp.sum(y, axis=1, keepdims=True) - y)  # erase each j in turn
    return jnp.mean(jnp.argmax(recon, axis=-1) == jnp.argmax(y, axis=-1))


class TrainSettings(NamedTuple):
    """How ParM's parity model and a learned code are trained (one settings object for both).

    Random groups of ``k`` training images, regrouped every epoch; Adam(``lr``) with an L2
    ``weight_decay`` added to the gradient (:func:`adam_l2`); a held-out ``val_fraction`` of
    the images, chosen by ``seed``, on which the degraded-mode accuracy is recorded; the
    checkpoint cache (:func:`gcc_jax.nn.training.cached_fit`).

    Attributes:
        epochs: passes over the training images.
        batch_size: groups per mini-batch (``None``: ParM's 64 for ``k = 2``, 32 otherwise).
        lr: Adam learning rate (ParM: ``1e-3``).
        weight_decay: L2 weight decay (ParM: ``1e-5``).
        val_fraction: held-out fraction of the training images, in ``(0, 1)``.
        seed: seed of the initialisation (learned codes), the split and the shuffling.
        cache_dir: cache directory (default ``$GCC_JAX_CACHE`` or the XDG cache).
        use_cache: read and write the cache.
        progress: progress bar and a one-line summary.

    Example:
        >>> TrainSettings(epochs=2).groups(2), TrainSettings(batch_size=8).groups(3)
        (64, 8)
    """

    epochs: int = 10
    batch_size: int | None = None
    lr: float = 1e-3
    weight_decay: float = 1e-5
    val_fraction: float = 0.1
    seed: int = 0
    cache_dir: str | os.PathLike | None = None
    use_cache: bool = True
    progress: bool = True

    def groups(self, k: int) -> int:
        """Groups of ``k`` images per mini-batch."""
        return self.batch_size if self.batch_size is not None else (64 if k == 2 else 32)

    def config(self, k: int) -> dict[str, Any]:
        """The settings as they enter the cache key."""
        return {
            "epochs": int(self.epochs),
            "batch_groups": int(self.groups(k)),
            "lr": float(self.lr),
            "weight_decay": float(self.weight_decay),
            "val_fraction": float(self.val_fraction),
            "seed": int(self.seed),
        }


def fit_on_groups_cached(
    kind: str,
    task: Any,
    init_params: Any,
    x_train: np.ndarray,
    targets: Callable[[], np.ndarray],
    k: int,
    settings: TrainSettings,
    config: dict[str, Any],
    *,
    loss_fn: Callable,
    agreement: Callable,
    label: str,
) -> tuple[CachedFit, dict[str, Any]]:
    """The training shared by ParM and learned codes, through the checkpoint cache.

    Holds out :func:`split_groups`' validation groups, trains with :func:`fit` on the rest
    (``loss_fn``) and reports the degraded-mode agreement ``agreement(task, params, x_val,
    y_val)`` per epoch; ``targets()`` (the base model's outputs on ``x_train``) runs only when
    no checkpoint matches. Returns the :func:`cached_fit` result and the full config.
    """
    config = {**config, **settings.config(k), "data": tree_fingerprint(x_train)}

    def train():
        y = targets()
        tr, val = split_groups(x_train.shape[0], k, settings.val_fraction, settings.seed)
        xv, yv = jnp.asarray(x_train[val]), jnp.asarray(y[val])
        res = fit(
            task,
            init_params,
            x_train[tr],
            y[tr],
            optimizer=adam_l2(float(settings.lr), float(settings.weight_decay)),
            epochs=int(settings.epochs),
            batch_size=k * int(settings.groups(k)),
            seed=settings.seed,
            progress=settings.progress,
            desc=f"train {label}",
            loss_fn=loss_fn,
            validate=lambda p: float(agreement(task, p, xv, yv)),
        )
        meta = {
            "train_losses": list(res.train_losses),
            "val_metrics": list(res.val_accuracies),
            "num_steps": res.num_steps,
        }
        return res.params, meta

    out = cached_fit(
        kind, config, init_params, train, cache_dir=settings.cache_dir, use_cache=settings.use_cache
    )
    return out, config


def train_parity_model(
    base_apply: Callable,
    base_params: Any,
    x_train: Float[ArrayLike, "n *d"],
    *,
    num_inputs: int,
    init_params: Any,
    encoder: str = "sum",
    parity_apply: Callable | None = None,
    settings: TrainSettings = TrainSettings(),
) -> TrainedCode:
    """Train ParM's parity model (or load it from the checkpoint cache) and build the code.

    Minimises ``mean((F_P(E(x_1..x_k)) − Σ_i F(x_i))²)`` (the mean over groups and output
    coordinates) with Adam(``lr``) and an L2 weight decay added to the gradient
    (:func:`adam_l2`), ``F = base_apply(base_params, ·)``'s raw outputs computed once per
    training image (``settings``: :class:`TrainSettings`). A ``val_fraction`` of the images
    (chosen by ``seed``) is held out as fixed groups of ``k``; the rest is reshuffled into new
    random groups every epoch by
    :func:`gcc_jax.nn.training.fit` (deterministic for a seed; progress bar). After each epoch the
    degraded-mode reconstruction accuracy on the held-out groups is recorded (every base output
    erased in turn). The checkpoint is cached (:func:`gcc_jax.nn.training.cached_fit`) under a key
    hashing every hyper-parameter, the parity model's initial parameters, the base model's
    parameters and the training images.

    Args:
        base_apply: ``base_apply(params, x)``: one input → the base model's raw outputs
            ``(m,)`` (e.g. a :class:`gcc_jax.nn.models.ModelApply`, which gives logits).
        base_params: the (frozen) base model's parameters.
        x_train: training inputs ``(n, ...)`` (images ``(n, H, W, C)`` for ``"concat"``).
        num_inputs: ``k ≥ 2``.
        init_params: the parity model's initial parameters (a fresh initialisation of the base
            architecture; ParM does not start from the base model).
        encoder: ``"sum"`` or ``"concat"``.
        parity_apply: the parity model's single-input apply (default: ``base_apply``, the
            same architecture).
        settings: epochs, batch size, optimiser, validation split, seed, cache and progress.

    Returns:
        A :class:`TrainedCode` holding the :class:`ParityModelCode`.

    Raises:
        ValueError: bad sizes or hyper-parameters, an encoder that cannot take the inputs.

    Example:
        >>> import numpy as np, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.nn.data import load_digits
        >>> lin = lambda p, x: p @ jnp.ravel(x)      # a linear base model: F_P = F is exact
        >>> w = jnp.asarray(np.random.default_rng(0).normal(size=(10, 64)), jnp.float32)
        >>> from gcc_jax.nn.training import TrainSettings
        >>> quick = TrainSettings(epochs=2, lr=1e-2, use_cache=False, progress=False)
        >>> tc = gcc.train_parity_model(lin, w, load_digits().x_train, num_inputs=2,
        ...                             init_params=jnp.zeros_like(w), settings=quick)
        >>> tc.code.num_workers, tc.train_losses[-1] < tc.train_losses[0]
        (3, True)
    """
    k = check_num_inputs(num_inputs)
    check_encoder(encoder, k)
    x_train = check_train_args(x_train, k, settings)
    parity_apply = base_apply if parity_apply is None else parity_apply
    parity_input(jnp.zeros((k, *x_train.shape[1:]), x_train.dtype), encoder)  # static checks
    task = _ParityTask(parity_apply, k, encoder)
    config = {
        "method": "parm",
        "num_inputs": k,
        "encoder": encoder,
        "parity_model": getattr(parity_apply, "name", getattr(parity_apply, "__name__", "?")),
        "init": tree_fingerprint(init_params),
        "base_params": tree_fingerprint(base_params),
    }
    label = f"ParM k={k} {encoder}"
    out, config = fit_on_groups_cached(
        "parity", task, init_params, x_train,
        lambda: base_outputs(base_apply, base_params, x_train), k, settings, config,
        loss_fn=_parity_loss, agreement=_parity_val_agreement, label=label,
    )  # fmt: skip
    code = ParityModelCode(out.params, parity_apply, num_inputs=k, encoder=encoder)
    return trained_code(code, out, config, label, settings.progress)


def trained_code(
    code: AbstractCode, out: CachedFit, config: dict[str, Any], label: str, progress: bool
) -> TrainedCode:
    """The :class:`TrainedCode` of a :func:`cached_fit` (its history from the checkpoint's
    metadata); with ``progress``, a summary line on stderr."""
    meta = out.metadata
    trained = TrainedCode(
        code=code,
        train_time_s=out.train_time_s,
        from_cache=out.from_cache,
        train_losses=tuple(float(v) for v in meta.get("train_losses", ())),
        val_metrics=tuple(float(v) for v in meta.get("val_metrics", ())),
        num_steps=int(meta.get("num_steps", 0)),
        cache_path=out.cache_path,
        config=config,
    )
    if progress:
        from ..._core.progress import tqdm

        how = "loaded" if trained.from_cache else "trained"
        val = trained.val_metrics[-1] if trained.val_metrics else math.nan
        tqdm.write(
            f"{how} {label} ({trained.train_time_s:.1f} s of training): held-out degraded-mode "
            f"reconstruction accuracy {val:.4f}",
            file=sys.stderr,
        )
    return trained
