"""Offline data loaders: NumPy arrays in one documented layout, never a download.

Every loader returns a `Dataset` whose images are ``float32`` in ``[0, 1]``, channels last
``(n, H, W, C)``, and whose labels are ``int32`` ``(n,)``.

- `load_digits`: scikit-learn's 8x8 digits, bundled with scikit-learn (the default).
- `load_fashion_mnist`: IDX files from ``/usr/share/datasets/fashion-mnist`` (Debian package
  ``dataset-fashion-mnist``) or a directory you give.
- `load_mnist`: IDX files from a directory you give.
- `load_cifar10`: the python-pickle batches from a directory you give.
- `load_dataset`: any of the above by name.
- `make_localization`: a synthetic localization task (a digit pasted on a 40x40 canvas and its
  box), made from the digits offline.

A missing data set raises `DatasetNotFoundError` (a `FileNotFoundError`) naming the paths
searched and how to get the files; a corrupt file raises `DatasetFormatError` (a `ValueError`).
"""

from ._dataset import Dataset as Dataset
from ._dataset import DatasetError as DatasetError
from ._dataset import DatasetFormatError as DatasetFormatError
from ._dataset import DatasetNotFoundError as DatasetNotFoundError
from ._idx import read_idx as read_idx
from ._loaders import DATASET_NAMES as DATASET_NAMES
from ._loaders import DEFAULT_FASHION_MNIST_DIR as DEFAULT_FASHION_MNIST_DIR
from ._loaders import load_cifar10 as load_cifar10
from ._loaders import load_dataset as load_dataset
from ._loaders import load_digits as load_digits
from ._loaders import load_fashion_mnist as load_fashion_mnist
from ._loaders import load_mnist as load_mnist
from ._localization import Localization as Localization
from ._localization import make_localization as make_localization

__all__ = [
    "DATASET_NAMES",
    "DEFAULT_FASHION_MNIST_DIR",
    "Dataset",
    "DatasetError",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "Localization",
    "load_cifar10",
    "load_dataset",
    "load_digits",
    "load_fashion_mnist",
    "load_mnist",
    "make_localization",
    "read_idx",
]
