"""Tuning of coded computing: lam selection (GCV, grid CV) and gradient-based tuning."""

from ._evaluate import DEFAULT_SEARCH as DEFAULT_SEARCH
from ._evaluate import Evaluation as Evaluation
from ._evaluate import evaluate as evaluate
from ._loss import expected_loss as expected_loss
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
from ._tune import TUNE_SEARCH as TUNE_SEARCH
from ._tune import GridResult as GridResult
from ._tune import TuneHistory as TuneHistory
from ._tune import TuneResult as TuneResult
from ._tune import default_optimizer as default_optimizer
from ._tune import grid_search as grid_search
from ._tune import tune as tune
