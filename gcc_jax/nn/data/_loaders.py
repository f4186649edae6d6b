"""Offline loaders: scikit-learn digits, MNIST / Fashion-MNIST (IDX) and CIFAR-10 (pickles)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np

from ._dataset import Dataset, DatasetFormatError, DatasetNotFoundError
from ._idx import read_idx

__all__ = [
    "DEFAULT_FASHION_MNIST_DIR",
    "DATASET_NAMES",
    "load_cifar10",
    "load_dataset",
    "load_digits",
    "load_fashion_mnist",
    "load_mnist",
]

DEFAULT_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
"""Where the Debian package ``dataset-fashion-mnist`` installs the Fashion-MNIST IDX files."""

FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
_IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
_MNIST_HELP = (
    "Download the four MNIST IDX files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
    "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz; e.g. from "
    "https://ossci-datasets.s3.amazonaws.com/mnist/) into one directory and pass it as `path`. "
    "gcc_jax never downloads anything."
)
_FASHION_HELP = (
    "Install the Debian package with `sudo apt-get install dataset-fashion-mnist` (it puts the "
    f"files in {DEFAULT_FASHION_MNIST_DIR}), or download the four IDX files "
    "(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
    "t10k-labels-idx1-ubyte.gz) from https://github.com/zalandoresearch/fashion-mnist into one "
    "directory and pass it as `path`. gcc_jax never downloads anything."
)
_CIFAR_HELP = (
    "Download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, extract it, and pass the "
    "directory `cifar-10-batches-py` (or its parent) as `path`. gcc_jax never downloads anything."
)


def _as_images(raw: np.ndarray) -> np.ndarray:
    """uint8 (n, H, W) or (n, H, W, C) -> float32 NHWC in [0, 1]."""
    x = raw.astype(np.float32) / np.float32(255.0)
    return x[..., None] if x.ndim == 3 else x


def _as_labels(raw, num_classes: int, where: str) -> np.ndarray:
    y = np.asarray(raw)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise DatasetFormatError(
            f"{where}: labels must be a 1-D integer array; got {y.dtype} {y.shape}"
        )
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise DatasetFormatError(
            f"{where}: labels must lie in [0, {num_classes}); got range [{y.min()}, {y.max()}]"
        )
    return y.astype(np.int32)


def load_digits(*, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """Load scikit-learn's 8x8 handwritten digits (bundled with scikit-learn: always available).

    1797 grey-scale 8x8 images of the digits 0-9 (pixel values 0..16, rescaled to ``[0, 1]``),
    split into train and test sets by a stratified shuffle that depends only on ``seed``.

    Args:
        test_fraction: fraction of the 1797 images held out for testing, in ``(0, 1)``.
        seed: seed of the split; the same seed gives the same split on every machine.

    Returns:
        A `Dataset` named ``"digits"`` with images ``(n, 8, 8, 1)`` and 10 classes
        (1437 train and 360 test images at the default ``test_fraction``).

    Raises:
        ValueError: if ``test_fraction`` is not in ``(0, 1)``.

    Example:
        >>> ds = load_digits()
        >>> ds.x_train.shape, ds.x_test.shape
        ((1437, 8, 8, 1), (360, 8, 8, 1))
    """
    try:
        import sklearn.datasets
        from sklearn.model_selection import train_test_split
    except ImportError as err:
        raise ImportError(
            "the digits data set needs scikit-learn, which comes with the `experiments` extra: "
            "pip install 'gcc_jax[experiments]'"
        ) from err

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"`test_fraction` must be in (0, 1); got {test_fraction}")
    bunch = sklearn.datasets.load_digits()
    x = (bunch.images / 16.0).astype(np.float32)[..., None]
    y = bunch.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    return Dataset(
        np.ascontiguousarray(x_train),
        np.ascontiguousarray(y_train),
        np.ascontiguousarray(x_test),
        np.ascontiguousarray(y_test),
        name="digits",
        num_classes=10,
        class_names=tuple(str(i) for i in range(10)),
    )


def _find_idx_file(directory: Path, stem: str) -> Path | None:
    dotted = stem.replace("-idx", ".idx")  # Kaggle-style `train-images.idx3-ubyte`
    for name in (stem, stem + ".gz", dotted, dotted + ".gz"):
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def _load_idx_dataset(
    directories: list[Path], *, name: str, pretty: str, help_text: str, class_names
) -> Dataset:
    for directory in directories:
        files = {key: _find_idx_file(directory, stem) for key, stem in _IDX_FILES.items()}
        if all(files.values()):
            break
    else:
        searched = ", ".join(str(d) for d in directories)
        expected = ", ".join(f"{stem}[.gz]" for stem in _IDX_FILES.values())
        raise DatasetNotFoundError(
            f"{pretty} not found: looked for {expected} in {searched}. {help_text}"
        )
    arrays = {}
    for split in ("train", "test"):
        x_path, y_path = files[f"x_{split}"], files[f"y_{split}"]
        x_raw, y_raw = read_idx(x_path), read_idx(y_path)
        if x_raw.ndim != 3 or x_raw.dtype != np.uint8:
            raise DatasetFormatError(
                f"{x_path}: expected uint8 images of shape (n, H, W); got {x_raw.dtype} "
                f"{x_raw.shape}"
            )
        if y_raw.shape != x_raw.shape[:1]:
            raise DatasetFormatError(
                f"{y_path}: expected {x_raw.shape[0]} labels to match {x_path}; "
                f"got shape {y_raw.shape}"
            )
        arrays[f"x_{split}"] = _as_images(x_raw)
        arrays[f"y_{split}"] = _as_labels(y_raw, 10, str(y_path))
    return Dataset(**arrays, name=name, num_classes=10, class_names=class_names)


def _directory(path: str | os.PathLike | None, pretty: str, help_text: str) -> Path:
    """``path`` expanded, or ``DatasetNotFoundError`` naming the data set when it is ``None``."""
    if path is None:
        raise DatasetNotFoundError(f"{pretty} needs a directory: pass `path`. {help_text}")
    return Path(path).expanduser()


def _idx_search_dirs(path: str | os.PathLike, torchvision_name: str) -> list[Path]:
    root = Path(path).expanduser()
    return [root, root / torchvision_name / "raw"]


def load_fashion_mnist(path: str | os.PathLike | None = None) -> Dataset:
    """Load Fashion-MNIST from its four IDX files (gzip-compressed or not).

    Looks in ``path`` (default `DEFAULT_FASHION_MNIST_DIR`, ``/usr/share/datasets/fashion-mnist``,
    where the Debian package ``dataset-fashion-mnist`` installs them) and in the torchvision layout
    ``path/FashionMNIST/raw``, for ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each optionally ending in ``.gz``.

    Args:
        path: directory holding the files; ``None`` for the Debian location.

    Returns:
        A `Dataset` named ``"fashion_mnist"``: 60000 train and 10000 test images
        ``(n, 28, 28, 1)``, 10 classes.

    Raises:
        DatasetNotFoundError: if the files are missing (the message says how to get them).
        DatasetFormatError: if a file is not a valid IDX file or images and labels disagree.

    Example:
        >>> ds = load_fashion_mnist()  # doctest: +SKIP
        >>> ds.x_train.shape  # doctest: +SKIP
        (60000, 28, 28, 1)
    """
    dirs = _idx_search_dirs(DEFAULT_FASHION_MNIST_DIR if path is None else path, "FashionMNIST")
    return _load_idx_dataset(
        dirs,
        name="fashion_mnist",
        pretty="Fashion-MNIST",
        help_text=_FASHION_HELP,
        class_names=FASHION_MNIST_CLASSES,
    )


def load_mnist(path: str | os.PathLike | None) -> Dataset:
    """Load MNIST from its four IDX files (gzip-compressed or not) in a directory you give.

    Looks in ``path`` and in the torchvision layout ``path/MNIST/raw`` for
    ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte`` and
    ``t10k-labels-idx1-ubyte``, each optionally ending in ``.gz``.

    Args:
        path: directory holding the files (required: MNIST has no standard system location).

    Returns:
        A `Dataset` named ``"mnist"``: images ``(n, 28, 28, 1)``, 10 classes.

    Raises:
        DatasetNotFoundError: if ``path`` is ``None`` or the files are missing.
        DatasetFormatError: if a file is not a valid IDX file or images and labels disagree.

    Example:
        >>> ds = load_mnist("~/data/mnist")  # doctest: +SKIP
        >>> ds.x_test.shape  # doctest: +SKIP
        (10000, 28, 28, 1)
    """
    return _load_idx_dataset(
        _idx_search_dirs(_directory(path, "MNIST", _MNIST_HELP), "MNIST"),
        name="mnist",
        pretty="MNIST",
        help_text=_MNIST_HELP,
        class_names=tuple(str(i) for i in range(10)),
    )


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Unpickler that can rebuild NumPy arrays and plain containers, and nothing else.

    CIFAR-10 batches are pickles; refusing every other global means a tampered file cannot run
    code on load.
    """

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # how Python 3 writes `bytes` at pickle protocol 2
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a CIFAR batch")


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            batch = _ArrayOnlyUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as e:
        raise DatasetFormatError(f"{path}: not a CIFAR-10 python batch ({e})") from e
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        keys = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise DatasetFormatError(
            f"{path}: a CIFAR-10 batch is a dict with keys b'data' and b'labels'; got {keys}"
        )
    data = np.asarray(batch[b"data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DatasetFormatError(
            f"{path}: b'data' must be uint8 of shape (n, 3072); got {data.dtype} {data.shape}"
        )
    labels = _as_labels(batch[b"labels"], 10, str(path))
    if labels.shape[0] != data.shape[0]:
        raise DatasetFormatError(f"{path}: {data.shape[0]} images but {labels.shape[0]} labels")
    # Rows are R (1024 values), G, B planes of a 32x32 image in row-major order.
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return _as_images(images), labels


def load_cifar10(path: str | os.PathLike | None) -> Dataset:
    """Load CIFAR-10 from its python-pickle batches in a directory you give.

    Reads ``data_batch_1`` .. ``data_batch_5`` (train) and ``test_batch`` (test) from
    ``path/cifar-10-batches-py`` or, failing that, from ``path`` itself. Each batch is a pickled
    dict with ``b'data'`` (uint8 ``(n, 3072)``, R, G, B planes of 32x32 pixels) and
    ``b'labels'`` (n ints). The unpickler only rebuilds NumPy arrays, never arbitrary objects.

    Args:
        path: directory holding the batches or the ``cifar-10-batches-py`` directory.

    Returns:
        A `Dataset` named ``"cifar10"``: images ``(n, 32, 32, 3)``, 10 classes.

    Raises:
        DatasetNotFoundError: if ``path`` is ``None`` or a batch file is missing.
        DatasetFormatError: if a batch is not a valid CIFAR-10 pickle.

    Example:
        >>> ds = load_cifar10("~/data")  # doctest: +SKIP
        >>> ds.x_train.shape  # doctest: +SKIP
        (50000, 32, 32, 3)
    """
    root = _directory(path, "CIFAR-10", _CIFAR_HELP)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    candidates = [root / "cifar-10-batches-py", root]
    for directory in candidates:
        if all((directory / n).is_file() for n in names):
            break
    else:
        searched = ", ".join(str(d) for d in candidates)
        raise DatasetNotFoundError(
            f"CIFAR-10 not found: looked for {', '.join(names)} in {searched}. {_CIFAR_HELP}"
        )
    train = [_read_cifar_batch(directory / n) for n in names[:5]]
    x_test, y_test = _read_cifar_batch(directory / "test_batch")
    return Dataset(
        np.concatenate([x for x, _ in train]),
        np.concatenate([y for _, y in train]),
        x_test,
        y_test,
        name="cifar10",
        num_classes=10,
        class_names=CIFAR10_CLASSES,
    )


_LOADERS = {
    "digits": lambda path: load_digits(),
    "mnist": load_mnist,
    "fashion_mnist": load_fashion_mnist,
    "cifar10": load_cifar10,
}
DATASET_NAMES = tuple(_LOADERS)
"""Names accepted by `load_dataset`."""


def load_dataset(name: str, path: str | os.PathLike | None = None) -> Dataset:
    """Load a data set by name: ``"digits"``, ``"mnist"``, ``"fashion_mnist"`` or ``"cifar10"``.

    Hyphens and case are ignored (``"Fashion-MNIST"`` works; ``"cifar-10"`` too).

    Args:
        name: the data set.
        path: directory of the files (ignored for ``"digits"``; optional for
            ``"fashion_mnist"``, which defaults to the Debian location; required otherwise).

    Returns:
        The `Dataset` (layout: float32 NHWC images in ``[0, 1]``, int32 labels).

    Raises:
        ValueError: for an unknown name.
        DatasetNotFoundError: if the files are missing.
        DatasetFormatError: if the files are corrupt.

    Example:
        >>> load_dataset("digits").input_shape
        (8, 8, 1)
    """
    key = name.lower().replace("-", "_")
    key = {"cifar_10": "cifar10", "fashionmnist": "fashion_mnist"}.get(key, key)
    if key not in _LOADERS:
        raise ValueError(f"`name` must be one of {DATASET_NAMES}; got {name!r}")
    return _LOADERS[key](path)
