"""Neural networks at the edge of gcc_jax: Flax NNX worker models as pure functions
(`gcc_jax.nn.models`), Optax training loops with a checkpoint cache (`gcc_jax.nn.training`) and
offline data sets (`gcc_jax.nn.data`). Nothing in `spline`, `codes` or `evaluation` imports it;
`import gcc_jax` loads it only when a name that needs it is used."""

import importlib
from typing import TYPE_CHECKING

__all__ = ["data", "models", "training"]


def __getattr__(name: str):
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from . import data as data
    from . import models as models
    from . import training as training
