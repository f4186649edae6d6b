"""Paper-style experiments used by the `gcc-jax` command line."""

from .dnn import CODES as CODES
from .dnn import PatternMetrics as PatternMetrics
from .dnn import evaluate_patterns as evaluate_patterns
from .dnn import format_dnn_table as format_dnn_table
from .dnn import plot_dnn as plot_dnn
from .dnn import run_dnn as run_dnn
from .dnn import save_dnn as save_dnn
from .dnn import toy_config as toy_config
from .poly import format_poly_table as format_poly_table
from .poly import plot_poly as plot_poly
from .poly import run_poly as run_poly
from .poly import save_poly as save_poly
from .rates import fit_slope as fit_slope
from .rates import format_rates_table as format_rates_table
from .rates import plot_rates as plot_rates
from .rates import run_rates as run_rates
from .rates import save_rates as save_rates
