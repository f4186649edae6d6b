"""A synthetic localization task, made offline: one digit pasted on a blank canvas, find its box.

Each image is a ``canvas × canvas`` grey canvas (zeros) with one of scikit-learn's 8×8 digits
pasted on it, enlarged ``s`` times (``s`` drawn from ``scales``, nearest-neighbour) at a
uniformly random position where it fits. The target is the pasted square's box
``(x₀, y₀, x₁, y₁) / canvas`` (left, top, right, bottom; in ``[0, 1]``). Training images use the
digits of the train split of :func:`load_digits`, test images those of its test split; the
whole set depends only on ``seed``. Regression-type inference of this kind (object
localization) is one of the workloads of learning-based coded computation (Kosaian, Rashmi and
Venkataraman).
"""

from typing import NamedTuple

import numpy as np

from ..._core.scalars import as_int
from ._loaders import load_digits

__all__ = ["Localization", "make_localization"]


class Localization(NamedTuple):
    """Images and boxes of the localization task.

    Attributes:
        x_train, x_test: ``float32`` images ``(n, canvas, canvas, 1)`` in ``[0, 1]``.
        y_train, y_test: ``float32`` boxes ``(n, 4)``: ``(x₀, y₀, x₁, y₁) / canvas``.
        digits_train, digits_test: ``int32`` class of the pasted digit ``(n,)``.
        name: ``"localization"``.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    digits_train: np.ndarray
    digits_test: np.ndarray
    name: str = "localization"


def _paste(digits, labels, count, canvas, scales, rng):
    x = np.zeros((count, canvas, canvas, 1), np.float32)
    boxes = np.zeros((count, 4), np.float32)
    which = rng.integers(0, digits.shape[0], count)
    sizes = rng.choice(np.asarray(scales), count)
    for i in range(count):
        s = int(sizes[i])
        patch = np.kron(digits[which[i], :, :, 0], np.ones((s, s), np.float32))
        side = patch.shape[0]
        top, left = rng.integers(0, canvas - side + 1, 2)
        x[i, top : top + side, left : left + side, 0] = patch
        boxes[i] = np.array([left, top, left + side, top + side], np.float32) / canvas
    return x, boxes, labels[which].astype(np.int32)


def make_localization(
    num_train: int = 6000,
    num_test: int = 1000,
    *,
    canvas: int = 40,
    scales: tuple[int, ...] = (1, 2, 3),
    seed: int = 0,
) -> Localization:
    """The localization task of the module docstring.

    Args:
        num_train, num_test: images per split.
        canvas: side of the square canvas (at least ``8 · max(scales)``).
        scales: integer enlargements of the 8×8 digit.
        seed: seeds the digits, sizes and positions.

    Returns:
        A :class:`Localization`.

    Example:
        >>> data = make_localization(5, 3, seed=1)
        >>> data.x_train.shape, data.y_train.shape
        ((5, 40, 40, 1), (5, 4))
        >>> x0, y0, x1, y1 = (data.y_train[0] * 40).round().astype(int)
        >>> img = data.x_train[0, :, :, 0]
        >>> bool(img[y0:y1, x0:x1].sum() == img.sum() > 0)    # the digit lies in its box
        True
    """
    num_train = as_int(num_train, "num_train", 1)
    num_test = as_int(num_test, "num_test", 1)
    canvas = as_int(canvas, "canvas", 8)
    scales = tuple(as_int(s, "scales", 1) for s in scales)
    if not scales or 8 * max(scales) > canvas:
        raise ValueError(f"`scales` must be non-empty with 8 · max(scales) <= canvas={canvas}")
    ds = load_digits(seed=seed)
    rng = np.random.default_rng((seed, 0x10CA))
    train = _paste(ds.x_train, ds.y_train, num_train, canvas, scales, rng)
    test = _paste(ds.x_test, ds.y_test, num_test, canvas, scales, rng)
    return Localization(train[0], train[1], test[0], test[1], train[2], test[2])
