"""Accuracy metrics of coded inference: MSE, RMSE, mean L2 error, RelAcc, and their CIs.

Definitions, for one coded batch of ``K`` inputs with true worker outputs ``y_k = f(x_k)`` and
decoded estimates ``ŷ_k``:

* ``mse(ŷ, y) = (1/K) Σ_k ‖ŷ_k − y_k‖₂²`` — the loss (1) that the codes minimise and that
  :func:`gcc_jax.monte_carlo_loss` reports;
* ``rmse(ŷ, y) = √mse(ŷ, y)`` — the root mean squared error, in the outputs' units;
* ``mean_l2_error(ŷ, y) = (1/K) Σ_k ‖ŷ_k − y_k‖₂`` — the mean of the un-squared ℓ2 errors,
  no normalisation by the output size (LeTCC, its section 5, calls this "RMSE");
* ``rel_acc`` — the accuracy of the decoded predictions ``argmax ŷ_k`` divided by the accuracy
  of the base model's predictions ``argmax y_k`` on the same inputs, either against true labels
  or against the base model's own argmax (then the base accuracy is 1 and RelAcc is the
  agreement rate).

An estimate that is *missing* (an uncoded input whose worker straggled; see
:class:`gcc_jax.UncodedCode`) enters ``mse``/``rmse`` through its fill value and counts as a wrong
prediction in ``rel_acc`` when its ``available`` entry is ``False``; a non-finite estimate (a
pattern that could not be decoded) also counts as wrong.

Confidence intervals (:func:`mean_ci`, :func:`ratio_ci`) treat each row of a ``(batches, trials)``
table as one cluster: trials that share a batch of inputs are not independent, so the interval
comes from the spread of the per-batch totals (Student t with ``batches − 1`` degrees of freedom).
"""

import jax.numpy as jnp
import numpy as np

from .._core.checks import float_dtype
from .._core.types import Array, ArrayLike, Bool, Float, Int, Real

__all__ = ["mean_ci", "mean_l2_error", "mse", "ratio_ci", "rel_acc", "rmse"]


def _errors(y_hat, y, name: str) -> Float[Array, "k r"]:
    """``ŷ − y`` with one row per input (trailing axes flattened), in the common float dtype."""
    y_hat, y = jnp.asarray(y_hat), jnp.asarray(y)
    if y_hat.shape != y.shape or y_hat.ndim < 1:
        raise ValueError(
            f"`{name}` needs `y_hat` and `y` of one shape (k, ...), one row per input; got "
            f"{y_hat.shape} and {y.shape}"
        )
    dtype = float_dtype(y_hat, y)
    k = y.shape[0]
    return y_hat.astype(dtype).reshape(k, -1) - y.astype(dtype).reshape(k, -1)


def mse(y_hat: Float[ArrayLike, "k *m"], y: Float[ArrayLike, "k *m"]) -> Float[Array, ""]:
    """Mean squared error per input, ``(1/K) Σ_k ‖ŷ_k − y_k‖₂²`` (the papers' loss (1)).

    Each row is one input's output of any trailing shape (flattened for the norm). Batch over
    straggler patterns with ``jax.vmap``.

    Args:
        y_hat: estimates, shape ``(K, ...)``.
        y: true outputs ``f(x_k)``, the same shape.

    Returns:
        A scalar.

    Raises:
        ValueError: if the shapes differ.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> float(gcc.mse(jnp.array([[3.0, 4.0], [0.0, 0.0]]), jnp.zeros((2, 2))))
        12.5
    """
    err = _errors(y_hat, y, "mse")
    return jnp.sum(err * err) / err.shape[0]


def rmse(y_hat: Float[ArrayLike, "k *m"], y: Float[ArrayLike, "k *m"]) -> Float[Array, ""]:
    """Root mean squared error of one batch, ``√((1/K) Σ_k ‖ŷ_k − y_k‖₂²) = √mse``.

    Over many batches or patterns, average :func:`mse` first and take the root of the mean
    (the experiments report ``√(mean MSE)``). Differentiable everywhere (the gradient at zero
    error is taken as 0). Arguments, result and errors as :func:`mse`; for the mean of the
    un-squared ℓ2 errors (LeTCC's "RMSE") see :func:`mean_l2_error`.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> round(float(gcc.rmse(jnp.array([[3.0, 4.0], [0.0, 0.0]]), jnp.zeros((2, 2)))), 4)
        3.5355
    """
    m = mse(y_hat, y)
    pos = m > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, m, 1.0)), 0.0)


def mean_l2_error(y_hat: Float[ArrayLike, "k *m"], y: Float[ArrayLike, "k *m"]) -> Float[Array, ""]:
    """Mean L2 error of one batch, ``(1/K) Σ_k ‖ŷ_k − y_k‖₂`` (un-squared ℓ2 norms).

    LeTCC's "root mean square difference" (it calls it RMSE): the mean over inputs of the
    Euclidean norm of each error vector, neither ``√mse`` nor normalised by the output size.
    Differentiable everywhere (the gradient of a zero error is taken as 0). Arguments, result
    and errors as :func:`mse`.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> float(gcc.mean_l2_error(jnp.array([[3.0, 4.0], [0.0, 0.0]]), jnp.zeros((2, 2))))
        2.5
    """
    err = _errors(y_hat, y, "mean_l2_error")
    sq = jnp.sum(err * err, axis=1)
    pos = sq > 0
    norms = jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)
    return jnp.sum(norms) / err.shape[0]


def rel_acc(
    y_hat: Float[ArrayLike, "*p k c"],
    y: Float[ArrayLike, "... c"],
    labels: Int[ArrayLike, "..."] | None = None,
    *,
    available: Bool[ArrayLike, "..."] | None = None,
) -> Float[Array, ""]:
    """Relative accuracy: decoded accuracy over the base model's accuracy on the same inputs.

    With class scores on the last axis, predictions are ``argmax``. Against true ``labels``::

        RelAcc = Σ [argmax ŷ = label ∧ available ∧ ŷ finite] / Σ [argmax y = label]

    and without labels (against the base model's argmax, ParM's "reconstruction accuracy")::

        RelAcc = Σ [argmax ŷ = argmax y ∧ available ∧ ŷ finite] / #entries

    Sums run over every entry of the leading axes: pass a stack of trials ``(p, k, c)`` with the
    true outputs ``y`` broadcastable to it (e.g. ``(k, c)``) to get the ratio of the mean
    accuracies over all trials — the pooled RelAcc an experiment reports. A missing estimate
    (``available`` False, e.g. an uncoded straggler) and a non-finite one count as wrong.

    Args:
        y_hat: decoded class scores (probabilities or logits), shape ``(*p, k, c)``.
        y: the base model's scores ``f(x_k)``, broadcastable to ``y_hat``.
        labels: true integer labels, broadcastable to ``y_hat.shape[:-1]``; ``None`` compares
            with ``argmax y`` instead.
        available: which estimates exist, broadcastable to ``y_hat.shape[:-1]`` (default all).

    Returns:
        A scalar; NaN when the base model gets no entry right (the ratio is undefined).

    Raises:
        ValueError: for shapes that do not broadcast.

    Example:
        >>> import jax.numpy as jnp, gcc_jax as gcc
        >>> y = jnp.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])      # base predicts 0, 1, 0
        >>> y_hat = jnp.array([[0.7, 0.3], [0.6, 0.4], [0.1, 0.9]])  # decoded: 0, 0, 1
        >>> round(float(gcc.rel_acc(y_hat, y, jnp.array([0, 0, 0]))), 4)   # (2/3) / (2/3)
        1.0
        >>> round(float(gcc.rel_acc(y_hat, y)), 4)                         # agreement 1/3
        0.3333
    """
    y_hat, y = jnp.asarray(y_hat), jnp.asarray(y)
    if y_hat.ndim < 2:
        raise ValueError(
            f"`y_hat` must have shape (..., k, c) with classes last; got {y_hat.shape}"
        )
    try:
        shape = jnp.broadcast_shapes(y_hat.shape, y.shape)
    except ValueError as err:
        raise ValueError(
            f"`y` of shape {y.shape} does not broadcast to `y_hat` of shape {y_hat.shape}"
        ) from err
    if shape != y_hat.shape:
        raise ValueError(f"`y` of shape {y.shape} must broadcast to `y_hat`'s {y_hat.shape}")
    lead = y_hat.shape[:-1]
    base_pred = jnp.broadcast_to(jnp.argmax(y, axis=-1), lead)
    pred = jnp.argmax(y_hat, axis=-1)
    ok = jnp.all(jnp.isfinite(y_hat), axis=-1)
    if available is not None:
        available = jnp.asarray(available)
        if available.dtype != jnp.bool_:
            raise TypeError(f"`available` must be boolean; got dtype {available.dtype}")
        ok = ok & jnp.broadcast_to(available, lead)
    if labels is None:
        target = base_pred
    else:
        labels = jnp.asarray(labels)
        if not jnp.issubdtype(labels.dtype, jnp.integer):
            raise TypeError(f"`labels` must be integers; got dtype {labels.dtype}")
        target = jnp.broadcast_to(labels, lead).astype(pred.dtype)
    dtype = float_dtype(y_hat)
    hits = jnp.sum((pred == target) & ok).astype(dtype)
    base_hits = jnp.sum(base_pred == target).astype(dtype)
    return jnp.where(base_hits > 0, hits / jnp.where(base_hits > 0, base_hits, 1.0), jnp.nan)


def ratio_ci(
    numerator: Real[ArrayLike, "b t"] | Real[ArrayLike, " t"],
    denominator: Real[ArrayLike, "b t"] | Real[ArrayLike, " t"] | float = 1.0,
    *,
    level: float = 0.95,
) -> tuple[float, float]:
    """Pooled ratio ``R = Σ numerator / Σ denominator`` and its confidence half-width.

    Rows of a 2-D table are clusters (batches of inputs), columns trials (straggler sets) that
    share the row's inputs; a 1-D array (or a single row) makes every entry its own cluster.
    With cluster totals ``y_b = Σ_t num[b, t]`` and ``x_b = Σ_t den[b, t]`` over ``B``
    clusters, the ratio estimator's standard error is
    ``se = sqrt(Σ_b (y_b − R x_b)² / (B (B − 1))) / mean_b x_b`` and the half-width is
    ``t_{B−1, (1+level)/2} · se``. With ``denominator = 1`` this is the mean with the usual
    ``t · sd(batch means)/√B`` interval (see :func:`mean_ci`).

    Args:
        numerator: values, shape ``(B, T)`` or ``(T,)``.
        denominator: broadcastable to ``numerator`` (default 1).
        level: confidence level in ``(0, 1)``.

    Returns:
        ``(R, half_width)`` as Python floats; the half-width is NaN with fewer than 2 clusters,
        ``R`` is NaN when ``Σ denominator = 0``.

    Example:
        >>> import numpy as np, gcc_jax as gcc
        >>> r, h = gcc.ratio_ci(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0]))
        >>> r, round(h, 4)
        (1.0, 1.2421)
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1); got {level}")
    num = np.asarray(numerator, dtype=np.float64)
    if num.ndim not in (1, 2) or num.size == 0:
        raise ValueError(f"`numerator` must be a non-empty (B, T) or (T,) array; got {num.shape}")
    den = np.broadcast_to(np.asarray(denominator, dtype=np.float64), num.shape)
    if num.ndim == 2 and num.shape[0] == 1:
        num, den = num[0], den[0]
    y = num.sum(axis=1) if num.ndim == 2 else num
    x = den.sum(axis=1) if den.ndim == 2 else den
    total = x.sum()
    ratio = float(y.sum() / total) if total != 0 else float("nan")
    b = y.shape[0]
    if b < 2 or not np.isfinite(ratio):
        return ratio, float("nan")
    se = np.sqrt(np.sum((y - ratio * x) ** 2) / (b * (b - 1))) / np.mean(x)
    from scipy import stats  # imported here: scipy.stats costs ~1 s at `import gcc_jax`

    return ratio, float(stats.t.ppf(0.5 + level / 2, b - 1) * se)


def mean_ci(
    values: Real[ArrayLike, "b t"] | Real[ArrayLike, " t"], *, level: float = 0.95
) -> tuple[float, float]:
    """Mean of a ``(batches, trials)`` table (or of a 1-D sample) with its CI half-width.

    ``mean`` is the plain mean of all entries; the half-width is
    ``t_{B−1, (1+level)/2} · sd(row means) / √B`` over the ``B`` rows (clusters), or over the
    entries for a 1-D array or a single row. Equals :func:`ratio_ci` with denominator 1.

    Example:
        >>> import numpy as np, gcc_jax as gcc
        >>> m, h = gcc.mean_ci(np.array([[1.0, 3.0], [5.0, 7.0]]))   # row means 2 and 6
        >>> m, round(h, 3)                                            # 12.706 · 2 / 1
        (4.0, 25.412)
    """
    return ratio_ci(values, 1.0, level=level)
