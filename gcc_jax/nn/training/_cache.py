"""Checkpoint cache: parameters as ``.npz`` (flattened by tree path) plus JSON metadata."""

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, PyTree

__all__ = [
    "CACHE_ENV_VAR",
    "CacheError",
    "CacheWarning",
    "cache_key",
    "default_cache_dir",
    "load_checkpoint",
    "save_checkpoint",
]

CACHE_ENV_VAR = "GCC_JAX_CACHE"
"""Environment variable that overrides the cache directory."""

FORMAT_VERSION = 1

Params = PyTree[Float[ArrayLike, "..."]]


class CacheError(Exception):
    """A cached checkpoint exists but cannot be used (corrupt, truncated or mismatched)."""


class CacheWarning(UserWarning):
    """A cached checkpoint was unusable (and is retrained) or could not be written."""


def default_cache_dir() -> Path:
    """The gcc_jax cache directory.

    In order: ``$GCC_JAX_CACHE``; ``$XDG_CACHE_HOME/gcc_jax``; ``~/.cache/gcc_jax``.

    Returns:
        The directory (not created).

    Example:
        >>> default_cache_dir().name in ("gcc_jax",) or "GCC_JAX_CACHE" in os.environ
        True
    """
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gcc_jax"


def cache_key(config: dict[str, Any]) -> str:
    """A 16-hex-digit SHA-256 of a JSON-serialisable config (keys sorted)."""
    blob = json.dumps({"format": FORMAT_VERSION, **config}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _path_name(path) -> str:
    parts = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return "/".join(parts)


def flatten_params(params: Params) -> dict[str, np.ndarray]:
    """``{"layers/0/kernel": array, ...}``: a pytree flattened by tree path into NumPy arrays."""
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {_path_name(path): np.asarray(leaf) for path, leaf in flat}


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(stem: Path, params: Params, metadata: dict[str, Any]) -> None:
    """Write ``stem.npz`` (the parameters) and ``stem.json`` (metadata and the npz's SHA-256).

    Both files are written atomically (temporary file, then rename); the JSON goes last, so a
    checkpoint is complete exactly when its JSON exists and names the npz's checksum.
    """
    stem.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **flatten_params(params))
    blob = buf.getvalue()
    _atomic_write(stem.with_suffix(".npz"), blob)
    meta = {**metadata, "format": FORMAT_VERSION, "npz_sha256": hashlib.sha256(blob).hexdigest()}
    _atomic_write(stem.with_suffix(".json"), json.dumps(meta, indent=2, default=str).encode())


def load_checkpoint(stem: Path, template: Params) -> tuple[Params, dict[str, Any]] | None:
    """Load a checkpoint written by `save_checkpoint` into the structure of ``template``.

    Args:
        stem: path without suffix.
        template: a pytree with the expected structure, shapes and dtypes (freshly initialised
            parameters of the same model).

    Returns:
        ``(params, metadata)``, or ``None`` when neither file exists.

    Raises:
        CacheError: if the files exist but are incomplete, corrupt or do not match ``template``.
    """
    npz_path, json_path = stem.with_suffix(".npz"), stem.with_suffix(".json")
    if not npz_path.exists() and not json_path.exists():
        return None
    try:
        meta = json.loads(json_path.read_text())
        blob = npz_path.read_bytes()
    except (OSError, ValueError) as e:
        raise CacheError(f"checkpoint {stem} is incomplete or unreadable ({e})") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        raise CacheError(f"{json_path}: unknown checkpoint format")
    if hashlib.sha256(blob).hexdigest() != meta.get("npz_sha256"):
        raise CacheError(f"{npz_path}: checksum does not match {json_path}")
    flat, treedef = jax.tree_util.tree_flatten_with_path(template)
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
            stored = {name: npz[name] for name in npz.files}
    except Exception as e:  # a corrupt zip raises many different exception types
        raise CacheError(f"{npz_path}: not a readable .npz ({e})") from e
    leaves = []
    for path, ref in flat:
        name = _path_name(path)
        if name not in stored:
            raise CacheError(f"{npz_path}: missing parameter {name!r}")
        arr = stored.pop(name)
        if arr.shape != np.shape(ref) or arr.dtype != np.asarray(ref).dtype:
            raise CacheError(
                f"{npz_path}: parameter {name!r} is {arr.dtype} {arr.shape}, expected "
                f"{np.asarray(ref).dtype} {np.shape(ref)}"
            )
        leaves.append(jnp.asarray(arr))
    if stored:
        raise CacheError(f"{npz_path}: unexpected parameters {sorted(stored)}")
    return jax.tree_util.tree_unflatten(treedef, leaves), meta
