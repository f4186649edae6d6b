"""Training a learned code (:class:`gcc_jax.LearnedCode`) end to end through a frozen base model.

Kosaian, Rashmi & Venkataraman, "Learning-Based Coded Computation" (IEEE JSAIT 2020): minimise
the MSE between the decoded and the true base outputs on the *unavailable* slots, averaged over
every erasure pattern the code must handle (:func:`gcc_jax.codes.erasure_patterns`).
"""

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..._core.types import Array, ArrayLike, Float
from ...codes.learned import (
    LearnedCode,
    check_size,
    decode_outputs,
    encode_parities,
    erasure_patterns,
)
from ._cached import tree_fingerprint
from ._parity import (
    TrainedCode,
    TrainSettings,
    base_outputs,
    batched,
    check_train_args,
    fit_on_groups_cached,
    trained_code,
)

__all__ = ["train_learned_code"]


@dataclasses.dataclass(frozen=True, eq=False)
class _LearnedTask:
    """Static description of a learned-code training step (hashed by identity: the frozen base
    parameters are compile-time constants of its step)."""

    base_apply: Callable
    base_params: Any
    num_inputs: int
    num_parities: int
    encoder: str
    patterns: tuple[tuple[bool, ...], ...]


def _pattern_terms(task: _LearnedTask, params: dict, x: Array, y: Array):
    """Decoded estimates and squared errors for every erasure pattern on groups ``x (b, k, …)``.

    Returns ``(recon (P, b, k, m), erased (P, k))``.
    """
    k, r = task.num_inputs, task.num_parities
    b, m = x.shape[0], y.shape[-1]
    par = jax.vmap(lambda xi: encode_parities(task.encoder, params["encoder"], xi, r))(x)
    fp = batched(task.base_apply, task.base_params, par.reshape(b * r, *x.shape[2:]))
    y_all = jnp.concatenate([y, fp.reshape(b, r, m).astype(y.dtype)], axis=1)  # (b, k+r, m)
    masks = jnp.asarray(np.array(task.patterns))  # (P, k+r)

    def one(mask):
        y_in = jnp.where(mask[None, :, None], y_all, 0.0)
        return jax.vmap(lambda v: decode_outputs(params["decoder"], v, k))(y_in)

    return jax.vmap(one)(masks), ~masks[:, :k]


def _learned_loss(task: _LearnedTask, params: dict, batch) -> Array:
    """Mean over patterns of the MSE on the erased base outputs (module docstring)."""
    k = task.num_inputs
    x = batch.x.reshape(-1, k, *batch.x.shape[1:])
    y = batch.y.reshape(-1, k, batch.y.shape[-1])
    recon, erased = _pattern_terms(task, params, x, y)
    err = jnp.mean((recon - y[None]) ** 2, axis=-1)  # (P, b, k)
    w = jnp.broadcast_to(erased[:, None, :], err.shape).astype(err.dtype)
    per_pattern = jnp.sum(err * w, axis=(1, 2)) / jnp.sum(w, axis=(1, 2))
    return jnp.mean(per_pattern)


@functools.partial(jax.jit, static_argnames="task")
def _learned_val_agreement(task: _LearnedTask, params: dict, x: Array, y: Array) -> Array:
    """Agreement of the decoded argmax with the base argmax on the erased slots (all patterns)."""
    recon, erased = _pattern_terms(task, params, x, y)
    hit = jnp.argmax(recon, axis=-1) == jnp.argmax(y, axis=-1)[None]  # (P, b, k)
    w = jnp.broadcast_to(erased[:, None, :], hit.shape)
    return jnp.sum(hit & w) / jnp.sum(w)


def train_learned_code(
    base_apply: Callable,
    base_params: Any,
    x_train: Float[ArrayLike, "n *d"],
    *,
    num_inputs: int,
    num_parities: int = 1,
    encoder: str = "mlp",
    encoder_hidden: Sequence[int] | None = None,
    decoder_hidden: Sequence[int] | None = None,
    channels: int | None = None,
    settings: TrainSettings = TrainSettings(),
) -> TrainedCode:
    """Train a :class:`LearnedCode` end to end through the frozen base model (or load it).

    With ``F = base_apply(base_params, ·)`` frozen (its raw outputs), minimises over the
    encoder and decoder parameters ``(θ, φ)``

        L = (1/|𝒫|) Σ_{M ∈ 𝒫} mean_{groups} mean_{j erased by M} (1/m) ‖D_φ(Y ⊙ M)_j − F(x_j)‖²,

    ``Y = (F(x_1), …, F(x_k), F(E_θ(x)_1), …, F(E_θ(x)_r))`` and ``𝒫`` =
    :func:`erasure_patterns` — the gradient reaches ``θ`` through ``F``. With ``settings``
    (:class:`gcc_jax.nn.training.TrainSettings`): Adam(``lr``) with an L2 weight decay
    (:func:`gcc_jax.nn.training.adam_l2`), random groups of ``k`` training images reshuffled
    every epoch (:func:`gcc_jax.nn.training.fit`: deterministic for a seed,
    progress bar), a held-out ``val_fraction`` of the images in fixed groups on which the
    degraded-mode reconstruction accuracy is recorded after each epoch, and the checkpoint
    cached (:func:`gcc_jax.nn.training.cached_fit`) under a key hashing every hyper-parameter, the
    base model's parameters and the training images.

    Args:
        base_apply: ``base_apply(params, x)``: one input → raw outputs ``(m,)``.
        base_params: the frozen base model's parameters.
        x_train: training inputs ``(n, ...)``.
        num_inputs: ``k ≥ 2``.
        num_parities: ``r ≥ 1``.
        encoder, encoder_hidden, decoder_hidden, channels: architecture (:meth:`LearnedCode.init`).
        settings: epochs, batch size, optimiser, validation split, seed (also of the
            initialisation), cache and progress.

    Returns:
        A :class:`gcc_jax.nn.training.TrainedCode` holding the :class:`LearnedCode`.

    Raises:
        ValueError: bad sizes or hyper-parameters.

    Example:
        >>> import numpy as np, jax.numpy as jnp, gcc_jax as gcc
        >>> from gcc_jax.nn.data import load_digits
        >>> lin = lambda p, x: p @ jnp.ravel(x)
        >>> w = jnp.asarray(np.random.default_rng(0).normal(size=(10, 64)), jnp.float32)
        >>> from gcc_jax.nn.training import TrainSettings
        >>> quick = TrainSettings(epochs=2, use_cache=False, progress=False)
        >>> tc = gcc.train_learned_code(lin, w, load_digits().x_train, num_inputs=2,
        ...                             encoder_hidden=(32,), settings=quick)
        >>> tc.code.num_workers, tc.train_losses[-1] < tc.train_losses[0]
        (3, True)
    """
    k = check_size(num_inputs, "num_inputs", 2)
    r = check_size(num_parities, "num_parities", 1)
    x_train = check_train_args(x_train, k, settings)
    shape = x_train.shape[1:]
    m = int(np.prod(jax.eval_shape(lambda v: base_apply(base_params, v), x_train[0]).shape))
    init = LearnedCode.init(
        key=int(settings.seed),
        num_inputs=k,
        input_shape=shape,
        output_size=m,
        num_parities=r,
        encoder=encoder,
        encoder_hidden=encoder_hidden,
        decoder_hidden=decoder_hidden,
        channels=channels,
    )
    init_params = {"encoder": init.encoder_params, "decoder": init.decoder_params}
    patterns = erasure_patterns(k, r)
    task = _LearnedTask(
        base_apply, base_params, k, r, encoder, tuple(tuple(bool(v) for v in p) for p in patterns)
    )
    config = {
        "method": "learned",
        "num_inputs": k,
        "num_parities": r,
        "encoder": encoder,
        "architecture": [list(np.shape(v)) for v in jax.tree.leaves(init_params)],
        "base_model": getattr(base_apply, "name", getattr(base_apply, "__name__", "?")),
        "base_params": tree_fingerprint(base_params),
    }
    label = f"learned code k={k} r={r} {encoder}"
    out, config = fit_on_groups_cached(
        "learned", task, init_params, x_train,
        lambda: base_outputs(base_apply, base_params, x_train).reshape(x_train.shape[0], -1),
        k, settings, config, loss_fn=_learned_loss, agreement=_learned_val_agreement, label=label,
    )  # fmt: skip
    code = LearnedCode(
        out.params["encoder"], out.params["decoder"], num_inputs=k, num_parities=r, encoder=encoder
    )
    return trained_code(code, out, config, label, settings.progress)
