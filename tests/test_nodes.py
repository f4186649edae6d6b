import numpy as np
import pytest

import gcc_jax as gcc


@pytest.mark.parametrize("n", [1, 2, 3, 8, 33])
def test_chebyshev_first_kind_matches_closed_form(n):
    ref = np.sort(np.cos((2 * np.arange(1, n + 1) - 1) * np.pi / (2 * n)))
    got = np.asarray(gcc.chebyshev_nodes(n, kind=1))
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-15)
    assert np.all(np.diff(got) > 0) and np.all(np.abs(got) < 1)


@pytest.mark.parametrize("n", [2, 3, 8, 34])
def test_chebyshev_second_kind_matches_closed_form(n):
    ref = np.sort(np.cos(np.arange(n) * np.pi / (n - 1)))
    got = np.asarray(gcc.chebyshev_nodes(n, kind=2))
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-15)
    assert got[0] == -1.0 and got[-1] == 1.0
    np.testing.assert_array_equal(got, -got[::-1])  # exactly symmetric


def test_equispaced():
    np.testing.assert_allclose(gcc.equispaced_nodes(5), np.linspace(-1, 1, 5), atol=0)


def test_float32_dtype():
    assert gcc.chebyshev_nodes(5, kind=2, dtype="float32").dtype == np.float32


@pytest.mark.parametrize(
    "call, err",
    [
        (lambda: gcc.chebyshev_nodes(0), ValueError),
        (lambda: gcc.chebyshev_nodes(1, kind=2), ValueError),
        (lambda: gcc.chebyshev_nodes(4, kind=3), ValueError),
        (lambda: gcc.chebyshev_nodes(4.0), TypeError),
        (lambda: gcc.equispaced_nodes(1), ValueError),
    ],
)
def test_bad_input(call, err):
    with pytest.raises(err):
        call()
