"""Reader for the IDX format of MNIST and Fashion-MNIST (plain or gzip-compressed)."""

from __future__ import annotations

import gzip
import math
import os

import numpy as np

from ._dataset import DatasetFormatError

__all__ = ["read_idx"]

# Third byte of the magic number -> big-endian element type.
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: str | os.PathLike) -> bytes:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise DatasetFormatError(f"{os.fspath(path)}: corrupt gzip stream ({e})") from e
    return raw


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (gzip-compressed or not, detected from its first bytes).

    The IDX format (LeCun's MNIST format): a 4-byte magic ``0x00 0x00 T D`` where ``T`` is the
    element type (``0x08`` uint8, ``0x09`` int8, ``0x0B`` int16, ``0x0C`` int32, ``0x0D``
    float32, ``0x0E`` float64) and ``D`` the number of dimensions, then ``D`` big-endian uint32
    sizes, then the elements in C order, big-endian.

    Args:
        path: the file, e.g. ``train-images-idx3-ubyte.gz``.

    Returns:
        The array in native byte order with the file's shape (``uint8`` for MNIST files).

    Raises:
        DatasetFormatError: on a bad magic number or a payload whose size does not match the
            header.

    Example:
        A 2 × 3 uint8 file written here (the Fashion-MNIST files of Debian's
        ``dataset-fashion-mnist`` read the same way: ``t10k-labels-idx1-ubyte.gz`` gives shape
        ``(10000,)``):

        >>> import gzip, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "tiny-idx2-ubyte.gz")
        >>> header = bytes([0, 0, 0x08, 2]) + (2).to_bytes(4, "big") + (3).to_bytes(4, "big")
        >>> with gzip.open(path, "wb") as f:
        ...     _ = f.write(header + bytes(range(6)))
        >>> read_idx(path)
        array([[0, 1, 2],
               [3, 4, 5]], dtype=uint8)
    """
    name = os.fspath(path)
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES or raw[3] == 0:
        raise DatasetFormatError(
            f"{name}: not an IDX file (magic bytes {raw[:4].hex() or '<empty>'}; expected "
            "00 00 <type in 08,09,0b,0c,0d,0e> <ndim >= 1>)"
        )
    dtype = _IDX_DTYPES[raw[2]]
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetFormatError(f"{name}: truncated IDX header ({len(raw)} bytes, ndim={ndim})")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = math.prod(shape) * dtype.itemsize
    if len(raw) - header != expected:
        raise DatasetFormatError(
            f"{name}: IDX header declares shape {shape} ({expected} payload bytes) but the file "
            f"has {len(raw) - header} payload bytes"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))
