"""The synthetic localization task (gcc_jax/nn/data/_localization.py) against NumPy checks."""

import numpy as np
import pytest

from gcc_jax.nn.data import load_digits, make_localization


def test_each_image_is_one_enlarged_digit_inside_its_box():
    data = make_localization(40, 20, seed=3)
    digits = load_digits(seed=3)
    for x, y, pool, labels, cls in (
        (data.x_train, data.y_train, digits.x_train, digits.y_train, data.digits_train),
        (data.x_test, data.y_test, digits.x_test, digits.y_test, data.digits_test),
    ):
        assert x.shape[1:] == (40, 40, 1) and x.dtype == np.float32 and y.dtype == np.float32
        for img, box, c in zip(x[..., 0], y, cls, strict=True):
            x0, y0, x1, y1 = np.rint(box * 40).astype(int)
            side = x1 - x0
            assert side == y1 - y0 and side in (8, 16, 24) and 0 <= x0 and x1 <= 40
            patch = img[y0:y1, x0:x1]
            assert patch.sum() == img.sum() > 0  # nothing outside the box
            s = side // 8
            small = patch[::s, ::s]  # undo the nearest-neighbour enlargement
            np.testing.assert_array_equal(np.kron(small, np.ones((s, s))), patch)
            match = [i for i in range(pool.shape[0]) if np.array_equal(pool[i, :, :, 0], small)]
            assert match and c in labels[match]  # a digit of that split, with its class


def test_same_seed_same_data_and_bad_arguments():
    a, b = make_localization(10, 5, seed=1), make_localization(10, 5, seed=1)
    for u, v in zip(a[:6], b[:6], strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a.x_train, make_localization(10, 5, seed=2).x_train)
    with pytest.raises(ValueError, match="scales"):
        make_localization(4, 4, canvas=16, scales=(3,))
