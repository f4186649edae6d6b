"""The worst-case search flags that several commands share: ``--restarts``, ``--proposals``,
``--max-iters`` and ``--patience``, which set the keys of an experiment's ``search`` budget
(checked by :data:`gcc_jax.experiments._checks.SEARCH`)."""

import argparse
from collections.abc import Mapping

from .._command import merge_config

__all__ = ["add_search_arguments", "search_config"]

_SEARCH_HELP = dict(
    restarts="worst-case search chains",
    proposals="neighbours proposed per search step",
    max_iters="local-search steps",
    patience="search steps without gain before stopping",
)


def add_search_arguments(p: argparse.ArgumentParser, budget: Mapping[str, int]) -> None:
    """The worst-case search flags of ``budget``'s keys (``--restarts``, ``--proposals``,
    ``--max-iters``, ``--patience``), each naming its default from ``budget``."""
    for key, value in budget.items():
        flag = "--" + key.replace("_", "-")
        p.add_argument(flag, type=int, help=f"{_SEARCH_HELP[key]} ({value})")


def search_config(args: argparse.Namespace, budget: Mapping[str, int]) -> dict[str, int]:
    """``budget`` overridden by the search flags given (see :func:`add_search_arguments`)."""
    return merge_config(budget, None, {key: getattr(args, key) for key in budget})
