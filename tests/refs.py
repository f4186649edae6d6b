"""Independent NumPy references for the spline tests (no gcc_jax code)."""

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
