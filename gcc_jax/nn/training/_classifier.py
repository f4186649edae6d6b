"""`train_classifier`: train (or load from the cache) a model on a data set."""

import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Float

from ..._core.progress import tqdm
from ..data import Dataset, load_dataset
from ..models import ModelApply, make_model, predict_proba, worker_function
from ..models._apply import Params, canonical_model_name
from ._cached import TrainingRun, cached_fit
from ._loop import accuracy, fit

__all__ = ["TrainedModel", "train_classifier", "validation_indices"]


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedModel(TrainingRun):
    """A trained classifier: its pure forward function, its parameters and how it got them.

    After the fields below come, keyword-only, those of its `TrainingRun` (``train_losses``,
    ``num_steps``, ``from_cache``, ``cache_path``, ``train_time_s``, ``config``).

    Attributes:
        apply: ``apply(params, x)``: a batch ``(b, H, W, C)`` to logits ``(b, num_classes)``.
        params: the trained parameters (a nested dict of float32 arrays).
        model_name: canonical model name.
        dataset_name: name of the data set it was trained on.
        test_accuracy: top-1 accuracy on the data set's test split.
        val_accuracy: top-1 accuracy on the held-out validation split (``nan`` without one).
        val_accuracies: validation accuracy after each epoch.
        num_steps: optimiser steps run by *this call* (0 when loaded from the cache).
    """

    apply: ModelApply
    params: Params
    model_name: str
    dataset_name: str
    test_accuracy: float
    val_accuracy: float
    val_accuracies: tuple[float, ...]

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(H, W, C)`` of one input."""
        return self.apply.input_shape

    @property
    def num_classes(self) -> int:
        """Number of classes (the worker output size ``m``)."""
        return self.apply.num_classes

    def predict_proba(self, x: Float[ArrayLike, "*b H W C"]) -> Float[Array, "*b num_classes"]:
        """Softmax probabilities of one image or a batch."""
        return predict_proba(self.apply, self.params, x)

    def worker_fn(
        self, output: str = "probs"
    ) -> Callable[[Float[Array, "*shape"]], Float[Array, " m"]]:
        """The single-input worker function ``f(x) -> softmax probs (num_classes,)``.

        See `gcc_jax.nn.models.worker_function`.
        """
        return worker_function(self.apply, self.params, output=output)

    def validation_indices(self, num_train: int) -> np.ndarray:
        """Training-split indices held out from this model's training (see `validation_indices`).

        Images the model never trained on and that are not test images: where an experiment
        tunes anything (GCC's λ) on the model's outputs. Empty when it was trained with
        ``val_fraction=0``.

        Args:
            num_train: size of the training split of the model's data set.
        """
        return validation_indices(
            num_train, float(self.config.get("val_fraction", 0.0)), int(self.config["seed"])
        )


def validation_indices(num_train: int, val_fraction: float, seed: int) -> np.ndarray:
    """The training-split indices `train_classifier` holds out for validation.

    ``permutation(num_train)[:n_val]`` of ``np.random.default_rng((seed, 0x5EED))``, with
    ``n_val = round(val_fraction · num_train)`` clipped to ``[1, num_train − 1]`` when
    ``val_fraction > 0`` (0 otherwise); the model is trained on the other indices.

    Args:
        num_train: size of the training split.
        val_fraction: held-out fraction, in ``[0, 1)``.
        seed: the training seed.

    Returns:
        ``(n_val,)`` int indices into the training split, in permutation order.

    Raises:
        ValueError: if ``val_fraction`` is outside ``[0, 1)``.

    Example:
        >>> idx = validation_indices(100, 0.1, seed=0)
        >>> idx.shape, bool(np.all((0 <= idx) & (idx < 100)))
        ((10,), True)
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in [0, 1); got {val_fraction}")
    n_val = int(round(val_fraction * num_train))
    if val_fraction > 0:
        n_val = min(max(n_val, 1), num_train - 1)
    return np.random.default_rng((seed, 0x5EED)).permutation(num_train)[:n_val]


@functools.lru_cache(maxsize=16)
def _adamw(lr: float, weight_decay: float) -> optax.GradientTransformation:
    """One optimiser object per setting, so repeated runs reuse the compiled training step."""
    return optax.adamw(lr, weight_decay=weight_decay)


def _split_validation(ds: Dataset, val_fraction: float, seed: int):
    val = validation_indices(ds.num_train, val_fraction, seed)
    train = np.setdiff1d(np.arange(ds.num_train), val)  # sorted
    return (ds.x_train[train], ds.y_train[train]), (ds.x_train[val], ds.y_train[val])


def train_classifier(
    model_name: str,
    dataset: str | Dataset = "digits",
    *,
    epochs: int = 10,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    val_fraction: float = 0.1,
    seed: int = 0,
    model_kwargs: dict[str, Any] | None = None,
    data_path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> TrainedModel:
    """Train a classifier with Adam(W) on cross-entropy, or load it from the checkpoint cache.

    Minimises the mean softmax cross-entropy ``-(1/b) Σ_i log softmax(apply(θ, x_i))[y_i]``
    over mini-batches with ``optax.adamw(lr, weight_decay)`` (plain Adam at
    ``weight_decay=0``). A ``val_fraction`` of the training images, chosen by ``seed``, is held
    out for validation; the test split is used only for the reported test accuracy. Parameters
    are initialised from ``seed`` and the batches shuffled by ``seed``, so the same arguments
    give bit-identical parameters on the same machine.

    The checkpoint is cached by :func:`cached_fit` (kind ``"models"``): in ``cache_dir``, else
    ``$GCC_JAX_CACHE``, else ``$XDG_CACHE_HOME/gcc_jax``, else ``~/.cache/gcc_jax``, under
    ``models/``. Its key hashes
    the model name and options, the data set name and content fingerprint, and every
    hyper-parameter, so a second identical call loads instead of training. A corrupt or
    mismatched checkpoint gives a `CacheWarning` and is retrained and overwritten.

    Args:
        model_name: ``"mlp"``, ``"lenet5"``, ``"cnn"`` or ``"vit"`` (see `make_model`).
        dataset: a `Dataset` or a name for `load_dataset`.
        epochs: passes over the training data.
        batch_size: mini-batch size.
        lr: learning rate.
        weight_decay: decoupled weight decay (AdamW).
        val_fraction: fraction of the training split held out for validation, in ``[0, 1)``.
        seed: seed of the initialisation, the validation split and the shuffling.
        model_kwargs: architecture options passed to `make_model`.
        data_path: directory of the data files when ``dataset`` is a name.
        cache_dir: cache directory (overrides the environment).
        use_cache: read and write the cache; ``False`` always trains and writes nothing.
        progress: show a progress bar and a one-line summary.

    Returns:
        A `TrainedModel`; ``from_cache`` and ``num_steps`` say whether training ran.

    Raises:
        ValueError: for an unknown model, bad hyper-parameters or an input shape the model
            cannot take.
        DatasetNotFoundError: if ``dataset`` names files that are missing.

    Example:
        >>> tm = train_classifier("mlp", "digits", epochs=2, progress=False, use_cache=False)
        >>> tm.test_accuracy > 0.5
        True
    """
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, data_path)
    name = canonical_model_name(model_name)
    model_kwargs = dict(model_kwargs or {})
    config = {
        "model": name,
        "model_kwargs": model_kwargs,
        "dataset": ds.name,
        "dataset_fingerprint": ds.fingerprint,
        "epochs": int(epochs),
        "batch_size": int(batch_size),
        "lr": float(lr),
        "weight_decay": float(weight_decay),
        "val_fraction": float(val_fraction),
        "seed": int(seed),
        "optimizer": "adamw",
    }
    apply, params = make_model(
        name, input_shape=ds.input_shape, num_classes=ds.num_classes, key=seed, **model_kwargs
    )

    def train():
        (x_tr, y_tr), (x_val, y_val) = _split_validation(ds, val_fraction, seed)
        res = fit(
            apply,
            params,
            x_tr,
            y_tr,
            optimizer=_adamw(float(lr), float(weight_decay)),
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            validation=(x_val, y_val) if len(y_val) else None,
            progress=progress,
            desc=f"train {name} on {ds.name}",
        )
        test_acc = accuracy(apply, res.params, ds.x_test, ds.y_test)
        meta = {
            "test_accuracy": test_acc,
            "val_accuracy": res.val_accuracies[-1] if res.val_accuracies else float("nan"),
            "train_losses": list(res.train_losses),
            "val_accuracies": list(res.val_accuracies),
            "num_steps": res.num_steps,
        }
        return res.params, meta

    def check(meta: dict[str, Any]) -> None:
        float(meta["test_accuracy"]), float(meta["val_accuracy"])
        [float(v) for v in meta["train_losses"]] + [float(v) for v in meta["val_accuracies"]]

    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in [0, 1); got {val_fraction}")
    out = cached_fit(
        "models",
        config,
        params,
        train,
        cache_dir=cache_dir,
        use_cache=use_cache,
        check_metadata=check,
    )
    meta = out.metadata
    val_acc = meta["val_accuracy"]
    result = TrainedModel(
        apply=apply,
        params=out.params,
        model_name=name,
        dataset_name=ds.name,
        test_accuracy=float(meta["test_accuracy"]),
        val_accuracy=float("nan") if val_acc is None else float(val_acc),
        train_losses=tuple(float(v) for v in meta["train_losses"]),
        val_accuracies=tuple(float(v) for v in meta["val_accuracies"]),
        num_steps=0 if out.from_cache else int(meta["num_steps"]),
        from_cache=out.from_cache,
        cache_path=out.cache_path,
        train_time_s=out.train_time_s,
        config=config,
    )
    if progress:
        if out.from_cache:
            tqdm.write(
                f"loaded {name} on {ds.name} from {out.cache_path}.npz: test accuracy "
                f"{result.test_accuracy:.4f}",
                file=sys.stderr,
            )
        else:
            tqdm.write(
                f"trained {name} on {ds.name} in {out.train_time_s:.1f} s "
                f"({result.num_steps} steps): val accuracy {result.val_accuracy:.4f}, "
                f"test accuracy {result.test_accuracy:.4f}",
                file=sys.stderr,
            )
    return result
