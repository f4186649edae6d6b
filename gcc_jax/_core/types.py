"""jaxtyping aliases shared across gcc_jax.

Axis vocabulary (STYLE.md): ``k`` inputs, ``n`` workers, ``d`` input size, ``m`` output size,
``p`` straggler patterns (the batched axis), ``q`` query points.
"""

from jaxtyping import Array, ArrayLike, Bool, Float, Int, PRNGKeyArray, Real, Shaped

__all__ = [
    "Array",
    "ArrayLike",
    "Bool",
    "Float",
    "Int",
    "PRNGKeyArray",
    "Real",
    "Shaped",
    "Scalar",
    "Mask",
    "Masks",
]

Scalar = Float[Array, ""]
Mask = Bool[Array, " n"]
Masks = Bool[Array, "p n"]
