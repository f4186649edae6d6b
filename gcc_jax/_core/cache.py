"""Values derived from JAX arrays, kept for as long as those arrays live.

JAX arrays are immutable, so the same array objects always hold the same values: work that
depends only on them (a code's decoder plan, the copies of its leaves on the evaluator's devices)
can be done once and found again by the arrays' identities. An entry is dropped as soon as one
of its arrays is garbage collected (at the next lookup: the collector's callback only notes it)
and the least recently used one beyond ``size`` entries.
Anything that is not a concrete JAX array (a NumPy array, which can change in place, a Python
number, a tracer) is never cached: the value is computed every time.
"""

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax

__all__ = ["IdentityCache"]


class IdentityCache:
    """``cache(arrays, key, compute)``: ``compute()``, remembered for these array objects and
    ``key`` (hashable).

    Example:
        >>> import jax.numpy as jnp
        >>> cache = IdentityCache(size=4)
        >>> a = jnp.arange(3.0)
        >>> first = cache((a,), "sum", lambda: a.sum())
        >>> cache((a,), "sum", lambda: None) is first  # found again, not recomputed
        True
        >>> cache((jnp.arange(3.0),), "sum", lambda: None) is None  # equal values, other array
        True
    """

    def __init__(self, size: int = 8):
        self.size = size
        self._entries: OrderedDict = OrderedDict()
        self._dead: list = []  # keys whose arrays were collected (appended by weakref callbacks)
        self._lock = threading.Lock()

    def __call__(self, arrays: Sequence[Any], key: Hashable, compute: Callable[[], Any]) -> Any:
        if not all(isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer) for a in arrays):
            return compute()
        full = (tuple(id(a) for a in arrays), key)
        with self._lock:
            while self._dead:
                self._entries.pop(self._dead.pop(), None)
            hit = self._entries.get(full)
            if hit is not None and all(r() is a for r, a in zip(hit[0], arrays, strict=True)):
                self._entries.move_to_end(full)
                return hit[1]
        value = compute()

        try:
            refs = tuple(
                weakref.ref(a, lambda _, full=full: self._dead.append(full)) for a in arrays
            )
        except TypeError:  # an array type without weak references: nothing is kept
            return value
        with self._lock:
            self._entries[full] = (refs, value)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._dead.clear()
