"""Which images an experiment with a trained image model tunes on and which it scores.

One rule for every experiment that chooses GCC's λ (or trains anything) on an image model's
outputs (``gcc-jax run``, the LeNet-5 and localization workloads of ``gcc-jax regimes``):
tuning never sees a test image.

* **Evaluation** batches: the first ``num_batches·K`` images of the *test* split shuffled with
  ``np.random.default_rng((seed, 0xD1A)).permutation``.
* **Cross-validation** batches: the first ``num_cv_batches·K`` of the model's held-out
  validation images — *training-split* images it was not trained on,
  :meth:`gcc_jax.nn.training.TrainedModel.validation_indices` — shuffled with
  ``np.random.default_rng((seed, 0xC5)).permutation`` (the whole training split if the model
  was trained without a validation split; ``cv_pool`` says which). The localizer's pool is its
  held-out training-split images (:mod:`gcc_jax.experiments._localizer`).
"""

from typing import NamedTuple

import numpy as np

from ..nn.data import Dataset, Localization
from ..nn.training import TrainedModel

__all__ = ["ImageSplit", "draw_split", "ordered", "split_images"]


class ImageSplit(NamedTuple):
    """Image indices of the cross-validation and evaluation batches.

    Attributes:
        cv: ``(num_cv_batches, K)`` indices into the *training* split.
        eval: ``(num_batches, K)`` indices into the *test* split.
        cv_pool: ``"validation"`` (the model's held-out training images) or ``"train"``.
    """

    cv: np.ndarray
    eval: np.ndarray
    cv_pool: str

    def record(self) -> dict:
        """The JSON record: ``{cv_split, cv_pool, cv, eval_split, eval}`` (lists of indices)."""
        return {
            "cv_split": "train",
            "cv_pool": self.cv_pool,
            "cv": self.cv.tolist(),
            "eval_split": "test",
            "eval": self.eval.tolist(),
        }


def split_images(
    ds: Dataset,
    trained: TrainedModel,
    *,
    num_inputs: int,
    num_batches: int,
    num_cv_batches: int,
    seed: int,
) -> ImageSplit:
    """CV batches from the model's held-out training images, evaluation batches from the test split.

    See the module docstring for the rule.

    Args:
        ds: the data set ``trained`` was trained on.
        trained: the classifier (its ``config`` holds ``val_fraction`` and ``seed``).
        num_inputs: ``K`` images per batch.
        num_batches: evaluation batches.
        num_cv_batches: cross-validation batches (``0`` allowed).
        seed: the experiment's seed.

    Returns:
        The :class:`ImageSplit`.

    Raises:
        ValueError: if the test split or the held-out training images are too few.

    Example:
        >>> from gcc_jax.nn.models import make_model
        >>> from gcc_jax.nn.data import load_digits
        >>> ds = load_digits()
        >>> apply, params = make_model("mlp", input_shape=ds.input_shape, num_classes=10, key=0)
        >>> tm = TrainedModel(apply, params, "mlp", ds.name, 0.0, 0.0, (), train_losses=(),
        ...                   num_steps=0, from_cache=False, cache_path=None, train_time_s=0.0,
        ...                   config={"val_fraction": 0.1, "seed": 0})
        >>> sp = split_images(ds, tm, num_inputs=4, num_batches=3, num_cv_batches=2, seed=0)
        >>> sp.cv.shape, sp.eval.shape, sp.cv_pool
        ((2, 4), (3, 4), 'validation')
    """
    pool = trained.validation_indices(ds.num_train)
    pool_name = "validation" if pool.size else "train"
    if not pool.size:
        pool = np.arange(ds.num_train)
    return draw_split(
        ds.name, ds.num_test, pool, pool_name,
        num_inputs=num_inputs, num_batches=num_batches, num_cv_batches=num_cv_batches, seed=seed,
    )  # fmt: skip


def draw_split(
    name: str,
    num_test: int,
    pool: np.ndarray,
    pool_name: str,
    *,
    num_inputs: int,
    num_batches: int,
    num_cv_batches: int,
    seed: int,
) -> ImageSplit:
    """The rule of the module docstring on a test split of ``num_test`` images and a pool of
    held-out training-split indices ``pool`` (what :func:`split_images` draws from).

    Args:
        name: the data set's name (for the error messages).
        num_test: images in the test split.
        pool: training-split indices the CV batches may use.
        pool_name: ``"validation"`` (held out from training) or ``"train"``.
        num_inputs, num_batches, num_cv_batches, seed: as in :func:`split_images`.

    Returns:
        The :class:`ImageSplit`.

    Raises:
        ValueError: if the test split or the pool is too small.

    Example:
        >>> sp = draw_split("toy", 10, np.arange(20, 26), "validation", num_inputs=3,
        ...                 num_batches=2, num_cv_batches=2, seed=0)
        >>> sp.eval.shape, bool(np.isin(sp.cv, np.arange(20, 26)).all())
        ((2, 3), True)
    """
    k, n_b, n_cv = int(num_inputs), int(num_batches), int(num_cv_batches)
    if n_b * k > num_test:
        raise ValueError(
            f"{n_b} evaluation batches of K={k} need {n_b * k} test images; "
            f"{name} has {num_test}. Lower --batches or K."
        )
    if n_cv * k > pool.size:
        raise ValueError(
            f"{n_cv} CV batches of K={k} need {n_cv * k} held-out training images; the model "
            f"holds out {pool.size} of {name}'s training split. Lower --cv-batches or K."
        )
    ev = np.random.default_rng((seed, 0xD1A)).permutation(num_test)[: n_b * k]
    cv = np.random.default_rng((seed, 0xC5)).permutation(pool)[: n_cv * k]
    return ImageSplit(cv.reshape(n_cv, k), ev.reshape(n_b, k), pool_name)


def ordered(split: ImageSplit, ds: Dataset | Localization, order: str) -> ImageSplit:
    """``split`` with each batch's indices in the input order ``order``
    (:func:`gcc_jax.input_order` of that batch's images): the order along the encoder's line.

    The metrics are means over a batch's inputs, so only the codes whose encoding depends on
    the order (GCC, BACC and the interpolating fill) see a difference. ``"given"`` keeps the
    drawn order.

    Example:
        >>> from gcc_jax.nn.data import load_digits
        >>> ds = load_digits()
        >>> sp = ImageSplit(np.arange(8).reshape(2, 4), np.arange(8).reshape(2, 4), "train")
        >>> out = ordered(sp, ds, "pca")
        >>> sorted(out.eval[0].tolist()) == [0, 1, 2, 3], ordered(sp, ds, "given") is sp
        (True, True)
    """
    if order == "given":
        return split
    from ..evaluation import input_order

    def each(indices, x_all):
        return np.stack([idx[np.asarray(input_order(x_all[idx], order))] for idx in indices])

    cv = each(split.cv, ds.x_train) if split.cv.size else split.cv
    return split._replace(cv=cv, eval=each(split.eval, ds.x_test))
