"""Optax training for the worker models, with a checkpoint cache.

- `make_train_step`: the pure jitted ``step(params, opt_state, batch) -> (params, opt_state,
  loss)``;
- `fit`: deterministic mini-batch epochs with a progress bar;
- `accuracy`: chunked top-1 accuracy;
- `train_classifier`: model name + data set -> `TrainedModel`, trained once and then loaded
  from the cache (``$GCC_JAX_CACHE``, ``$XDG_CACHE_HOME/gcc_jax`` or ``~/.cache/gcc_jax``);
- `train_parity_model` (ParM) and `train_learned_code` (learned encoder/decoder): a trained
  code as a `TrainedCode`, through the same cache, both set by one `TrainSettings`;
- `cached_fit`: the one checkpoint cache of every training above, keyed by a config that holds
  `tree_fingerprint`s of its input arrays.
"""

from ._cache import CACHE_ENV_VAR as CACHE_ENV_VAR
from ._cache import CacheError as CacheError
from ._cache import CacheWarning as CacheWarning
from ._cache import default_cache_dir as default_cache_dir
from ._cached import CachedFit as CachedFit
from ._cached import TrainingRun as TrainingRun
from ._cached import cached_fit as cached_fit
from ._cached import tree_fingerprint as tree_fingerprint
from ._classifier import TrainedModel as TrainedModel
from ._classifier import train_classifier as train_classifier
from ._classifier import validation_indices as validation_indices
from ._learned import train_learned_code as train_learned_code
from ._loop import Batch as Batch
from ._loop import FitResult as FitResult
from ._loop import StepResult as StepResult
from ._loop import accuracy as accuracy
from ._loop import cross_entropy_loss as cross_entropy_loss
from ._loop import fit as fit
from ._loop import make_train_step as make_train_step
from ._parity import TrainedCode as TrainedCode
from ._parity import TrainSettings as TrainSettings
from ._parity import adam_l2 as adam_l2
from ._parity import base_outputs as base_outputs
from ._parity import train_parity_model as train_parity_model

__all__ = [
    "CACHE_ENV_VAR",
    "Batch",
    "CacheError",
    "CachedFit",
    "CacheWarning",
    "FitResult",
    "StepResult",
    "TrainSettings",
    "TrainedCode",
    "TrainedModel",
    "TrainingRun",
    "accuracy",
    "adam_l2",
    "base_outputs",
    "cached_fit",
    "cross_entropy_loss",
    "default_cache_dir",
    "fit",
    "make_train_step",
    "train_classifier",
    "train_learned_code",
    "train_parity_model",
    "tree_fingerprint",
    "validation_indices",
]
