"""Paper-style experiments and the `gcc-jax` command line's subcommands.

Each experiment module has a ``run_*`` function returning an :class:`ExperimentResult`, report
functions (a plain-text table, figures), a ``save_*`` function writing them with
:func:`save_result` (one JSON schema for all), its own toy sizes, and a :class:`Command`
registered in :data:`COMMANDS` (what ``gcc-jax`` lists).
"""

from . import _serve_command, adversarial, demo, dnn, learned, poly, rates, regimes, tune
from ._command import Command as Command
from ._command import Interrupted as Interrupted
from ._command import StopOnInterrupt as StopOnInterrupt
from ._images import ImageSplit as ImageSplit
from ._images import split_images as split_images
from ._io import SCHEMA_VERSION as SCHEMA_VERSION
from ._io import ExperimentResult as ExperimentResult
from ._io import load_result as load_result
from ._io import save_figure as save_figure
from ._io import save_result as save_result
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
from .regimes import format_regimes as format_regimes
from .regimes import plot_regimes as plot_regimes
from .regimes import run_regimes as run_regimes
from .regimes import save_regimes as save_regimes

COMMANDS: tuple[Command, ...] = (
    dnn.COMMAND,
    demo.COMMAND,
    rates.COMMAND,
    regimes.COMMAND,
    poly.COMMAND,
    _serve_command.COMMAND,
    learned.COMMAND,
    tune.COMMAND,
    adversarial.COMMAND,
)
"""The ``gcc-jax`` subcommands, in ``--help`` order."""
