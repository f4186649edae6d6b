"""The `Dataset` container and the data-set errors."""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import numpy as np

__all__ = ["Dataset", "DatasetError", "DatasetNotFoundError", "DatasetFormatError"]


class DatasetError(Exception):
    """Base class of the errors raised by the `gcc_jax.nn.data` loaders."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """A data set's files are not where the loader looked.

    The message names every path searched and how to get the files; gcc_jax never downloads.
    """


class DatasetFormatError(DatasetError, ValueError):
    """A data set's file exists but is not in the expected format (bad magic, wrong size, ...)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """An image-classification data set held in host memory as NumPy arrays.

    Layout (binding for every loader):

    - images: ``float32`` in ``[0, 1]``, channels last (NHWC), shape ``(n, H, W, C)``;
    - labels: ``int32`` class indices in ``[0, num_classes)``, shape ``(n,)``.

    Attributes:
        x_train: training images, ``(n_train, H, W, C)``.
        y_train: training labels, ``(n_train,)``.
        x_test: held-out test images, ``(n_test, H, W, C)``.
        y_test: held-out test labels, ``(n_test,)``.
        name: short name of the data set (``"digits"``, ``"fashion_mnist"``, ...); it is part of
            the training cache key.
        num_classes: number of classes.
        class_names: one human-readable name per class.

    Raises:
        ValueError: if the arrays break the layout above.

    Example:
        >>> import numpy as np
        >>> ds = Dataset(np.zeros((4, 2, 2, 1), np.float32), np.arange(4, dtype=np.int32) % 2,
        ...              np.zeros((2, 2, 2, 1), np.float32), np.array([0, 1], np.int32),
        ...              name="toy", num_classes=2)
        >>> ds.input_shape
        (2, 2, 1)
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    name: str
    num_classes: int
    class_names: tuple[str, ...] = ()

    def __post_init__(self):
        for split in ("train", "test"):
            x = getattr(self, f"x_{split}")
            y = getattr(self, f"y_{split}")
            if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 4:
                raise ValueError(
                    f"`x_{split}` must be a float32 NumPy array of shape (n, H, W, C); got "
                    f"{type(x).__name__} {getattr(x, 'dtype', None)} {getattr(x, 'shape', None)}"
                )
            if not isinstance(y, np.ndarray) or y.dtype != np.int32 or y.shape != x.shape[:1]:
                raise ValueError(
                    f"`y_{split}` must be an int32 NumPy array of shape ({x.shape[0]},); got "
                    f"{type(y).__name__} {getattr(y, 'dtype', None)} {getattr(y, 'shape', None)}"
                )
            if y.size and (y.min() < 0 or y.max() >= self.num_classes):
                raise ValueError(
                    f"`y_{split}` must hold labels in [0, {self.num_classes}); "
                    f"got range [{y.min()}, {y.max()}]"
                )
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(
                f"train and test images must share (H, W, C); got {self.x_train.shape[1:]} "
                f"and {self.x_test.shape[1:]}"
            )
        if self.class_names and len(self.class_names) != self.num_classes:
            raise ValueError(
                f"`class_names` must have num_classes={self.num_classes} entries; "
                f"got {len(self.class_names)}"
            )

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(H, W, C)`` of one image."""
        return tuple(int(s) for s in self.x_train.shape[1:])

    @property
    def num_train(self) -> int:
        """Number of training images."""
        return int(self.x_train.shape[0])

    @property
    def num_test(self) -> int:
        """Number of test images."""
        return int(self.x_test.shape[0])

    @functools.cached_property
    def fingerprint(self) -> str:
        """A content hash (BLAKE2b, 16 hex digits) of the four arrays and the metadata.

        Two data sets with the same name but different contents (a subset, another split seed)
        have different fingerprints; the training cache uses it in its key.
        """
        h = hashlib.blake2b(digest_size=8)
        h.update(f"{self.name}|{self.num_classes}".encode())
        for a in (self.x_train, self.y_train, self.x_test, self.y_test):
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).data)
        return h.hexdigest()

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, num_classes={self.num_classes}, "
            f"input_shape={self.input_shape}, num_train={self.num_train}, "
            f"num_test={self.num_test})"
        )
