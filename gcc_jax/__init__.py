"""gcc_jax: general coded computing in JAX.

A master encodes K inputs into N coded inputs, N workers each evaluate an arbitrary function f,
some straggle, and the master decodes approximations of f on the original inputs from whoever
answered. See docs/design.md (the method) and docs/conventions.md (the binding conventions).

Every public name below is loaded on first use (PEP 562): ``import gcc_jax`` imports neither
JAX nor Flax, Optax, matplotlib, scikit-learn, tqdm or Ray; ``gcc.SplineCode`` imports JAX and
the spline codes, ``gcc.train_parity_model`` Flax and Optax.
"""

from typing import TYPE_CHECKING

from ._core.lazy import lazy_attributes

__version__ = "0.1.0"

#: public name -> the subpackage that defines it
_EXPORTS: dict[str, str] = {
    "Float32PrecisionWarning": "_core.precision",
    "precision_floor": "_core.precision",
    "GCCValueError": "_core.status",
    "Status": "_core.status",
    "describe_status": "_core.status",
    "AbstractCode": "codes",
    "AbstractLinearCode": "codes",
    "AbstractNodeCode": "codes",
    "ApproxIFERCode": "codes",
    "BerrutCode": "codes",
    "Decoded": "codes",
    "Encoded": "codes",
    "GroupedParityCode": "codes",
    "LagrangeCode": "codes",
    "LagrangeECCode": "codes",
    "LearnedCode": "codes",
    "ParityModelCode": "codes",
    "ReplicationCode": "codes",
    "RobustSplineCode": "codes",
    "SplineCode": "codes",
    "UncodedCode": "codes",
    "adversarial_lam_dec": "codes",
    "Adversary": "evaluation",
    "AttackResult": "evaluation",
    "MaskEvaluator": "evaluation",
    "MonteCarloResult": "evaluation",
    "WorstCase": "evaluation",
    "adversary_positions": "evaluation",
    "apply_workers": "evaluation",
    "attack": "evaluation",
    "attack_loss": "evaluation",
    "attack_losses": "evaluation",
    "auto_chunk_size": "evaluation",
    "coded_apply": "evaluation",
    "contiguous_masks": "evaluation",
    "evaluate_masks": "evaluation",
    "input_order": "evaluation",
    "inverse_order": "evaluation",
    "mask_losses": "evaluation",
    "mean_ci": "evaluation",
    "mean_l2_error": "evaluation",
    "monte_carlo_loss": "evaluation",
    "mse": "evaluation",
    "ratio_ci": "evaluation",
    "rel_acc": "evaluation",
    "rmse": "evaluation",
    "sample_masks": "evaluation",
    "targeted_attack": "evaluation",
    "worst_case_adversaries": "evaluation",
    "worst_case_mask": "evaluation",
    "TrainedCode": "nn.training",
    "train_learned_code": "nn.training",
    "train_parity_model": "nn.training",
    "Spline": "spline",
    "chebyshev_nodes": "spline",
    "effective_dof": "spline",
    "effective_dof_with_status": "spline",
    "equispaced_nodes": "spline",
    "fit_smoothing_spline": "spline",
    "fit_smoothing_spline_with_status": "spline",
    "lam_from_dof": "spline",
    "lam_from_dof_with_status": "spline",
    "resolve_solver": "spline",
    "smoother_matrix": "spline",
    "smoother_matrix_with_status": "spline",
    "StragglerModel": "tuning",
    "expected_loss": "tuning",
    "expected_loss_with_status": "tuning",
    "gcv_lam_dec": "tuning",
    "tune": "tuning",
}

_SUBPACKAGES = ("codes", "distributed", "evaluation", "experiments", "nn", "spline", "tuning")

__all__ = sorted(_EXPORTS) + list(_SUBPACKAGES) + ["__version__"]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _EXPORTS, _SUBPACKAGES, __all__)

if TYPE_CHECKING:  # the same names, for type checkers and documentation tools
    from . import codes as codes
    from . import distributed as distributed
    from . import evaluation as evaluation
    from . import experiments as experiments
    from . import nn as nn
    from . import spline as spline
    from . import tuning as tuning
    from ._core.precision import Float32PrecisionWarning as Float32PrecisionWarning
    from ._core.precision import precision_floor as precision_floor
    from ._core.status import GCCValueError as GCCValueError
    from ._core.status import Status as Status
    from ._core.status import describe_status as describe_status
    from .codes import AbstractCode as AbstractCode
    from .codes import AbstractLinearCode as AbstractLinearCode
    from .codes import AbstractNodeCode as AbstractNodeCode
    from .codes import ApproxIFERCode as ApproxIFERCode
    from .codes import BerrutCode as BerrutCode
    from .codes import Decoded as Decoded
    from .codes import Encoded as Encoded
    from .codes import GroupedParityCode as GroupedParityCode
    from .codes import LagrangeCode as LagrangeCode
    from .codes import LagrangeECCode as LagrangeECCode
    from .codes import LearnedCode as LearnedCode
    from .codes import ParityModelCode as ParityModelCode
    from .codes import ReplicationCode as ReplicationCode
    from .codes import RobustSplineCode as RobustSplineCode
    from .codes import SplineCode as SplineCode
    from .codes import UncodedCode as UncodedCode
    from .codes import adversarial_lam_dec as adversarial_lam_dec
    from .evaluation import Adversary as Adversary
    from .evaluation import AttackResult as AttackResult
    from .evaluation import MaskEvaluator as MaskEvaluator
    from .evaluation import MonteCarloResult as MonteCarloResult
    from .evaluation import WorstCase as WorstCase
    from .evaluation import adversary_positions as adversary_positions
    from .evaluation import apply_workers as apply_workers
    from .evaluation import attack as attack
    from .evaluation import attack_loss as attack_loss
    from .evaluation import attack_losses as attack_losses
    from .evaluation import auto_chunk_size as auto_chunk_size
    from .evaluation import coded_apply as coded_apply
    from .evaluation import contiguous_masks as contiguous_masks
    from .evaluation import evaluate_masks as evaluate_masks
    from .evaluation import input_order as input_order
    from .evaluation import inverse_order as inverse_order
    from .evaluation import mask_losses as mask_losses
    from .evaluation import mean_ci as mean_ci
    from .evaluation import mean_l2_error as mean_l2_error
    from .evaluation import monte_carlo_loss as monte_carlo_loss
    from .evaluation import mse as mse
    from .evaluation import ratio_ci as ratio_ci
    from .evaluation import rel_acc as rel_acc
    from .evaluation import rmse as rmse
    from .evaluation import sample_masks as sample_masks
    from .evaluation import targeted_attack as targeted_attack
    from .evaluation import worst_case_adversaries as worst_case_adversaries
    from .evaluation import worst_case_mask as worst_case_mask
    from .nn.training import TrainedCode as TrainedCode
    from .nn.training import train_learned_code as train_learned_code
    from .nn.training import train_parity_model as train_parity_model
    from .spline import Spline as Spline
    from .spline import chebyshev_nodes as chebyshev_nodes
    from .spline import effective_dof as effective_dof
    from .spline import effective_dof_with_status as effective_dof_with_status
    from .spline import equispaced_nodes as equispaced_nodes
    from .spline import fit_smoothing_spline as fit_smoothing_spline
    from .spline import fit_smoothing_spline_with_status as fit_smoothing_spline_with_status
    from .spline import lam_from_dof as lam_from_dof
    from .spline import lam_from_dof_with_status as lam_from_dof_with_status
    from .spline import resolve_solver as resolve_solver
    from .spline import smoother_matrix as smoother_matrix
    from .spline import smoother_matrix_with_status as smoother_matrix_with_status
    from .tuning import StragglerModel as StragglerModel
    from .tuning import expected_loss as expected_loss
    from .tuning import expected_loss_with_status as expected_loss_with_status
    from .tuning import gcv_lam_dec as gcv_lam_dec
    from .tuning import tune as tune
