"""ParM: parity models (Kosaian, Rashmi & Venkataraman, SOSP 2019) as a gcc_jax code.

``k`` queries ``x_1..x_k`` go to ``k`` workers that run the base model ``F``; one extra worker
runs a *parity model* ``F_P`` on the parity query ``P = E(x_1..x_k)``. ``F_P`` has the base
model's architecture and is trained so that ``F_P(P) ≈ Σ_i F(x_i)``; when one base output
``F(x_j)`` is unavailable, the subtraction decoder estimates it as
``F^(x_j) = F_P(P) − Σ_{i≠j} F(x_i)`` (method-notes §3.1–3.2). ``r = 1``: one unavailable output
is recovered; more give ``Status.TOO_MANY_ERASURES``.

Encoders ``E``:

* ``"sum"``: ``P = Σ_i x_i`` (element-wise; any input shape);
* ``"concat"`` (images ``(H, W, C)`` with even ``H``, ``W``; ``k ∈ {2, 4}``): each image is
  downsampled by 2×2 (``k = 4``) or 1×2 (``k = 2``, width only) area averaging and the pieces
  are tiled into one ``(H, W, C)`` image — side by side for ``k = 2``, in the quadrants
  (top-left, top-right, bottom-left, bottom-right = ``x_1..x_4``) for ``k = 4``. Channels are
  encoded separately (R with R, ...).

Training (:func:`train_parity_model`, ParM's ``parity_model_trainer``): minimise the mean squared
error ``mean((F_P(E(x_1..x_k)) − Σ_i F(x_i))²)`` over random groups of ``k`` training images
(regrouped every epoch) with Adam (lr ``1e-3``) and an L2 weight decay of ``1e-5`` added to
the gradient (PyTorch's ``Adam(weight_decay=…)``), ``F`` being the base model's raw outputs
(logits).
"""

import dataclasses
import functools
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._misc import (
    as_int,
    as_mask,
    check_inputs,
    check_outputs,
    data_status,
    float_dtype,
    input_status,
)
from .._status import Status, combine
from .._types import Array, ArrayLike, Bool, Float, Shaped
from ._base import AbstractCode, Decoded, Encoded

__all__ = ["ENCODERS", "ParityModelCode", "TrainedCode", "parity_input", "train_parity_model"]

ENCODERS = ("sum", "concat")
"""Parity encoders of :class:`ParityModelCode`."""


def _check_k(value, lo: int = 2) -> int:
    return as_int(value, "num_inputs", lo)


def _check_encoder(encoder: str, k: int) -> str:
    if encoder not in ENCODERS:
        raise ValueError(f"`encoder` must be one of {ENCODERS}; got {encoder!r}")
    if encoder == "concat" and k not in (2, 4):
        raise ValueError(f"the concatenation encoder needs num_inputs in (2, 4); got {k}")
    return encoder


def parity_input(x: Float[ArrayLike, "k *d"], encoder: str = "sum") -> Float[Array, "*d"]:
    """The parity query ``P = E(x_1..x_k)`` of ParM's encoders (module docstring).

    Args:
        x: ``k`` inputs, shape ``(k, ...)``; for ``"concat"``, images ``(k, H, W, C)`` with even
            ``H`` and ``W`` and ``k ∈ {2, 4}``.
        encoder: ``"sum"`` or ``"concat"``.

    Returns:
        One input of shape ``x.shape[1:]``.

    Raises:
        ValueError: an unknown encoder, or shapes the concatenation encoder cannot take.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.stack([jnp.ones((2, 4, 1)), 3 * jnp.ones((2, 4, 1))])
        >>> parity_input(x, "sum")[..., 0].tolist()
        [[4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0]]
        >>> parity_input(x, "concat")[..., 0].tolist()      # left half x_1, right half x_2
        [[1.0, 1.0, 3.0, 3.0], [1.0, 1.0, 3.0, 3.0]]
    """
    x = jnp.asarray(x)
    k = x.shape[0] if x.ndim else 0
    _check_encoder(encoder, _check_k(k))
    if encoder == "sum":
        return jnp.sum(x, axis=0)
    if x.ndim != 4 or x.shape[1] % 2 or x.shape[2] % 2:
        raise ValueError(
            "the concatenation encoder needs images of shape (k, H, W, C) with even H and W; "
            f"got {x.shape}"
        )
    _, h, w, c = x.shape
    if k == 2:  # H x W/2 each, side by side
        half = x.reshape(2, h, w // 2, 2, c).mean(axis=3)
        return jnp.concatenate([half[0], half[1]], axis=1)
    quarter = x.reshape(4, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))
    top = jnp.concatenate([quarter[0], quarter[1]], axis=1)
    bottom = jnp.concatenate([quarter[2], quarter[3]], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


@functools.partial(jax.jit, static_argnames="num_inputs")
def _subtract_decode(y: Array, mask: Array, num_inputs: int) -> tuple[Array, Array]:
    """Subtraction decoding of ``y`` (k+1, m) with its status; NaN value where it is bad."""
    k = num_inputs
    dtype = float_dtype(y)
    y = y.astype(dtype)
    finite = jnp.all(jnp.isfinite(y), axis=1)
    status = combine((jnp.sum(~mask) > 1, Status.TOO_MANY_ERASURES)) | data_status(y, mask)
    # A missing worker's output (even NaN/Inf) never reaches the arithmetic or the gradient.
    y_ok = jnp.where((mask & finite)[:, None], y, 0.0)
    recon = y_ok[k] - jnp.sum(y_ok[:k], axis=0)  # F_P(P) − Σ_{i live} F(x_i)
    value = jnp.where(mask[:k, None], y_ok[:k], recon[None, :])
    status = status | combine((~jnp.all(jnp.isfinite(value)), Status.NONFINITE_RESULT))
    return jnp.where(status == 0, value, jnp.nan), status


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ParityModelCode(AbstractCode):
    """ParM: ``k`` systematic workers plus one parity-model worker, subtraction decoding.

    Workers ``0..k−1`` compute ``F(x_k)`` on the inputs themselves (``x~_n = x_n``); worker
    ``k`` computes the parity model ``F_P`` on the parity query ``P = E(x_1..x_k)``
    (:func:`parity_input`): ``y~ = (F(x_1), …, F(x_k), F_P(P))``. Decoding, with ``mask``
    flagging the ``k + 1`` workers that returned:

    * nothing missing, or only the parity: ``F^(x_j) = F(x_j)`` (exact);
    * one base output ``j`` missing: ``F^(x_j) = F_P(P) − Σ_{i≠j} F(x_i)`` (exact whenever
      ``F_P(P) = Σ_i F(x_i)``, e.g. a linear ``F`` with ``F_P = F`` and the sum encoder), the
      others exact;
    * more than ``r = 1`` missing: ``Status.TOO_MANY_ERASURES`` (value NaN), as is a NaN/Inf
      output from a live worker (``NONFINITE_DATA``).

    The parity worker runs a different function than the others, so its output cannot come
    from applying one ``f`` to :meth:`encode`'s rows: use :meth:`worker_outputs` (or
    :meth:`parity_output` on ``encode(x)[k]``). ``parity_params`` are array leaves
    (differentiable; new values never recompile); ``parity_apply``, ``num_inputs`` and
    ``encoder`` are static.

    Attributes:
        parity_params: the parity model's parameters (a pytree of arrays).
        parity_apply: ``parity_apply(params, x) -> output`` for one input (the base model's
            architecture, e.g. a :class:`gcc_jax.models.ModelApply`); hashable.
        num_inputs: ``k ≥ 2`` (static).
        encoder: ``"sum"`` (default) or ``"concat"`` (images, ``k ∈ {2, 4}``).

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> w = jnp.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])     # a linear f(x) = w x
        >>> lin = lambda params, x: params @ x                        # F_P = F: exact parity
        >>> code = gcc.ParityModelCode(w, lin, num_inputs=2)
        >>> x = jnp.array([[1.0, 1.0], [2.0, -1.0]])
        >>> y = code.worker_outputs(lambda v: w @ v, x)               # (3, 3): F, F, F_P
        >>> code.decode(y, jnp.array([True, False, True])).tolist()   # F(x_2) by subtraction
        [[3.0, 1.0, 2.0], [0.0, -1.0, 7.0]]
    """

    parity_params: Any
    parity_apply: Callable = dataclasses.field(metadata=dict(static=True))
    num_inputs: int = dataclasses.field(metadata=dict(static=True))
    encoder: str = dataclasses.field(default="sum", metadata=dict(static=True))

    def __post_init__(self):
        k = _check_k(self.num_inputs)
        object.__setattr__(self, "num_inputs", k)
        _check_encoder(self.encoder, k)
        if not callable(self.parity_apply):
            raise TypeError(
                f"`parity_apply` must be callable as parity_apply(params, x); got "
                f"{type(self.parity_apply).__name__}"
            )

    @property
    def num_workers(self) -> int:
        """``k + 1``: ``k`` base-model workers and one parity-model worker."""
        return self.num_inputs + 1

    @property
    def num_parities(self) -> int:
        """``r = 1``: outputs that can be missing."""
        return 1

    # -- encoder ----------------------------------------------------------------------------

    def parity_input(self, x: Float[ArrayLike, "k *d"]) -> Float[Array, "*d"]:
        """The parity query ``P = E(x_1..x_k)`` (see :func:`parity_input`)."""
        x = check_inputs(x, self.num_inputs)
        return parity_input(x, self.encoder)

    def encode_with_status(self, x: Shaped[ArrayLike, " k *d"]) -> Encoded:
        """The ``k + 1`` queries: ``x_1..x_k`` for the base workers, ``P`` for the parity one."""
        x = check_inputs(x, self.num_inputs)
        p = parity_input(x, self.encoder)
        return Encoded(jnp.concatenate([x.astype(p.dtype), p[None]], axis=0), input_status(x))

    def parity_output(self, p: Float[ArrayLike, "*d"]) -> Float[Array, " *m"]:
        """What the parity worker returns: ``F_P(p) = parity_apply(parity_params, p)``."""
        return self.parity_apply(self.parity_params, jnp.asarray(p))

    def worker_outputs(
        self, f: Callable[[Array], Array], x: Float[ArrayLike, "k *d"]
    ) -> Float[Array, " n *m"]:
        """All ``k + 1`` worker outputs: ``(f(x_1), …, f(x_k), F_P(P))``.

        ``f`` must be the base model's function the parity model was trained for (its raw
        outputs when trained by :func:`train_parity_model`); it is vmapped over the inputs.
        """
        x = check_inputs(x, self.num_inputs)
        base = jax.vmap(f)(x)
        parity = self.parity_output(parity_input(x, self.encoder))
        if parity.shape != base.shape[1:]:
            raise ValueError(
                f"the parity model's output {parity.shape} differs from f's {base.shape[1:]}"
            )
        dtype = float_dtype(base, parity)
        return jnp.concatenate([base.astype(dtype), parity[None].astype(dtype)], axis=0)

    # -- decoder ----------------------------------------------------------------------------

    def reconstructed(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Which estimates are reconstructions (their base worker is missing): ``~mask[:k]``."""
        return ~as_mask(mask, self.num_workers)[: self.num_inputs]

    def available(self, mask: Bool[ArrayLike, " n"]) -> Bool[Array, " k"]:
        """Every estimate when at most ``r = 1`` output is missing, none otherwise."""
        mask = as_mask(mask, self.num_workers)
        return jnp.broadcast_to(jnp.sum(~mask) <= 1, (self.num_inputs,))

    def decode_with_status(
        self, y: Shaped[ArrayLike, " n *m"], mask: Bool[ArrayLike, " n"]
    ) -> Decoded:
        """Subtraction decoding; value problems reported as data (never raises on them).

        Status flags: ``TOO_MANY_ERASURES`` (more than one worker missing), ``NONFINITE_DATA``
        (NaN/Inf from a live worker), ``NONFINITE_RESULT``. The value is NaN wherever the
        status is not OK. Use under ``jit``/``vmap`` over masks.
        """
        y, mask = check_outputs(y, mask, self.num_workers)
        value, status = _subtract_decode(
            y.reshape(self.num_workers, -1), mask, num_inputs=self.num_inputs
        )
        return Decoded(value.reshape((self.num_inputs, *y.shape[1:])), status)


# -- training (shared with gcc_jax.codes.learned) -------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedCode:
    """A trained learning-based code and how it was obtained.

    Attributes:
        code: the :class:`ParityModelCode` or :class:`gcc_jax.LearnedCode`.
        train_time_s: wall time of the training that produced it (also when loaded).
        from_cache: whether it was loaded from the checkpoint cache.
        train_losses: mean training loss of each epoch.
        val_metrics: degraded-mode reconstruction accuracy (argmax of the decoded output equal
            to the base model's argmax, on the unavailable outputs) on the held-out groups after
            each epoch.
        num_steps: optimiser steps of the training.
        cache_path: the checkpoint's path without suffix (``None`` with the cache off).
        config: the hyper-parameters that key the cache.
    """

    code: Any
    train_time_s: float
    from_cache: bool
    train_losses: tuple[float, ...]
    val_metrics: tuple[float, ...]
    num_steps: int
    cache_path: Path | None
    config: dict[str, Any]


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
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in (0, 1); got {val_fraction}")
    perm = np.random.default_rng((seed, 0xC0DE)).permutation(n)
    n_val = max(k, int(round(val_fraction * n)) // k * k)
    if n - n_val < k:
        raise ValueError(f"{n} training images are too few for groups of k={k} plus validation")
    return np.sort(perm[n_val:]), perm[:n_val].reshape(-1, k)


def check_train_args(x_train, k: int, epochs: int, batch_groups: int) -> np.ndarray:
    x_train = np.asarray(x_train)
    if x_train.ndim < 2:
        raise ValueError(f"`x_train` must have shape (n, ...) with n inputs; got {x_train.shape}")
    for name, v in (("epochs", epochs), ("batch_size", batch_groups)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"`{name}` must be a positive int; got {v!r}")
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


def train_parity_model(
    base_apply: Callable,
    base_params: Any,
    x_train: Float[ArrayLike, "n *d"],
    *,
    num_inputs: int,
    init_params: Any,
    encoder: str = "sum",
    parity_apply: Callable | None = None,
    epochs: int = 10,
    batch_size: int | None = None,
    lr: float = 1e-3,
    weight_decay: float = 1e-5,
    val_fraction: float = 0.1,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> TrainedCode:
    """Train ParM's parity model (or load it from the checkpoint cache) and build the code.

    Minimises ``mean((F_P(E(x_1..x_k)) − Σ_i F(x_i))²)`` (the mean over groups and output
    coordinates) with Adam(``lr``) and an L2 weight decay added to the gradient
    (:func:`adam_l2`), ``F = base_apply(base_params, ·)``'s raw outputs computed once per
    training image. A ``val_fraction`` of the images (chosen by ``seed``) is held out as fixed
    groups of ``k``; the rest is reshuffled into new random groups every epoch by
    :func:`gcc_jax.training.fit` (deterministic for a seed; progress bar). After each epoch the
    degraded-mode reconstruction accuracy on the held-out groups is recorded (every base output
    erased in turn). The checkpoint is cached (:func:`gcc_jax.training.cached_fit`) under a key
    hashing every hyper-parameter, the parity model's initial parameters, the base model's
    parameters and the training images.

    Args:
        base_apply: ``base_apply(params, x)``: one input → the base model's raw outputs
            ``(m,)`` (e.g. a :class:`gcc_jax.models.ModelApply`, which gives logits).
        base_params: the (frozen) base model's parameters.
        x_train: training inputs ``(n, ...)`` (images ``(n, H, W, C)`` for ``"concat"``).
        num_inputs: ``k ≥ 2``.
        init_params: the parity model's initial parameters (a fresh initialisation of the base
            architecture; ParM does not start from the base model).
        encoder: ``"sum"`` or ``"concat"``.
        parity_apply: the parity model's single-input apply (default: ``base_apply``, the
            same architecture).
        epochs: passes over the training images.
        batch_size: groups per mini-batch (default: ParM's 64 for ``k = 2``, 32 otherwise).
        lr: Adam learning rate (ParM: ``1e-3``).
        weight_decay: L2 weight decay (ParM: ``1e-5``).
        val_fraction: held-out fraction of ``x_train``, in ``(0, 1)``.
        seed: seed of the split and the shuffling.
        cache_dir: cache directory (default ``$GCC_JAX_CACHE`` or the XDG cache).
        use_cache: read and write the cache.
        progress: progress bar and a one-line summary.

    Returns:
        A :class:`TrainedCode` holding the :class:`ParityModelCode`.

    Raises:
        ValueError: bad sizes or hyper-parameters, an encoder that cannot take the inputs.

    Example:
        >>> import numpy as np, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.data import load_digits
        >>> lin = lambda p, x: p @ jnp.ravel(x)      # a linear base model: F_P = F is exact
        >>> w = jnp.asarray(np.random.default_rng(0).normal(size=(10, 64)), jnp.float32)
        >>> tc = gcc.train_parity_model(lin, w, load_digits().x_train, num_inputs=2,
        ...                             init_params=jnp.zeros_like(w), epochs=2, lr=1e-2,
        ...                             use_cache=False, progress=False)
        >>> tc.code.num_workers, tc.train_losses[-1] < tc.train_losses[0]
        (3, True)
    """
    from ..training import cached_fit, fit, tree_fingerprint

    k = _check_k(num_inputs)
    _check_encoder(encoder, k)
    groups = batch_size if batch_size is not None else (64 if k == 2 else 32)
    x_train = check_train_args(x_train, k, epochs, groups)
    parity_apply = base_apply if parity_apply is None else parity_apply
    parity_input(jnp.zeros((k, *x_train.shape[1:]), x_train.dtype), encoder)  # static checks
    task = _ParityTask(parity_apply, k, encoder)
    config = {
        "method": "parm",
        "num_inputs": k,
        "encoder": encoder,
        "parity_model": getattr(parity_apply, "name", getattr(parity_apply, "__name__", "?")),
        "epochs": int(epochs),
        "batch_groups": int(groups),
        "lr": float(lr),
        "weight_decay": float(weight_decay),
        "val_fraction": float(val_fraction),
        "seed": int(seed),
        "init": tree_fingerprint(init_params),
        "base_params": tree_fingerprint(base_params),
        "data": tree_fingerprint(x_train),
    }
    label = f"ParM k={k} {encoder}"

    def train():
        y = base_outputs(base_apply, base_params, x_train)
        tr, val = split_groups(x_train.shape[0], k, val_fraction, seed)
        xv, yv = jnp.asarray(x_train[val]), jnp.asarray(y[val])
        res = fit(
            task,
            init_params,
            x_train[tr],
            y[tr],
            optimizer=adam_l2(float(lr), float(weight_decay)),
            epochs=int(epochs),
            batch_size=k * int(groups),
            seed=seed,
            progress=progress,
            desc=f"train {label}",
            loss_fn=_parity_loss,
            validate=lambda p: float(_parity_val_agreement(task, p, xv, yv)),
        )
        meta = {
            "train_losses": list(res.train_losses),
            "val_metrics": list(res.val_accuracies),
            "num_steps": res.num_steps,
        }
        return res.params, meta

    out = cached_fit("parity", config, init_params, train, cache_dir=cache_dir, use_cache=use_cache)
    meta = out.metadata
    trained = TrainedCode(
        code=ParityModelCode(out.params, parity_apply, num_inputs=k, encoder=encoder),
        train_time_s=out.train_time_s,
        from_cache=out.from_cache,
        train_losses=tuple(float(v) for v in meta.get("train_losses", ())),
        val_metrics=tuple(float(v) for v in meta.get("val_metrics", ())),
        num_steps=int(meta.get("num_steps", 0)),
        cache_path=out.cache_path,
        config=config,
    )
    if progress:
        _summary(trained, label)
    return trained


def _summary(trained: TrainedCode, label: str) -> None:
    from tqdm.auto import tqdm

    how = "loaded" if trained.from_cache else "trained"
    val = trained.val_metrics[-1] if trained.val_metrics else math.nan
    tqdm.write(
        f"{how} {label} ({trained.train_time_s:.1f} s of training): held-out degraded-mode "
        f"reconstruction accuracy {val:.4f}"
    )
