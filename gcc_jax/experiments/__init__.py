"""Paper-style experiments used by the `gcc-jax` command line."""

from .poly import format_poly_table as format_poly_table
from .poly import plot_poly as plot_poly
from .poly import run_poly as run_poly
from .poly import save_poly as save_poly
from .rates import fit_slope as fit_slope
from .rates import format_rates_table as format_rates_table
from .rates import plot_rates as plot_rates
from .rates import run_rates as run_rates
from .rates import save_rates as save_rates
