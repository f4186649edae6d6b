"""Evaluating codes over straggler patterns: the one mask evaluator, the pipeline (encode, apply
the workers, decode), straggler patterns, worst cases, adversaries and metrics."""

from ._adversary import Adversary as Adversary
from ._adversary import AttackResult as AttackResult
from ._adversary import adversary_positions as adversary_positions
from ._adversary import attack as attack
from ._adversary import attack_loss as attack_loss
from ._adversary import attack_losses as attack_losses
from ._adversary import targeted_attack as targeted_attack
from ._adversary import worst_case_adversaries as worst_case_adversaries
from ._evaluator import MaskEvaluator as MaskEvaluator
from ._evaluator import evaluate_masks as evaluate_masks
from ._evaluator import mask_losses as mask_losses
from ._evaluator import pattern_loss as pattern_loss
from ._metrics import mean_ci as mean_ci
from ._metrics import mse as mse
from ._metrics import ratio_ci as ratio_ci
from ._metrics import rel_acc as rel_acc
from ._metrics import rmse as rmse
from ._pipeline import MonteCarloResult as MonteCarloResult
from ._pipeline import apply_workers as apply_workers
from ._pipeline import coded_apply as coded_apply
from ._pipeline import monte_carlo_loss as monte_carlo_loss
from ._pipeline import outputs_and_targets as outputs_and_targets
from ._policy import BackendPolicy as BackendPolicy
from ._policy import auto_chunk_size as auto_chunk_size
from ._policy import policy_for as policy_for
from ._stragglers import contiguous_masks as contiguous_masks
from ._stragglers import sample_masks as sample_masks
from ._worst_case import DEFAULT_SEARCH as DEFAULT_SEARCH
from ._worst_case import LIGHT_SEARCH as LIGHT_SEARCH
from ._worst_case import THOROUGH_SEARCH as THOROUGH_SEARCH
from ._worst_case import SearchBudget as SearchBudget
from ._worst_case import WorstCase as WorstCase
from ._worst_case import as_budget as as_budget
from ._worst_case import search_worst_case as search_worst_case
from ._worst_case import worst_case_mask as worst_case_mask
