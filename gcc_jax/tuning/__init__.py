"""Tuning a SplineCode: its smoothing parameters and its nodes.

The whole pipeline — encoder spline, worker function ``f`` (any JAX function, Flax models
included), decoder spline, loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` — is one differentiable JAX
graph. This subpackage uses that:

* :class:`SplineParams` / :func:`params_from_code`: unconstrained parameters (``log λ_enc``,
  ``log λ_dec``, node gap logits; nodes strictly increasing in ``[−1, 1]`` by construction);
* :func:`expected_loss`: the mean (or max) loss over a batch of straggler masks, differentiable
  with respect to all of them;
* :func:`tune`: Adam (any Optax optimiser) on that loss with held-out validation and early
  stopping, for a :class:`StragglerModel` (``exact(S)``, ``iid(p)``, ``worst(S)``);
* :func:`grid_search`: the papers' baseline, ``(λ_enc, λ_dec)`` on a grid;
* :func:`gcv_lam_dec` / :func:`cv_lam_dec`: per-pattern choices of ``λ_dec`` from the workers'
  outputs alone (generalised and K-fold cross-validation);
* :func:`evaluate`: held-out loss of a code for a straggler model (mean, or worst case by
  exhaustive or local search, within a :class:`gcc_jax.evaluation.SearchBudget`).
"""

from ._evaluate import Evaluation as Evaluation
from ._evaluate import evaluate as evaluate
from ._loss import expected_loss as expected_loss
from ._loss import expected_loss_with_status as expected_loss_with_status
from ._params import SplineParams as SplineParams
from ._params import logits_from_nodes as logits_from_nodes
from ._params import nodes_from_logits as nodes_from_logits
from ._params import params_from_code as params_from_code
from ._select import LamChoice as LamChoice
from ._select import cv_lam_dec as cv_lam_dec
from ._select import cv_score as cv_score
from ._select import default_lam_grid as default_lam_grid
from ._select import gcv_lam_dec as gcv_lam_dec
from ._select import gcv_score as gcv_score
from ._stragglers import StragglerModel as StragglerModel
from ._tune import GridResult as GridResult
from ._tune import TuneHistory as TuneHistory
from ._tune import TuneResult as TuneResult
from ._tune import default_optimizer as default_optimizer
from ._tune import grid_search as grid_search
from ._tune import tune as tune
