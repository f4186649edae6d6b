"""The localizer: a small CNN that predicts the box of a digit pasted on a 40×40 canvas.

One trained model for every experiment with the localization (regression) workload — ``gcc-jax
run --dataset localization`` and the ``localization`` workload of ``gcc-jax regimes``: both call
:func:`train_localizer`, so equal :class:`LocalizerSettings` load the same checkpoint.

* **Images** (:func:`gcc_jax.nn.data.make_localization` with the settings' seed):
  ``num_train + num_held_out`` training-split images and ``num_test`` test images, fixed sizes
  that no experiment's batch sizes change. The model trains on the first ``num_train``; the
  other ``num_held_out`` are held out — the pool of λ's cross-validation batches
  (:func:`gcc_jax.experiments._images.draw_split`); evaluation batches come from the test split.
* **Model**: :class:`gcc_jax.nn.models.SmallCNN` (``make_model("cnn")``) with 4 outputs, the box
  ``g(x) = (x₀, y₀, x₁, y₁)/40``; the worker function is ``g`` itself (no softmax).
* **Training**: :func:`gcc_jax.nn.training.fit` (Adam) on the box MSE
  ``(1/b) Σ_i ‖g(x_i) − box_i‖₂²`` (:func:`box_loss`), seeded, through
  :func:`gcc_jax.nn.training.cached_fit` (kind ``"localizer"``); the cache key holds every
  setting and a fingerprint of the training images and boxes.
* **Record** (:attr:`Localizer.record`): test box MSE ``(1/n) Σ_i ‖g(x_i) − box_i‖₂²`` and mean
  IoU of the predicted boxes (:func:`box_metrics`) on the ``num_test`` test images, the settings,
  ``num_params``, ``params_fingerprint`` (:func:`gcc_jax.nn.training.tree_fingerprint`),
  ``from_cache`` and the training's wall time.
"""

import os
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.types import Array
from ..nn.data import Localization, make_localization
from ..nn.models import count_params, make_model, worker_function
from ..nn.training import cached_fit, fit, tree_fingerprint
from ._images import ImageSplit, draw_split

__all__ = [
    "MODEL",
    "Localizer",
    "LocalizerSettings",
    "box_loss",
    "box_metrics",
    "localizer_model",
    "train_localizer",
]

MODEL = "cnn"
"""The localizer's architecture (:func:`gcc_jax.nn.models.make_model` name)."""

_SHAPE = (40, 40, 1)  # one canvas
_OUTPUTS = 4  # the box (x0, y0, x1, y1) / 40


class LocalizerSettings(NamedTuple):
    """Everything the trained localizer depends on (the checkpoint cache's key).

    Attributes:
        epochs: training epochs.
        batch_size: training batch size.
        lr: Adam's learning rate.
        seed: seeds the images, the initial parameters and the batch order.
        num_train: training images.
        num_held_out: training-split images held out from training (the CV pool).
        num_test: test images.
    """

    epochs: int = 20
    batch_size: int = 64
    lr: float = 1e-3
    seed: int = 0
    num_train: int = 6000
    num_held_out: int = 1000
    num_test: int = 1000


class Localizer(NamedTuple):
    """A trained localizer and its images.

    Attributes:
        apply: ``apply(params, x) -> box``, batched (:func:`localizer_model`).
        params: the trained parameters.
        data: the images and boxes; training split = ``num_train`` training images, then the
            held-out ones.
        settings: the :class:`LocalizerSettings` it was trained with.
        record: the JSON record (module docstring).
    """

    apply: Callable
    params: Any
    data: Localization
    settings: LocalizerSettings
    record: dict

    def worker_fn(self) -> Callable[[Array], Array]:
        """``f(x) = g(x)``: one canvas in, its 4 box coordinates out."""
        return worker_function(self.apply, self.params, output="logits")

    def held_out(self) -> np.ndarray:
        """Training-split indices the model was not trained on (the CV pool)."""
        return np.arange(self.settings.num_train, self.data.x_train.shape[0])

    def split(
        self, *, num_inputs: int, num_batches: int, num_cv_batches: int, seed: int
    ) -> ImageSplit:
        """CV batches from the held-out images, evaluation batches from the test split, by the
        rule of :func:`gcc_jax.experiments._images.draw_split`."""
        return draw_split(
            "localization", self.data.x_test.shape[0], self.held_out(), "validation",
            num_inputs=num_inputs, num_batches=num_batches, num_cv_batches=num_cv_batches,
            seed=seed,
        )  # fmt: skip


def localizer_model(seed: int) -> tuple[Callable, Any]:
    """``(apply, initial params)`` of the localizer's architecture, initialised with ``seed``."""
    return make_model(MODEL, input_shape=_SHAPE, num_classes=_OUTPUTS, key=seed)


def box_loss(apply: Callable, params, batch) -> Array:
    """Mean squared box error ``(1/b) Σ_i ‖apply(params, x_i) − box_i‖₂²`` (the training loss)."""
    err = apply(params, batch.x) - batch.y
    return jnp.mean(jnp.sum(err * err, axis=-1))


def box_metrics(pred: np.ndarray, box: np.ndarray) -> dict[str, float]:
    """Box MSE ``(1/n) Σ_i ‖pred_i − box_i‖₂²`` and the mean intersection over union.

    Boxes are ``(x₀, y₀, x₁, y₁)``; an inverted predicted box has area 0.

    Example:
        >>> box = np.array([[0.0, 0.0, 0.5, 1.0]])
        >>> box_metrics(np.array([[0.0, 0.0, 0.5, 0.5]]), box)
        {'test_mse': 0.25, 'mean_iou': 0.5}
    """
    lo = np.maximum(pred[:, :2], box[:, :2])
    hi = np.minimum(pred[:, 2:], box[:, 2:])
    inter = np.prod(np.clip(hi - lo, 0.0, None), axis=1)

    def area(b):
        return np.prod(np.clip(b[:, 2:] - b[:, :2], 0.0, None), axis=1)

    iou = inter / np.maximum(area(pred) + area(box) - inter, 1e-12)
    return {
        "test_mse": float(np.mean(np.sum((pred - box) ** 2, axis=1))),
        "mean_iou": float(iou.mean()),
    }


def train_localizer(
    settings: LocalizerSettings = LocalizerSettings(),
    *,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    progress: bool = False,
) -> Localizer:
    """Make the images and train the localizer (or load it from the checkpoint cache).

    Args:
        settings: the :class:`LocalizerSettings`.
        cache_dir: checkpoint cache directory (default: ``$GCC_JAX_CACHE`` or the XDG cache).
        use_cache: read and write the checkpoint cache.
        progress: a training progress bar.

    Returns:
        The :class:`Localizer` (module docstring).
    """
    import optax

    s = settings
    data = make_localization(s.num_train + s.num_held_out, s.num_test, seed=s.seed)
    x_fit, y_fit = data.x_train[: s.num_train], data.y_train[: s.num_train]
    apply, init = localizer_model(s.seed)
    config = {"model": MODEL, "outputs": _OUTPUTS, "epochs": int(s.epochs),
              "batch_size": int(s.batch_size), "lr": float(s.lr), "seed": int(s.seed),
              "loss": "box mse", "data": tree_fingerprint(x_fit, y_fit)}  # fmt: skip

    def train():
        r = fit(apply, init, x_fit, y_fit, optimizer=optax.adam(s.lr), epochs=int(s.epochs),
                batch_size=int(s.batch_size), seed=s.seed, progress=progress, desc="localizer",
                loss_fn=box_loss)  # fmt: skip
        return r.params, {"train_losses": list(r.train_losses)}

    trained = cached_fit("localizer", config, init, train, cache_dir=cache_dir, use_cache=use_cache)
    pred = np.asarray(jax.jit(apply)(trained.params, jnp.asarray(data.x_test)))
    record = {
        "name": "small CNN (SmallCNN, 4 outputs: the box)",
        "dataset": "localization (digits on a 40x40 canvas, offline)",
        **box_metrics(pred, data.y_test),
        "num_test": int(s.num_test),
        "epochs": int(s.epochs),
        "batch_size": int(s.batch_size),
        "lr": float(s.lr),
        "seed": int(s.seed),
        "num_train": int(s.num_train),
        "num_held_out": int(s.num_held_out),
        "num_params": count_params(trained.params),
        "params_fingerprint": tree_fingerprint(trained.params),
        "from_cache": trained.from_cache,
        "train_time_s": trained.train_time_s,
    }
    return Localizer(apply, trained.params, data, s, record)
