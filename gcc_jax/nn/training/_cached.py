"""`cached_fit`: run any training once per configuration, then load it from the checkpoint cache."""

import dataclasses
import datetime
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jaxtyping import PyTree

from ..._core.env import versions
from ._cache import (
    CacheError,
    CacheWarning,
    cache_key,
    default_cache_dir,
    load_checkpoint,
    save_checkpoint,
)

__all__ = ["CachedFit", "TrainingRun", "cached_fit", "tree_fingerprint"]


@dataclasses.dataclass(frozen=True, eq=False)
class CachedFit:
    """The outcome of `cached_fit`.

    Attributes:
        params: the trained parameters (the structure of the template).
        metadata: what the training function reported, plus ``config``, ``key`` and
            ``train_time_s`` (as stored in the checkpoint's JSON).
        from_cache: whether the parameters were loaded instead of trained.
        cache_path: the checkpoint's path without suffix (``None`` with the cache off).
        train_time_s: wall time of the training that produced the parameters (also when loaded).
    """

    params: PyTree
    metadata: dict[str, Any]
    from_cache: bool
    cache_path: Path | None
    train_time_s: float


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class TrainingRun:
    """How a trained object got its parameters: what `TrainedModel` and `TrainedCode` share.

    Keyword-only fields, so each subclass lists its own fields first.

    Attributes:
        train_losses: mean training loss of each epoch.
        num_steps: optimiser steps (each subclass says which).
        from_cache: whether the parameters were loaded from the checkpoint cache.
        cache_path: the checkpoint's path without suffix (``None`` with the cache off).
        train_time_s: wall time of the training that produced the parameters (also when loaded).
        config: the hyper-parameters that key the cache.
    """

    train_losses: tuple[float, ...]
    num_steps: int
    from_cache: bool
    cache_path: Path | None
    train_time_s: float
    config: dict[str, Any]


def tree_fingerprint(*trees: PyTree) -> str:
    """A content hash (BLAKE2b, 16 hex digits) of the leaves of pytrees: structure, dtypes, values.

    Use it to key the cache on arrays (a data set, a base model's parameters) without storing them.

    Example:
        >>> import numpy as np
        >>> tree_fingerprint({"w": np.ones(3)}) == tree_fingerprint({"w": np.ones(3)})
        True
    """
    h = hashlib.blake2b(digest_size=8)
    for tree in trees:
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        h.update(str(treedef).encode())
        for leaf in leaves:
            a = np.ascontiguousarray(np.asarray(leaf))
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.data)
    return h.hexdigest()


def cached_fit(
    kind: str,
    config: dict[str, Any],
    template: PyTree,
    train: Callable[[], tuple[PyTree, dict[str, Any]]],
    *,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    check_metadata: Callable[[dict[str, Any]], None] | None = None,
) -> CachedFit:
    """Load the checkpoint of ``(kind, config)`` from the cache, or call ``train`` and store it.

    The checkpoint lives at ``<cache>/<kind>/<kind>-<key>.{npz,json}`` with ``key`` the SHA-256
    of ``config`` (:func:`gcc_jax.nn.training._cache.cache_key`), ``<cache>`` being ``cache_dir``,
    else ``$GCC_JAX_CACHE``, else ``$XDG_CACHE_HOME/gcc_jax``, else ``~/.cache/gcc_jax``. Put
    every hyper-parameter and a fingerprint of every input array (`tree_fingerprint`) in
    ``config``: equal configs must mean equal results. A corrupt or mismatched checkpoint gives
    a `CacheWarning` and is retrained and overwritten; a checkpoint that cannot be written gives
    a `CacheWarning` and the result is returned anyway.

    Args:
        kind: a short name for this kind of training (a path component, e.g. ``"parity"``).
        config: JSON-serialisable hyper-parameters; they key the cache and are stored.
        template: parameters with the structure, shapes and dtypes of the result (e.g. the
            initial parameters), used to load a checkpoint.
        train: ``train() -> (params, metadata)``; ``metadata`` (JSON-serialisable) is stored
            beside the parameters and returned on later loads.
        cache_dir: cache directory (overrides the environment).
        use_cache: read and write the cache; ``False`` always trains and writes nothing.
        check_metadata: called on a loaded checkpoint's metadata; raising ``KeyError``,
            ``TypeError`` or ``ValueError`` marks the checkpoint unusable (it is retrained).

    Returns:
        A `CachedFit`.

    Example:
        >>> import numpy as np, tempfile
        >>> calls = []
        >>> def train():
        ...     calls.append(1)
        ...     return {"w": np.full(2, 3.0, np.float32)}, {"loss": 0.5}
        >>> d = tempfile.mkdtemp()
        >>> a = cached_fit("demo", {"lr": 1.0}, {"w": np.zeros(2, np.float32)}, train, cache_dir=d)
        >>> b = cached_fit("demo", {"lr": 1.0}, {"w": np.zeros(2, np.float32)}, train, cache_dir=d)
        >>> len(calls), b.from_cache, b.metadata["loss"], b.params["w"].tolist()
        (1, True, 0.5, [3.0, 3.0])
    """
    if not kind or any(c in kind for c in "/\\") or kind.startswith("."):
        raise ValueError(f"`kind` must be a plain name (a path component); got {kind!r}")
    config = json.loads(json.dumps(config))  # what the JSON will hold (tuples become lists)
    key = cache_key({"kind": kind, **config})
    stem = None
    if use_cache:
        root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        stem = root / kind / f"{kind}-{key}"
        try:
            loaded = load_checkpoint(stem, template)
            if loaded is not None:
                params, meta = loaded
                if meta.get("config") != config:
                    raise CacheError(f"{stem}.json was written for another configuration")
                if not isinstance(meta.get("train_time_s"), int | float):
                    raise CacheError(f"{stem}.json lacks a valid train_time_s")
                if check_metadata is not None:
                    try:
                        check_metadata(meta)
                    except (KeyError, TypeError, ValueError) as e:
                        raise CacheError(f"{stem}.json lacks a valid field ({e!r})") from e
                return CachedFit(params, meta, True, stem, float(meta["train_time_s"]))
        except CacheError as e:
            warnings.warn(
                f"ignoring the cached checkpoint and retraining: {e}", CacheWarning, stacklevel=2
            )
    t0 = time.perf_counter()
    params, extra = train()
    jax.block_until_ready(params)
    train_time = time.perf_counter() - t0
    meta = {
        **extra,
        "kind": kind,
        "key": key,
        "config": config,
        "train_time_s": train_time,
        "created": datetime.datetime.now(datetime.UTC).isoformat(),
        "versions": versions(),
    }
    if stem is not None:
        try:
            save_checkpoint(stem, params, meta)
        except OSError as e:
            warnings.warn(f"could not write the checkpoint {stem}: {e}", CacheWarning, stacklevel=2)
    meta = json.loads(json.dumps(meta, default=str))
    return CachedFit(params, meta, False, stem, train_time)
