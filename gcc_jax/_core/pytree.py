"""Frozen dataclasses as JAX pytrees, and attributes that abstract bases declare.

:func:`pytree_dataclass` makes a class a frozen dataclass and registers it with JAX so that
flattening returns its array fields as leaves (static fields, marked
``dataclasses.field(metadata=dict(static=True))``, go to the tree's structure) and unflattening
rebuilds the object *without* calling ``__init__`` or ``__post_init__``, as equinox's modules do.
``__post_init__`` therefore validates what a user constructs, and only that: JAX may put anything
in the leaves when it rebuilds the tree (tracers, ``object()`` placeholders, gradients, optimiser
updates), so ``jax.grad``, ``jax.tree.map`` and ``optax.apply_updates`` work on the whole object.

:class:`AbstractVar` declares, on an abstract base, an attribute every concrete subclass
provides (equinox's ``AbstractVar``); :func:`missing_abstract_vars` lists the ones a class lacks.
"""

import dataclasses
import typing
from typing import Generic, TypeVar

import jax

__all__ = ["AbstractVar", "missing_abstract_vars", "pytree_dataclass"]

_T = TypeVar("_T")
_C = TypeVar("_C", bound=type)


class AbstractVar(Generic[_T]):
    """Annotation for an attribute every concrete subclass defines: ``min_live: AbstractVar[int]``.

    A subclass provides it as a dataclass field, a property or a class constant; the base checks
    at class creation (:func:`missing_abstract_vars`) and reads it directly, never through
    ``getattr`` with a default.
    """


def _is_abstract_var(annotation) -> bool:
    if isinstance(annotation, str):  # postponed annotations (``from __future__ import ...``)
        return annotation.startswith("AbstractVar")
    return annotation is AbstractVar or typing.get_origin(annotation) is AbstractVar


def missing_abstract_vars(cls: type) -> list[str]:
    """The names declared ``AbstractVar`` on a base of ``cls`` that ``cls`` does not define.

    Defined means: an attribute of the class or of a base (a property, a class constant, a
    dataclass field with a default) or an annotation that is not itself an ``AbstractVar``
    (a dataclass field without a default).
    """
    declared = {
        name
        for c in cls.__mro__
        for name, annotation in vars(c).get("__annotations__", {}).items()
        if _is_abstract_var(annotation)
    }

    def defined(name: str) -> bool:
        for c in cls.__mro__:
            annotations = vars(c).get("__annotations__", {})
            if name in vars(c) or (name in annotations and not _is_abstract_var(annotations[name])):
                return True
        return False

    return sorted(name for name in declared if not defined(name))


def pytree_dataclass(cls: _C) -> _C:
    """``cls`` as a frozen dataclass registered as a JAX pytree that JAX rebuilds unvalidated.

    Fields whose metadata has ``static=True`` are part of the tree's structure (hashable: sizes,
    method names, functions); every other field is a child (an array or any pytree). Flattening
    keys the children by attribute name (``jax.tree_util.GetAttrKey``), as
    ``jax.tree_util.register_dataclass`` does. Unflattening sets the fields on a new object
    directly, so ``__post_init__`` (the user-facing validation and normalisation) runs only when
    the class is called.

    Example:
        >>> import dataclasses, jax, jax.numpy as jnp
        >>> @pytree_dataclass
        ... class Scale:
        ...     factor: jax.Array
        ...     name: str = dataclasses.field(default="s", metadata=dict(static=True))
        ...     def __post_init__(self):
        ...         if not float(self.factor) > 0:
        ...             raise ValueError("`factor` must be > 0")
        >>> grad = jax.grad(lambda s: -s.factor**2)(Scale(jnp.asarray(2.0)))  # rebuilt: -4
        >>> float(grad.factor), grad.name
        (-4.0, 's')
    """
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    static = tuple(f.name for f in fields if f.metadata.get("static", False))
    children = tuple(f.name for f in fields if not f.metadata.get("static", False))
    keys = tuple(jax.tree_util.GetAttrKey(name) for name in children)

    def flatten_with_keys(obj):
        values = ((key, getattr(obj, name)) for key, name in zip(keys, children, strict=True))
        return tuple(values), tuple(getattr(obj, name) for name in static)

    def flatten(obj):
        return tuple(getattr(obj, name) for name in children), tuple(
            getattr(obj, name) for name in static
        )

    def unflatten(aux, leaves):
        obj = object.__new__(cls)
        for name, value in zip(children, leaves, strict=True):
            object.__setattr__(obj, name, value)
        for name, value in zip(static, aux, strict=True):
            object.__setattr__(obj, name, value)
        return obj

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls
