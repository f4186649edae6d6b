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


def _distinct_in(dtype, n, kind):
    """Whether the closed-form Chebyshev points (NumPy, float64), rounded to ``dtype``, are
    strictly increasing: a check independent of gcc_jax's own node formula."""
    j = np.arange(1, n + 1)
    angles = (2 * j - 1) * np.pi / (2 * n) if kind == 1 else (j - 1) * np.pi / (n - 1)
    return bool(np.all(np.diff(np.sort(np.cos(angles)).astype(dtype)) > 0))


@pytest.mark.parametrize("kind", [1, 2])
def test_max_chebyshev_nodes_is_exact_in_float32(kind):
    """n = max_chebyshev_nodes(float32) Chebyshev nodes are distinct in float32 and n + 1 are
    not (by NumPy's closed form); on either side of the bound every count behaves alike; the
    bound is refused with a message naming it, float64 has none."""
    n = gcc.spline.max_chebyshev_nodes(np.float32, kind)
    assert 10**4 < n < 10**5
    assert _distinct_in(np.float32, n, kind) and not _distinct_in(np.float32, n + 1, kind)
    assert all(_distinct_in(np.float32, c, kind) for c in range(n - 20, n))
    assert not any(_distinct_in(np.float32, c, kind) for c in range(n + 1, n + 21))
    got = np.asarray(gcc.chebyshev_nodes(n, kind=kind, dtype=np.float32))
    assert got.dtype == np.float32 and np.all(np.diff(got) > 0)
    with pytest.raises(ValueError, match=rf"`n` = {n + 1} .*at most {n}.*float64.*equispaced"):
        gcc.chebyshev_nodes(n + 1, kind=kind, dtype=np.float32)
    assert gcc.spline.max_chebyshev_nodes(np.float64, kind) is None


def test_float32_chebyshev_codes_name_the_largest_supported_n():
    """SplineCode.chebyshev(num_workers=10⁵, dtype=float32) is refused with the largest N that
    float32 Chebyshev nodes support and the ways around it; that N is accepted, and so are
    float64 Chebyshev and float32 equispaced nodes at N = 10⁵."""
    largest = gcc.spline.max_chebyshev_nodes(np.float32, kind=2)
    with pytest.raises(ValueError, match=rf"`num_workers` = 100000 .*at most {largest}"):
        gcc.SplineCode.chebyshev(num_inputs=20, num_workers=100_000, dtype=np.float32)
    big_k = gcc.spline.max_chebyshev_nodes(np.float32, kind=1) + 1
    with pytest.raises(ValueError, match="`num_inputs`"):
        gcc.BerrutCode.chebyshev(num_inputs=big_k, num_workers=100, dtype=np.float32)
    code = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=largest, dtype=np.float32)
    assert code.beta.dtype == np.float32 and code.num_workers == largest
    wide = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=100_000, dtype=np.float64)
    assert wide.beta.dtype == np.float64
    beta = gcc.equispaced_nodes(100_000, dtype=np.float32)
    alpha = gcc.chebyshev_nodes(20, kind=1, dtype=np.float32)
    equi = gcc.SplineCode(alpha=alpha, beta=beta, lam_enc=0.0, lam_dec=0.0)
    assert equi.num_workers == 100_000 and equi.beta.dtype == np.float32
