"""Neural networks at the edge of gcc_jax: Flax NNX worker models as pure functions
(`gcc_jax.nn.models`), Optax training loops with a checkpoint cache (`gcc_jax.nn.training`) and
offline data sets (`gcc_jax.nn.data`). Nothing in `spline`, `codes` or `evaluation` imports it;
`import gcc_jax` loads it only when a name that needs it is used."""

from typing import TYPE_CHECKING

from .._core.lazy import lazy_attributes

__all__ = ["data", "models", "training"]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), modules=__all__)

if TYPE_CHECKING:
    from . import data as data
    from . import models as models
    from . import training as training
