"""Optax training loop: a pure jitted step, deterministic epochs, accuracy evaluation."""

import functools
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PyTree, Shaped

from ..._core.progress import tqdm

__all__ = ["Batch", "FitResult", "StepResult", "accuracy", "fit", "make_train_step"]

Params = PyTree[Float[Array, "..."]]


class Batch(NamedTuple):
    """One mini-batch: inputs ``x: (b, ...)`` (images ``(b, H, W, C)`` for a classifier) and
    targets ``y: (b, ...)`` (integer labels ``(b,)`` for the cross-entropy loss)."""

    x: Float[ArrayLike, "b ..."]
    y: Shaped[ArrayLike, "b ..."]


class StepResult(NamedTuple):
    """What a training step returns: the new parameters and optimiser state, and the loss."""

    params: Params
    opt_state: optax.OptState
    loss: Float[Array, ""]


class FitResult(NamedTuple):
    """Outcome of `fit`.

    Attributes:
        params: the trained parameters.
        opt_state: the final optimiser state.
        train_losses: mean training loss of each epoch, ``(epochs,)``.
        val_accuracies: validation accuracy after each epoch, ``(epochs,)`` (the values of
            ``validate`` when given; empty without validation data).
        num_steps: number of optimiser steps taken.
    """

    params: Params
    opt_state: optax.OptState
    train_losses: tuple[float, ...]
    val_accuracies: tuple[float, ...]
    num_steps: int


def cross_entropy_loss(apply: Callable, params: Params, batch: Batch) -> Float[Array, ""]:
    """Mean softmax cross-entropy ``-(1/b) Σ_i log softmax(apply(params, x_i))[y_i]``."""
    logits = apply(params, batch.x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch.y).mean()


def make_train_step(
    apply: Callable | Hashable,
    optimizer: optax.GradientTransformation,
    loss_fn: Callable[[Callable, Params, Batch], Float[Array, ""]] = cross_entropy_loss,
) -> Callable[[Params, optax.OptState, Batch], StepResult]:
    """Build the pure, jitted training step ``step(params, opt_state, batch)``.

    One step of ``θ ← θ + optimizer_update(∇_θ L(θ; batch))`` with ``L`` the mean softmax
    cross-entropy of ``apply(θ, x)`` against the integer labels (or ``loss_fn``).

    Args:
        apply: the model's forward function ``apply(params, x) -> logits`` (with a custom
            ``loss_fn``, any hashable object that loss understands).
        optimizer: an Optax gradient transformation (e.g. ``optax.adam(1e-3)``).
        loss_fn: ``loss_fn(apply, params, batch) -> scalar``; cross-entropy by default.

    Returns:
        ``step(params, opt_state, batch) -> StepResult(params, opt_state, loss)``, compiled
        once per batch shape.

    Example:
        >>> from gcc_jax.nn.models import make_model
        >>> apply, params = make_model("mlp", input_shape=(8, 8, 1), num_classes=10)
        >>> opt = optax.adam(1e-3)
        >>> step = make_train_step(apply, opt)
        >>> batch = Batch(jnp.zeros((4, 8, 8, 1)), jnp.zeros(4, jnp.int32))
        >>> params, opt_state, loss = step(params, opt.init(params), batch)
    """

    @jax.jit
    def step(params: Params, opt_state: optax.OptState, batch: Batch) -> StepResult:
        # Optax mixes Python floats with integer step counts, which the "strict" promotion mode
        # (used by the test suite) rejects; the step itself is dtype-explicit.
        with jax.numpy_dtype_promotion("standard"):
            loss, grads = jax.value_and_grad(loss_fn, argnums=1)(apply, params, batch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return StepResult(optax.apply_updates(params, updates), opt_state, loss)

    return step


@functools.lru_cache(maxsize=16)
def _cached_train_step(
    apply: Callable | Hashable,
    optimizer: optax.GradientTransformation,
    loss_fn: Callable = cross_entropy_loss,
) -> Callable:
    """`make_train_step`, reused (with its compiled code) for an equal model, optimiser, loss."""
    return make_train_step(apply, optimizer, loss_fn)


@functools.partial(jax.jit, static_argnums=0)
def _count_correct(apply: Callable, params: Params, x: Array, y: Array, valid: Array) -> Array:
    pred = jnp.argmax(apply(params, x), axis=-1)
    return jnp.sum((pred == y.astype(pred.dtype)) & valid)


def accuracy(
    apply: Callable,
    params: Params,
    x: Float[ArrayLike, "n H W C"],
    y: Int[ArrayLike, " n"],
    *,
    batch_size: int = 1000,
) -> float:
    """Top-1 accuracy ``(1/n) Σ_i [argmax apply(params, x_i) = y_i]``, in fixed-size chunks.

    Every chunk has ``batch_size`` rows (the last is padded and the padding ignored), so the
    prediction compiles once per model whatever the size of the set.

    Args:
        apply: the model's forward function.
        params: its parameters.
        x: images ``(n, H, W, C)``.
        y: integer labels ``(n,)``.
        batch_size: chunk size (bounds memory).

    Returns:
        The accuracy in ``[0, 1]`` (``nan`` for an empty set).

    Example:
        >>> from gcc_jax.nn.models import make_model
        >>> apply, params = make_model("mlp", input_shape=(8, 8, 1), num_classes=10)
        >>> 0.0 <= accuracy(apply, params, np.zeros((5, 8, 8, 1)), np.zeros(5, np.int32)) <= 1.0
        True
    """
    x, y = np.asarray(x), np.asarray(y)
    n = x.shape[0]
    if y.shape != (n,):
        raise ValueError(f"`y` must have shape ({n},) to match `x`; got {y.shape}")
    if n == 0:
        return float("nan")
    size = batch_size
    correct = 0
    for start in range(0, n, size):
        xb, yb = x[start : start + size], y[start : start + size]
        valid = np.ones(size, bool)
        if xb.shape[0] < size:
            pad = size - xb.shape[0]
            valid[size - pad :] = False
            xb = np.concatenate([xb, np.zeros((pad, *xb.shape[1:]), xb.dtype)])
            yb = np.concatenate([yb, np.zeros(pad, yb.dtype)])
        correct += int(_count_correct(apply, params, xb, yb, valid))
    return correct / n


def fit(
    apply: Callable | Hashable,
    params: Params,
    x_train: Float[ArrayLike, "n ..."],
    y_train: Shaped[ArrayLike, "n ..."],
    *,
    optimizer: optax.GradientTransformation,
    epochs: int,
    batch_size: int,
    seed: int,
    validation: tuple[Any, Any] | None = None,
    progress: bool = True,
    desc: str = "train",
    loss_fn: Callable[[Callable, Params, Batch], Float[Array, ""]] = cross_entropy_loss,
    validate: Callable[[Params], float] | None = None,
) -> FitResult:
    """Train ``params`` by mini-batch descent with ``optimizer`` for ``epochs`` epochs.

    Each epoch visits a fresh random permutation of the training set (a NumPy generator seeded
    by ``seed``) in ``n // batch_size`` full batches (the remainder of the permutation is left
    out, so the step compiles once); the same seed gives bit-identical parameters on the same
    machine.

    Args:
        apply: the model's forward function ``apply(params, x) -> logits`` (with a custom
            ``loss_fn``, any hashable object that loss understands).
        params: initial parameters.
        x_train: inputs ``(n, ...)`` (images ``(n, H, W, C)`` for the models of
            :mod:`gcc_jax.nn.models`).
        y_train: integer labels ``(n,)`` (with a custom ``loss_fn``, any per-example targets
            ``(n, ...)``).
        optimizer: an Optax gradient transformation.
        epochs: number of passes over the data.
        batch_size: mini-batch size (clipped to ``n``).
        seed: seed of the shuffling.
        validation: optional ``(x_val, y_val)``, evaluated after each epoch.
        progress: show a tqdm progress bar (steps, with the epoch's loss and validation
            accuracy).
        desc: the progress bar's label.
        loss_fn: ``loss_fn(apply, params, Batch(x, y)) -> scalar`` minimised (default: mean
            softmax cross-entropy); keep one function object per loss so that the compiled
            step is reused.
        validate: optional ``validate(params) -> float`` evaluated after each epoch *instead*
            of the accuracy on ``validation``; its values fill ``val_accuracies``.

    Returns:
        A `FitResult` with the trained parameters and the per-epoch history.

    Raises:
        ValueError: for an empty training set, non-positive ``epochs`` or ``batch_size``.

    Example:
        >>> from gcc_jax.nn.data import load_digits
        >>> from gcc_jax.nn.models import make_model
        >>> ds = load_digits()
        >>> apply, params = make_model("mlp", input_shape=ds.input_shape, num_classes=10)
        >>> res = fit(apply, params, ds.x_train, ds.y_train, optimizer=optax.adam(1e-3),
        ...           epochs=1, batch_size=64, seed=0, progress=False)
        >>> len(res.train_losses)
        1
    """
    x_train, y_train = np.asarray(x_train), np.asarray(y_train)
    n = x_train.shape[0]
    if n == 0:
        raise ValueError("`x_train` is empty")
    custom = loss_fn is not cross_entropy_loss
    if (y_train.shape[:1] if custom else y_train.shape) != (n,):
        raise ValueError(
            f"`y_train` must have shape ({n},{' ...' if custom else ''}) to match `x_train`; "
            f"got {y_train.shape}"
        )
    if epochs < 1 or batch_size < 1:
        raise ValueError(
            f"`epochs` and `batch_size` must be positive; got epochs={epochs}, "
            f"batch_size={batch_size}"
        )
    batch_size = min(batch_size, n)
    steps_per_epoch = n // batch_size
    step = _cached_train_step(apply, optimizer, loss_fn)
    opt_state = optimizer.init(params)
    rng = np.random.default_rng(seed)
    losses: list[float] = []
    val_accs: list[float] = []
    with tqdm(total=epochs * steps_per_epoch, desc=desc, disable=not progress, leave=False) as bar:
        for epoch in range(epochs):
            perm = rng.permutation(n)
            epoch_losses = []
            for i in range(steps_per_epoch):
                idx = perm[i * batch_size : (i + 1) * batch_size]
                params, opt_state, loss = step(params, opt_state, Batch(x_train[idx], y_train[idx]))
                epoch_losses.append(loss)
                bar.update()
            losses.append(float(jnp.mean(jnp.stack(epoch_losses))))
            postfix = {"epoch": epoch + 1, "loss": f"{losses[-1]:.4f}"}
            if validate is not None or validation is not None:
                val_accs.append(
                    float(validate(params))
                    if validate is not None
                    else accuracy(apply, params, *validation)
                )
                postfix["val" if validate is not None else "val_acc"] = f"{val_accs[-1]:.4f}"
            bar.set_postfix(postfix)
    return FitResult(params, opt_state, tuple(losses), tuple(val_accs), epochs * steps_per_epoch)
