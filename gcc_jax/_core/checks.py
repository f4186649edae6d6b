"""Validation shared by everything in gcc_jax: dtypes, integers, reals, λ, nodes, masks, keys.

The library, the distributed service, the experiments and the command line check their
arguments here. The scalar checks (:func:`as_int`, :func:`as_real`, :func:`as_choice`) live in
:mod:`gcc_jax._core.scalars`, importable without JAX so that the command line rejects a bad
flag before it imports JAX; this module re-exports them and adds the array checks.

One place, one policy (see :mod:`gcc_jax._core.status`): *static* problems (wrong shapes, ranks or
dtypes, non-boolean masks, non-integral sizes, complex or string data) raise ``TypeError`` /
``ValueError`` at trace time with a message naming the argument; *value* problems (NaN/Inf,
negative λ, unsorted nodes) raise :class:`gcc_jax.GCCValueError` in eager calls and become
:class:`gcc_jax.Status` flags under ``jit``/``vmap``.
"""

import numbers

import jax
import jax.numpy as jnp
import numpy as np

from .sanitise import data_status as data_status
from .sanitise import input_status as input_status
from .sanitise import lam_status as lam_status
from .sanitise import node_status as node_status
from .sanitise import weight_status as weight_status
from .scalars import as_choice as as_choice
from .scalars import as_int as as_int
from .scalars import as_real as as_real
from .scalars import interval as interval
from .status import GCCValueError, is_concrete
from .types import Array, ArrayLike, Bool, Float

__all__ = [
    "as_choice",
    "as_float_array",
    "as_floats",
    "as_int",
    "as_ints",
    "as_lam",
    "as_lam_grid",
    "as_mask",
    "as_mask_rows",
    "as_masks",
    "as_nodes",
    "as_prob",
    "as_real",
    "as_weights",
    "check_instance",
    "check_node_leaves",
    "check_inputs",
    "check_key",
    "check_outputs",
    "data_status",
    "float_dtype",
    "interval",
    "input_status",
    "lam_status",
    "map_chunks",
    "node_status",
    "weight_status",
]


def map_chunks(fn, xs):
    """``jax.lax.map(fn, xs)``, except that one chunk (a leading axis of 1) is ``fn`` applied
    directly: no loop to trace, compile or differentiate around a single decode (a one-mask
    ``decode`` is a batch of one chunk)."""
    if jax.tree.leaves(xs)[0].shape[0] == 1:
        return jax.tree.map(lambda a: a[None], fn(jax.tree.map(lambda a: a[0], xs)))
    return jax.lax.map(fn, xs)


def float_dtype(*arrays) -> jnp.dtype:
    """The promoted floating dtype of ``arrays`` (JAX's default float if none is floating)."""
    dtype = None
    for a in arrays:
        if isinstance(a, jax.Array | np.ndarray | np.generic):
            dt = a.dtype
        else:
            try:
                if np.asarray(a).dtype.kind in "OSUV":
                    continue  # strings, objects: left to the argument's own check
                dt = jnp.asarray(a).dtype
            except (TypeError, ValueError):
                continue
        if jnp.issubdtype(dt, jnp.floating):
            dtype = dt if dtype is None else jnp.promote_types(dtype, dt)
    return dtype if dtype is not None else jnp.zeros(()).dtype


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_float_array(x, name: str) -> Array:
    """``x`` as a real JAX array; complex, string and object data raise ``TypeError``.

    Integer and boolean arrays are accepted (they are promoted where arithmetic needs it).
    """
    if isinstance(x, str | bytes):
        raise TypeError(f"`{name}` must be a real array; got a string {_describe(x)}")
    if not isinstance(x, jax.Array):
        try:
            host = np.asarray(x)
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"`{name}` must be a real array; got {type(x).__name__} ({err})"
            ) from None
        if host.dtype.kind in "OSUV":  # object, bytes, str, void
            raise TypeError(
                f"`{name}` must be a real array; got {type(x).__name__} of dtype {host.dtype}"
            )
    try:
        arr = jnp.asarray(x)
    except TypeError as err:
        raise TypeError(f"`{name}` must be a real array; got {type(x).__name__} ({err})") from None
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(
            f"`{name}` must be real; got complex dtype {arr.dtype} (gcc_jax does not silently "
            "drop imaginary parts: code the real and imaginary parts as separate outputs)"
        )
    if not (jnp.issubdtype(arr.dtype, jnp.number) or arr.dtype == jnp.bool_):
        raise TypeError(f"`{name}` must be a real array; got dtype {arr.dtype}")
    return arr


def as_nodes(t: ArrayLike, name: str, dtype) -> Float[Array, " n"]:
    """Nodes: 1-D, at least 2, real; in eager calls also finite and strictly increasing."""
    t = as_float_array(t, name)
    if t.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D array of nodes; got shape {t.shape}")
    if t.shape[0] < 2:
        raise ValueError(f"`{name}` must hold at least 2 nodes; got {t.shape[0]}")
    t = t.astype(dtype)
    if is_concrete(t):
        tn = np.asarray(t)
        if not np.all(np.isfinite(tn)):
            raise GCCValueError(f"`{name}` contains NaN or Inf")
        if not np.all(np.diff(tn) > 0):
            raise GCCValueError(
                f"`{name}` must be strictly increasing (sorted ascending, no duplicates); "
                f"got {tn if tn.size <= 12 else str(tn[:12])[:-1] + ' …]'}"
            )
    return t


def as_lam(lam, name: str, dtype, *, check_value: bool = True) -> Float[Array, ""]:
    """A smoothing parameter: a real scalar; in eager calls also finite and ``>= 0``.

    Strings, complex numbers and non-scalars raise ``TypeError``/``ValueError`` (a string
    ``"0.1"`` is not silently parsed). ``check_value=False`` skips the value check (the
    ``*_with_status`` paths report it as ``Status.NEGATIVE_LAM`` instead).
    """
    if isinstance(lam, str | bytes):
        raise TypeError(f"`{name}` must be a real number; got the string {lam!r}")
    if isinstance(lam, bool | np.bool_):
        raise TypeError(f"`{name}` must be a real number; got bool {lam!r}")
    if lam is None:
        raise TypeError(f"`{name}` must be a real number; got None")
    try:
        lam = jnp.asarray(lam)
    except (TypeError, ValueError):
        raise TypeError(
            f"`{name}` must be a real number; got {type(lam).__name__} {_describe(lam)}"
        ) from None
    if lam.ndim != 0:
        raise ValueError(f"`{name}` must be a scalar; got shape {lam.shape}")
    if not (jnp.issubdtype(lam.dtype, jnp.floating) or jnp.issubdtype(lam.dtype, jnp.integer)):
        raise TypeError(f"`{name}` must be a real number; got dtype {lam.dtype}")
    lam = lam.astype(dtype)
    if check_value and is_concrete(lam):
        value = float(lam)
        if not np.isfinite(value) or value < 0:
            raise GCCValueError(f"`{name}` must be finite and >= 0; got {value}")
    return lam


def as_prob(p, name: str = "p", *, upper_open: bool = False) -> float:
    """A probability: a real number in ``[0, 1]`` (``[0, 1)`` with ``upper_open``).

    Strings, complex numbers, bools and arrays of more than one value raise ``TypeError``
    (a string ``"0.2"`` is not silently parsed); values outside the range ``ValueError``.
    """
    try:
        return as_real(p, name, 0.0, 1.0, hi_open=upper_open)
    except ValueError:
        rng = "[0, 1)" if upper_open else "[0, 1]"
        raise ValueError(f"`{name}` must be a probability in {rng}; got {p!r}") from None


def _sequence(values, name: str, what: str) -> list:
    """``values`` as a non-empty list (a scalar is a list of one; strings are not lists)."""
    if isinstance(values, str | bytes):
        raise TypeError(f"`{name}` must be {what}; got the string {_describe(values)}")
    if isinstance(values, np.ndarray | jax.Array):
        values = [values] if values.ndim == 0 else list(np.asarray(values).ravel())
    elif isinstance(values, numbers.Number | np.generic):
        values = [values]
    else:
        try:
            values = list(values)
        except TypeError:
            raise TypeError(
                f"`{name}` must be {what}; got {type(values).__name__} {_describe(values)}"
            ) from None
    if not values:
        raise ValueError(f"`{name}` must hold at least one value ({what}); got none")
    return values


def as_ints(values, name: str, lo: int | None = None, hi: int | None = None) -> tuple[int, ...]:
    """A non-empty list of integers (e.g. worker counts), each checked by :func:`as_int`; one
    integer is a list of one."""
    values = _sequence(values, name, "a list of integers")
    return tuple(as_int(v, f"{name}[{i}]", lo, hi) for i, v in enumerate(values))


def as_floats(values, name: str, *interval, **open_ends) -> tuple[float, ...]:
    """A non-empty list of finite real numbers, each checked by :func:`as_real` against the same
    interval (``lo``, ``hi``, ``lo_open``, ``hi_open`` as there); one number is a list of one."""
    values = _sequence(values, name, "a list of real numbers")
    return tuple(as_real(v, f"{name}[{i}]", *interval, **open_ends) for i, v in enumerate(values))


def as_lam_grid(values, name: str) -> np.ndarray:
    """A grid of smoothing parameters: a non-empty 1-D float64 array of finite ``λ >= 0``."""
    return np.asarray(as_floats(values, name, 0.0), float)


def _as_bool_array(mask, name: str):
    """``mask`` as an array (NumPy stays NumPy) that must be boolean; clear errors otherwise."""
    if isinstance(mask, str | bytes):
        raise TypeError(f"`{name}` must be a boolean array; got the string {_describe(mask)}")
    if not isinstance(mask, np.ndarray | jax.Array):
        try:
            mask = np.asarray(mask)
        except (TypeError, ValueError):
            raise TypeError(
                f"`{name}` must be a boolean array (True = the worker returned in time); got "
                f"{type(mask).__name__} {_describe(mask)}"
            ) from None
    if mask.dtype != np.bool_:
        raise TypeError(
            f"`{name}` must be boolean (True = the worker returned in time); got dtype {mask.dtype}"
        )
    return mask


def as_weights(
    weights, n: int, dtype, name: str = "weights", *, check_value: bool = True
) -> Float[Array, " n"]:
    """Observation weights: real, shape ``(n,)`` (``None`` = all ones); in eager calls also
    finite and ``>= 0`` (``check_value=False`` leaves that to :func:`weight_status`)."""
    if weights is None:
        return jnp.ones((n,), dtype)
    w = as_float_array(weights, name)
    if w.shape != (n,):
        raise ValueError(f"`{name}` must have shape ({n},), one weight per node; got {w.shape}")
    w = w.astype(dtype)
    if check_value and is_concrete(w):
        wn = np.asarray(w)
        bad = np.flatnonzero(~(np.isfinite(wn) & (wn >= 0)))
        if bad.size:
            raise GCCValueError(
                f"`{name}` must be finite and >= 0; got {name}[{bad[0]}] = {wn[bad[0]]} "
                f"({bad.size} bad entries)"
            )
    return w


def as_mask(mask, n: int, name: str = "mask") -> Bool[Array, " n"]:
    """One straggler mask: boolean of shape ``(n,)`` (``None`` = all live)."""
    if mask is None:
        return jnp.ones((n,), bool)
    mask = jnp.asarray(_as_bool_array(mask, name))
    if mask.shape != (n,):
        raise ValueError(
            f"`{name}` must have shape ({n},), one entry per worker; got {mask.shape} "
            "(use jax.vmap for a batch of masks)"
        )
    return mask


def as_masks(masks, n: int, name: str = "masks") -> np.ndarray | Array:
    """A batch of masks: boolean ``(p, n)``; NumPy arrays stay on the host (no copy)."""
    if isinstance(masks, jax.core.Tracer):
        raise TypeError(
            f"`{name}` is traced: this function drives a host-side loop over chunks of masks "
            "and cannot run under jit/vmap; use gcc_jax.mask_losses (jittable) inside jit"
        )
    masks = _as_bool_array(masks, name)
    if masks.ndim != 2 or masks.shape[1] != n:
        raise ValueError(
            f"`{name}` must have shape (p, {n}), one row per pattern; got {masks.shape}"
        )
    return masks


def check_key(key, name: str = "key") -> Array:
    """A JAX PRNG key (new-style ``jax.random.key`` or legacy ``uint32[2]``)."""
    if isinstance(key, jax.Array) and (
        jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
        or (key.dtype == jnp.uint32 and key.shape == (2,))
    ):
        return key
    raise TypeError(
        f"`{name}` must be a JAX PRNG key (jax.random.key(seed)); got "
        f"{type(key).__name__} {_describe(key)}"
    )


def check_node_leaves(code, names: tuple[str, ...]) -> None:
    """Static checks on node leaves (1-D, ≥ 2 nodes); value checks only on concrete arrays."""
    arrays = [getattr(code, name) for name in names]
    shapes = [getattr(a, "shape", None) for a in arrays]
    if any(s is None for s in shapes):  # JAX rebuilds pytrees with placeholders too
        return
    for name, s in zip(names, shapes, strict=True):
        if len(s) != 1 or s[0] < 2:
            raise ValueError(f"`{name}` must be 1-D with at least 2 nodes; got shape {s}")
    if is_concrete(*arrays) and all(isinstance(a, jax.Array | np.ndarray) for a in arrays):
        dtype = float_dtype(*arrays)
        for name, a in zip(names, arrays, strict=True):
            as_nodes(a, name, dtype)


def check_instance(value, cls: type | tuple[type, ...], name: str, what: str | None = None):
    """``value`` must be an instance of ``cls`` (a class or a tuple of them), described as
    ``what`` (default the class name)."""
    if not isinstance(value, cls):
        what = what or getattr(cls, "__name__", str(cls))
        raise TypeError(f"`{name}` must be a {what}; got {type(value).__name__} {_describe(value)}")
    return value


def check_inputs(x, k: int, name: str = "x") -> Array:
    """``x`` must be real with one leading row per input; NaN/Inf raises in eager calls."""
    x = as_float_array(x, name)
    if x.ndim < 1 or x.shape[0] != k:
        raise ValueError(f"`{name}` must have shape ({k}, ...), one row per input; got {x.shape}")
    if is_concrete(x) and jnp.issubdtype(x.dtype, jnp.inexact):
        if not np.all(np.isfinite(np.asarray(x))):
            raise GCCValueError(f"`{name}` contains NaN or Inf")
    return x


def check_outputs(y, mask, n: int, name: str = "y") -> tuple[Array, Bool[Array, " n"]]:
    """``y`` real with one row per worker; ``mask`` boolean of shape ``(n,)``."""
    y = as_float_array(y, name)
    if y.ndim < 1 or y.shape[0] != n:
        raise ValueError(f"`{name}` must have one row per worker (n={n}); got shape {y.shape}")
    return y, as_mask(mask, n)


def as_mask_rows(masks, n: int, name: str = "masks", *, chunked: bool = False):
    """A batch of masks as a (possibly traced) boolean array of shape ``(p, n)``, or of shape
    ``(g, p, n)`` (``g`` chunks of ``p`` masks) when ``chunked``."""
    masks = jnp.asarray(masks)
    if masks.dtype != jnp.bool_:
        raise TypeError(f"`{name}` must be boolean (True = returned in time); got {masks.dtype}")
    ndim, want = (3, f"(g, p, {n}), chunks of rows") if chunked else (2, f"(p, {n})")
    if masks.ndim != ndim or masks.shape[-1] != n:
        raise ValueError(f"`{name}` must have shape {want}, one row per pattern; got {masks.shape}")
    return masks
