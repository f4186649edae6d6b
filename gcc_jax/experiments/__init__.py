"""Paper-style experiments and the ``gcc-jax`` command line's subcommands.

An optional layer over the library (the library never imports it; its plots, data and progress
bars need the ``experiments`` extra). Each experiment module has a ``run_*`` function (settings
→ an :class:`ExperimentResult` of typed records), report functions (records → a plain-text
table and figures), a ``save_*`` function writing them with :func:`save_result` (one JSON schema
for all), and a command in :mod:`gcc_jax.experiments._commands` (flags, toy sizes, argument
rules) registered in :data:`COMMANDS`, what ``gcc-jax`` lists.

Importing this package loads no JAX: the names below load their modules on first use.
"""

from typing import TYPE_CHECKING

from .._core.lazy import lazy_attributes
from ._command import Command as Command
from ._command import Interrupted as Interrupted
from ._command import StopOnInterrupt as StopOnInterrupt
from ._commands import COMMANDS as COMMANDS

_LAZY = {
    "ImageSplit": "_images",
    "split_images": "_images",
    "SCHEMA_VERSION": "_io",
    "ExperimentResult": "_io",
    "load_result": "_io",
    "save_figure": "_io",
    "save_result": "_io",
    "CODES": "dnn",
    "PatternMetrics": "dnn",
    "evaluate_patterns": "dnn",
    "format_dnn_table": "dnn",
    "plot_dnn": "dnn",
    "run_dnn": "dnn",
    "save_dnn": "dnn",
    "toy_config": "dnn",
    "format_poly_table": "poly",
    "plot_poly": "poly",
    "run_poly": "poly",
    "save_poly": "poly",
    "fit_slope": "rates",
    "format_rates_table": "rates",
    "plot_rates": "rates",
    "run_rates": "rates",
    "save_rates": "rates",
    "format_regimes": "regimes",
    "plot_regimes": "regimes",
    "run_regimes": "regimes",
    "save_regimes": "regimes",
}

_EXPERIMENTS = (
    "adversarial",
    "demo",
    "dnn",
    "learned",
    "poly",
    "rates",
    "regimes",
    "serve",
    "tune",
)

__all__ = ["COMMANDS", "Command", "Interrupted", "StopOnInterrupt", *_LAZY, *_EXPERIMENTS]


# `gcc_jax.experiments.rates` without importing it first
__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY, _EXPERIMENTS, __all__)

if TYPE_CHECKING:  # the same names, for type checkers and documentation tools
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
