"""Independent NumPy references for the tests (no gcc_jax code)."""

import numpy as np


def reinsch_values(t, y, alpha):
    """Smoothing-spline values at the nodes: minimise Σ(y − g)² + α ∫ g''² (Green & Silverman).

    Dense float64 solve of ``(R + α QᵀQ) γ = Qᵀ y``, ``g = y − α Q γ``.
    """
    t = np.asarray(t, float)
    y = np.asarray(y, float)
    n = t.size
    h = np.diff(t)
    q = np.zeros((n, n - 2))
    r = np.zeros((n - 2, n - 2))
    for j in range(n - 2):
        q[j, j] = 1 / h[j]
        q[j + 1, j] = -1 / h[j] - 1 / h[j + 1]
        q[j + 2, j] = 1 / h[j + 1]
        r[j, j] = (h[j] + h[j + 1]) / 3
        if j < n - 3:
            r[j, j + 1] = r[j + 1, j] = h[j + 1] / 6
    gamma = np.linalg.solve(r + alpha * q.T @ q, q.T @ y)
    return y - alpha * q @ gamma


def fill_reference(value, have, fill, fill_value=0.0):
    """The fill rules by a loop over the inputs (NumPy)."""
    value = np.array(value, float).reshape(len(have), -1)
    out = value.copy()
    idx = np.flatnonzero(have)
    for k in range(len(have)):
        if have[k]:
            continue
        if fill == "zero" or idx.size == 0:
            out[k] = fill_value
        elif fill == "mean":
            out[k] = value[idx].mean(axis=0)
        else:
            left, right = idx[idx < k], idx[idx > k]
            if left.size and right.size:
                lo, hi = left[-1], right[0]
                out[k] = value[lo] + (k - lo) / (hi - lo) * (value[hi] - value[lo])
            else:
                out[k] = value[left[-1]] if left.size else value[right[0]]
    return out
