"""gcc_jax._core.cache.IdentityCache: values kept by array identity, while the arrays live."""

import gc
import types

import jax.numpy as jnp
import numpy as np

from gcc_jax._core.cache import IdentityCache


class _Count:
    """A compute function that counts its calls and returns a new object each time."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return object()


def test_same_arrays_and_key_are_found_again_other_arrays_or_keys_are_not():
    cache, compute = IdentityCache(size=8), _Count()
    a, b = jnp.arange(3.0), jnp.ones(2)
    first = cache((a, b), 1, compute)
    assert cache((a, b), 1, compute) is first and compute.calls == 1
    assert cache((a, b), 2, compute) is not first  # another key
    assert cache((jnp.arange(3.0), b), 1, compute) is not first  # equal values, other array
    assert cache((b, a), 1, compute) is not first  # order matters
    assert compute.calls == 4


def test_numpy_arrays_and_python_numbers_are_never_cached():
    cache, compute = IdentityCache(), _Count()
    a = np.arange(3.0)  # mutable: the same object may hold other values next time
    assert cache((a,), 0, compute) is not cache((a,), 0, compute)
    assert cache((jnp.ones(2), 1.0), 0, compute) is not None
    assert compute.calls == 3 and not cache._entries


def test_an_entry_goes_when_one_of_its_arrays_is_collected():
    cache, compute = IdentityCache(), _Count()
    a, b = jnp.arange(3.0), jnp.ones(2)
    cache((a, b), 0, compute)
    cache((b,), 0, compute)
    assert len(cache._entries) == 2
    del a
    gc.collect()
    cache((b,), 0, compute)  # the next lookup drops the dead entry
    assert len(cache._entries) == 1 and compute.calls == 2


def test_the_least_recently_used_entry_goes_beyond_the_size():
    cache, compute = IdentityCache(size=2), _Count()
    arrays = [jnp.full(2, float(i)) for i in range(3)]
    first = cache((arrays[0],), 0, compute)
    cache((arrays[1],), 0, compute)
    assert cache((arrays[0],), 0, compute) is first  # now the most recent
    cache((arrays[2],), 0, compute)  # evicts arrays[1]'s entry
    assert cache((arrays[0],), 0, compute) is first and compute.calls == 3
    cache((arrays[1],), 0, compute)
    assert compute.calls == 4
    cache.clear()
    assert not cache._entries


def test_arrays_without_weak_references_are_not_kept(monkeypatch):
    """Should a JAX version's arrays refuse weak references, nothing is cached (no error)."""
    import gcc_jax._core.cache as cache_module

    def refuse(*args):
        raise TypeError("cannot create weak reference")

    monkeypatch.setattr(cache_module, "weakref", types.SimpleNamespace(ref=refuse))
    cache, compute = IdentityCache(), _Count()
    a = jnp.arange(3.0)
    assert cache((a,), 0, compute) is not cache((a,), 0, compute)
    assert compute.calls == 2 and not cache._entries
