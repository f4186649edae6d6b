"""Lazy package attributes (PEP 562): a package names what it offers and where each name lives;
the defining module is imported on first access and the value cached in the package's namespace."""

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str,
    namespace: dict[str, Any],
    names: Mapping[str, str] = {},  # noqa: B006 (never mutated)
    modules: Iterable[str] = (),
    exported: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    ``names`` maps an attribute to the submodule (relative to ``package``) that defines it;
    ``modules`` lists submodules offered as attributes themselves. A resolved value is stored in
    ``namespace`` (the package's ``globals()``), so each name is looked up once. ``__dir__`` lists
    the namespace, the lazy names and ``exported`` (the package's ``__all__``).

    Example:
        >>> ns = {}
        >>> getattr_, dir_ = lazy_attributes("json", ns, {"JSONDecoder": "decoder"}, ["encoder"])
        >>> getattr_("JSONDecoder").__name__, getattr_("encoder").__name__
        ('JSONDecoder', 'json.encoder')
        >>> sorted(ns)
        ['JSONDecoder', 'encoder']
    """
    names, modules = dict(names), frozenset(modules)
    listed = sorted(set(names) | modules | set(exported))

    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        elif name in modules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(listed))

    return __getattr__, __dir__
