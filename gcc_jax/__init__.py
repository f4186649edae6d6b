"""gcc_jax: general coded computing in JAX.

A master encodes K inputs into N coded inputs, N workers each evaluate an arbitrary function f,
some straggle, and the master decodes approximations of f on the original inputs from whoever
answered. See docs/design.md (the method) and docs/conventions.md (the binding conventions).
"""

from . import tuning as tuning
from ._adversary import Adversary as Adversary
from ._adversary import AttackResult as AttackResult
from ._adversary import adversary_positions as adversary_positions
from ._adversary import attack as attack
from ._adversary import attack_loss as attack_loss
from ._adversary import attack_losses as attack_losses
from ._adversary import targeted_attack as targeted_attack
from ._adversary import worst_case_adversaries as worst_case_adversaries
from ._evaluator import MaskEvaluator as MaskEvaluator
from ._evaluator import auto_chunk_size as auto_chunk_size
from ._evaluator import evaluate_masks as evaluate_masks
from ._evaluator import mask_losses as mask_losses
from ._metrics import mean_ci as mean_ci
from ._metrics import mse as mse
from ._metrics import ratio_ci as ratio_ci
from ._metrics import rel_acc as rel_acc
from ._metrics import rmse as rmse
from ._nodes import chebyshev_nodes as chebyshev_nodes
from ._nodes import equispaced_nodes as equispaced_nodes
from ._pipeline import MonteCarloResult as MonteCarloResult
from ._pipeline import apply_workers as apply_workers
from ._pipeline import coded_apply as coded_apply
from ._pipeline import monte_carlo_loss as monte_carlo_loss
from ._precision import Float32PrecisionWarning as Float32PrecisionWarning
from ._precision import precision_floor as precision_floor
from ._smoothing import effective_dof as effective_dof
from ._smoothing import lam_from_dof as lam_from_dof
from ._spline import Spline as Spline
from ._spline import fit_smoothing_spline as fit_smoothing_spline
from ._spline import fit_smoothing_spline_with_status as fit_smoothing_spline_with_status
from ._spline import resolve_solver as resolve_solver
from ._spline import smoother_matrix as smoother_matrix
from ._spline import smoother_matrix_with_status as smoother_matrix_with_status
from ._status import GCCValueError as GCCValueError
from ._status import Status as Status
from ._status import describe_status as describe_status
from ._stragglers import contiguous_masks as contiguous_masks
from ._stragglers import sample_masks as sample_masks
from ._worst_case import WorstCase as WorstCase
from ._worst_case import worst_case_mask as worst_case_mask
from .codes import AbstractCode as AbstractCode
from .codes import AbstractLinearCode as AbstractLinearCode
from .codes import AbstractNodeCode as AbstractNodeCode
from .codes import ApproxIFERCode as ApproxIFERCode
from .codes import BerrutCode as BerrutCode
from .codes import Decoded as Decoded
from .codes import Encoded as Encoded
from .codes import LagrangeCode as LagrangeCode
from .codes import LagrangeECCode as LagrangeECCode
from .codes import LearnedCode as LearnedCode
from .codes import ParityModelCode as ParityModelCode
from .codes import ReplicationCode as ReplicationCode
from .codes import RobustSplineCode as RobustSplineCode
from .codes import SplineCode as SplineCode
from .codes import UncodedCode as UncodedCode
from .codes import adversarial_lam_dec as adversarial_lam_dec
from .training import TrainedCode as TrainedCode
from .training import train_learned_code as train_learned_code
from .training import train_parity_model as train_parity_model
from .tuning import StragglerModel as StragglerModel
from .tuning import expected_loss as expected_loss
from .tuning import gcv_lam_dec as gcv_lam_dec
from .tuning import tune as tune

__version__ = "0.1.0"
