"""Tests for gcc_jax.nn.data: tiny files written in the exact on-disk formats, read back."""

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from gcc_jax.nn.data import (
    DEFAULT_FASHION_MNIST_DIR,
    Dataset,
    DatasetFormatError,
    DatasetNotFoundError,
    load_cifar10,
    load_dataset,
    load_digits,
    load_fashion_mnist,
    load_mnist,
    read_idx,
)

IDX_STEMS = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
IDX_TYPE_CODES = {">u1": 0x08, ">i1": 0x09, ">i2": 0x0B, ">i4": 0x0C, ">f4": 0x0D, ">f8": 0x0E}


def idx_bytes(arr: np.ndarray, big_endian_dtype: str = ">u1") -> bytes:
    """Serialise an array as IDX, independently of the reader under test."""
    header = bytes([0, 0, IDX_TYPE_CODES[big_endian_dtype], arr.ndim])
    header += struct.pack(">" + "I" * arr.ndim, *arr.shape)
    return header + arr.astype(big_endian_dtype).tobytes()


def write_file(path: Path, data: bytes, gz: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def random_idx_set(rng, n_train=7, n_test=5, h=6, w=4):
    return {
        "x_train": rng.integers(0, 256, (n_train, h, w), dtype=np.uint8),
        "y_train": rng.integers(0, 10, n_train, dtype=np.uint8),
        "x_test": rng.integers(0, 256, (n_test, h, w), dtype=np.uint8),
        "y_test": rng.integers(0, 10, n_test, dtype=np.uint8),
    }


def write_idx_set(directory: Path, arrays: dict, gz: bool, dotted: bool = False) -> None:
    for key, stem in IDX_STEMS.items():
        name = stem.replace("-idx", ".idx") if dotted else stem
        write_file(directory / name, idx_bytes(arrays[key]), gz)


def check_idx_round_trip(ds: Dataset, arrays: dict) -> None:
    for split in ("train", "test"):
        x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
        raw_x, raw_y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        assert x.dtype == np.float32 and x.shape == (*raw_x.shape, 1)
        np.testing.assert_array_equal(x[..., 0], raw_x.astype(np.float32) / np.float32(255))
        assert y.dtype == np.int32
        np.testing.assert_array_equal(y, raw_y)
    assert ds.num_classes == 10 and len(ds.class_names) == 10


# ---------------------------------------------------------------------------- IDX reader


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("dtype", [">u1", ">i1", ">i2", ">i4", ">f4", ">f8"])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_read_idx_round_trip(tmp_path, gz, dtype, shape):
    rng = np.random.default_rng(0)
    arr = (rng.standard_normal(shape) * 50).astype(np.dtype(dtype).newbyteorder("="))
    path = write_file(tmp_path / "a-idx", idx_bytes(arr, dtype), gz)
    out = read_idx(path)
    assert out.shape == shape and out.dtype == arr.dtype and out.dtype.isnative
    np.testing.assert_array_equal(out, arr)


@pytest.mark.parametrize(
    "data, match",
    [
        (b"", "not an IDX file"),
        (b"\x08\x03\x00\x00" + b"\x00" * 20, "not an IDX file"),  # wrong leading bytes
        (b"\x00\x00\x07\x01\x00\x00\x00\x01\x00", "not an IDX file"),  # unknown type code
        (b"\x00\x00\x08\x02\x00\x00\x00\x02", "truncated IDX header"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x05" + b"\x01\x02\x03", "payload bytes"),  # short
        (b"\x00\x00\x08\x01\x00\x00\x00\x02" + b"\x01\x02\x03", "payload bytes"),  # long
    ],
)
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_rejects_corrupt_files(tmp_path, data, match, gz):
    path = write_file(tmp_path / "bad-idx", data, gz)
    with pytest.raises(DatasetFormatError, match=match):
        read_idx(path)


def test_read_idx_rejects_broken_gzip(tmp_path):
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.arange(100, dtype=np.uint8)))[:-10])
    with pytest.raises(DatasetFormatError, match="gzip"):
        read_idx(path)


# ---------------------------------------------------------------------------- MNIST / Fashion


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("loader", [load_mnist, load_fashion_mnist])
def test_idx_loaders_round_trip(tmp_path, gz, loader):
    arrays = random_idx_set(np.random.default_rng(1))
    write_idx_set(tmp_path, arrays, gz)
    ds = loader(tmp_path)
    check_idx_round_trip(ds, arrays)
    assert ds.name == {load_mnist: "mnist", load_fashion_mnist: "fashion_mnist"}[loader]
    assert ds.input_shape == (6, 4, 1)


@pytest.mark.parametrize("layout", ["dotted", "torchvision"])
def test_idx_loaders_accept_common_layouts(tmp_path, layout):
    arrays = random_idx_set(np.random.default_rng(2))
    if layout == "dotted":
        write_idx_set(tmp_path, arrays, gz=False, dotted=True)
        ds = load_mnist(str(tmp_path))
    else:
        write_idx_set(tmp_path / "FashionMNIST" / "raw", arrays, gz=True)
        ds = load_fashion_mnist(tmp_path)
    check_idx_round_trip(ds, arrays)


def test_missing_fashion_mnist_names_path_and_remedy(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetNotFoundError) as info:
        load_fashion_mnist(missing)
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert str(missing) in msg and "apt-get install dataset-fashion-mnist" in msg
    assert "train-images-idx3-ubyte" in msg


def test_missing_mnist_names_path(tmp_path):
    arrays = random_idx_set(np.random.default_rng(3))
    write_idx_set(tmp_path, arrays, gz=True)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DatasetNotFoundError, match=str(tmp_path)):
        load_mnist(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="pass `path`"):
        load_mnist(None)


def test_idx_loader_rejects_mismatched_labels(tmp_path):
    arrays = random_idx_set(np.random.default_rng(4))
    arrays["y_test"] = arrays["y_test"][:-1]
    write_idx_set(tmp_path, arrays, gz=False)
    with pytest.raises(DatasetFormatError, match="labels"):
        load_mnist(tmp_path)


def test_idx_loader_rejects_out_of_range_labels(tmp_path):
    arrays = random_idx_set(np.random.default_rng(5))
    arrays["y_train"][0] = 10
    write_idx_set(tmp_path, arrays, gz=False)
    with pytest.raises(DatasetFormatError, match=r"\[0, 10\)"):
        load_mnist(tmp_path)


def test_idx_loader_rejects_wrong_image_rank(tmp_path):
    arrays = random_idx_set(np.random.default_rng(6))
    arrays["x_train"] = arrays["x_train"].reshape(7, -1)
    write_idx_set(tmp_path, arrays, gz=False)
    with pytest.raises(DatasetFormatError, match=r"\(n, H, W\)"):
        load_mnist(tmp_path)


def test_idx_loader_rejects_corrupt_file(tmp_path):
    arrays = random_idx_set(np.random.default_rng(7))
    write_idx_set(tmp_path, arrays, gz=False)
    path = tmp_path / IDX_STEMS["x_test"]
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(DatasetFormatError, match=str(path)):
        load_fashion_mnist(tmp_path)


@pytest.mark.skipif(
    not DEFAULT_FASHION_MNIST_DIR.is_dir(),
    reason=f"{DEFAULT_FASHION_MNIST_DIR} absent (apt-get install dataset-fashion-mnist)",
)
def test_real_fashion_mnist():
    ds = load_fashion_mnist()
    assert ds.x_train.shape == (60000, 28, 28, 1) and ds.x_test.shape == (10000, 28, 28, 1)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    np.testing.assert_array_equal(np.bincount(ds.y_train), np.full(10, 6000))
    np.testing.assert_array_equal(np.bincount(ds.y_test), np.full(10, 1000))
    assert ds.class_names[9] == "Ankle boot" and ds.name == "fashion_mnist"


# ---------------------------------------------------------------------------- CIFAR-10


def write_cifar(directory: Path, rng, n=(4, 3, 2, 5, 1), n_test=3, protocol=2) -> dict:
    """Write data_batch_1..5 and test_batch as the real CIFAR-10 python pickles are laid out."""
    directory.mkdir(parents=True, exist_ok=True)
    written = {}
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name, size in zip(names, [*n, n_test]):
        data = rng.integers(0, 256, (size, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, size)]
        batch = {
            b"batch_label": name.encode(),
            b"labels": labels,
            b"data": data,
            b"filenames": [f"img_{i}.png".encode() for i in range(size)],
        }
        with open(directory / name, "wb") as f:
            pickle.dump(batch, f, protocol=protocol)
        written[name] = (data, labels)
    return written


def expected_cifar_images(data: np.ndarray) -> np.ndarray:
    """Independent NHWC conversion: pixel (r, c) of channel ch is data[ch*1024 + r*32 + c]."""
    n = data.shape[0]
    out = np.empty((n, 32, 32, 3), np.float32)
    for ch in range(3):
        for r in range(32):
            out[:, r, :, ch] = data[:, ch * 1024 + r * 32 : ch * 1024 + r * 32 + 32] / 255.0
    return out


@pytest.mark.parametrize("nested", [True, False])
@pytest.mark.parametrize("protocol", [2, 4])
def test_cifar10_round_trip(tmp_path, nested, protocol):
    directory = tmp_path / "cifar-10-batches-py" if nested else tmp_path
    written = write_cifar(directory, np.random.default_rng(8), protocol=protocol)
    ds = load_cifar10(tmp_path)
    train_data = np.concatenate([written[f"data_batch_{i}"][0] for i in range(1, 6)])
    train_labels = sum((written[f"data_batch_{i}"][1] for i in range(1, 6)), [])
    np.testing.assert_array_equal(ds.x_train, expected_cifar_images(train_data))
    np.testing.assert_array_equal(ds.y_train, train_labels)
    np.testing.assert_array_equal(ds.x_test, expected_cifar_images(written["test_batch"][0]))
    np.testing.assert_array_equal(ds.y_test, written["test_batch"][1])
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert ds.input_shape == (32, 32, 3) and ds.name == "cifar10"
    assert load_dataset("CIFAR-10", tmp_path).fingerprint == ds.fingerprint


def test_cifar10_missing_batch(tmp_path):
    write_cifar(tmp_path, np.random.default_rng(9))
    (tmp_path / "data_batch_3").unlink()
    with pytest.raises(DatasetNotFoundError, match="cifar-10-python.tar.gz"):
        load_cifar10(tmp_path)
    with pytest.raises(DatasetNotFoundError):
        load_cifar10(None)


@pytest.mark.parametrize(
    "batch, match",
    [
        ({b"labels": [1]}, "b'data'"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1]}, "labels"),
        ({b"data": np.zeros((2, 100), np.uint8), b"labels": [1, 2]}, r"\(n, 3072\)"),
        ({b"data": np.zeros((1, 3072), np.uint8), b"labels": [12]}, r"\[0, 10\)"),
        ([1, 2, 3], "b'data'"),
    ],
)
def test_cifar10_rejects_malformed_batches(tmp_path, batch, match):
    write_cifar(tmp_path, np.random.default_rng(10))
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump(batch, f, protocol=2)
    with pytest.raises(DatasetFormatError, match=match):
        load_cifar10(tmp_path)


class _Exploit:
    """Unpickles to a call of a global: harmless here (`print`), `os.system` in an attack."""

    def __reduce__(self):
        return (print, ("the unpickler ran an arbitrary global",))


def test_cifar10_refuses_arbitrary_pickled_objects(tmp_path, capsys):
    write_cifar(tmp_path, np.random.default_rng(11))
    with open(tmp_path / "data_batch_1", "wb") as f:
        pickle.dump({b"data": _Exploit(), b"labels": []}, f, protocol=2)
    with pytest.raises(DatasetFormatError, match="not allowed"):
        load_cifar10(tmp_path)
    assert "arbitrary" not in capsys.readouterr().out
    (tmp_path / "data_batch_1").write_bytes(b"\x80\x02garbage")
    with pytest.raises(DatasetFormatError, match="not a CIFAR-10 python batch"):
        load_cifar10(tmp_path)


# ---------------------------------------------------------------------------- digits, dispatch


def test_digits_layout_and_split():
    ds = load_digits()
    assert ds.x_train.shape == (1437, 8, 8, 1) and ds.x_test.shape == (360, 8, 8, 1)
    assert ds.x_train.dtype == np.float32 and ds.y_test.dtype == np.int32
    assert ds.x_train.min() == 0.0 and ds.x_train.max() == 1.0
    assert set(np.unique(ds.y_train)) == set(range(10)) == set(np.unique(ds.y_test))
    # the split is a partition of scikit-learn's 1797 images
    import sklearn.datasets

    everything = np.sort((sklearn.datasets.load_digits().data / 16.0).astype(np.float32), axis=0)
    both = np.concatenate([ds.x_train, ds.x_test]).reshape(-1, 64)
    np.testing.assert_array_equal(np.sort(both, axis=0), everything)


def test_digits_split_is_deterministic_by_seed():
    a, b, c = load_digits(seed=3), load_digits(seed=3), load_digits(seed=4)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert not np.array_equal(a.y_train, c.y_train)
    with pytest.raises(ValueError, match="test_fraction"):
        load_digits(test_fraction=1.0)


def test_load_dataset_dispatch(tmp_path):
    assert load_dataset("digits").name == "digits"
    arrays = random_idx_set(np.random.default_rng(12))
    write_idx_set(tmp_path, arrays, gz=True)
    check_idx_round_trip(load_dataset("mnist", tmp_path), arrays)
    check_idx_round_trip(load_dataset("fashion_mnist", tmp_path), arrays)
    with pytest.raises(ValueError, match="must be one of"):
        load_dataset("imagenet")
    with pytest.raises(DatasetNotFoundError):
        load_dataset("mnist")


def test_dataset_validates_layout():
    x = np.zeros((3, 2, 2, 1), np.float32)
    y = np.zeros(3, np.int32)
    Dataset(x, y, x, y, name="ok", num_classes=1)
    with pytest.raises(ValueError, match="x_train"):
        Dataset(x.astype(np.float64), y, x, y, name="bad", num_classes=1)
    with pytest.raises(ValueError, match="y_test"):
        Dataset(x, y, x, y[:2], name="bad", num_classes=1)
    with pytest.raises(ValueError, match="labels in"):
        Dataset(x, y + 1, x, y, name="bad", num_classes=1)
    with pytest.raises(ValueError, match="share"):
        Dataset(x, y, np.zeros((3, 2, 3, 1), np.float32), y, name="bad", num_classes=1)
