"""``gcc-jax rates``: flags, sizes and rules of :mod:`gcc_jax.experiments.rates`."""

from .._checks import choice, count
from .._command import Command
from ._flags import Flags, at_least, flag, own, shared_sizes, within

__all__ = ["COMMAND", "DEFAULTS", "FUNCTION_NAMES", "TOY"]

FUNCTION_NAMES = ("xsinx", "vector_map")
"""Worker functions of the experiment (:data:`gcc_jax.experiments.rates.FUNCTIONS`)."""

DEFAULTS = dict(
    workers=(20, 40, 80, 160, 320, 640),
    num_inputs=10,
    stragglers=3,
    p=0.1,
    num_masks=200,
    functions=FUNCTION_NAMES,
    draws=5,
    cv_draws=5,
    cv_masks=64,
    noise=(0.0, 1e-3),
    lam_dec_grid=None,
    bootstrap=1000,
    solver="auto",
    search=dict(restarts=8, proposals=128, max_iters=25),
)
"""Full-size keyword arguments of :func:`~gcc_jax.experiments.rates.run_rates`."""
TOY = dict(
    workers=(12, 24),
    num_inputs=4,
    stragglers=2,
    num_masks=8,
    draws=2,
    cv_draws=1,
    cv_masks=4,
    noise=(0.0, 1e-2),
    functions=("xsinx",),
    lam_dec_grid=(0.0, 1e-6, 1e-2),
    bootstrap=100,
    search=dict(restarts=2, proposals=32, max_iters=6),
)
"""Toy sizes (``--toy``)."""


COMMAND = Command(
    name="rates",
    help="convergence rates of GCC vs BACC in N (worst case, iid, noisy workers)",
    description="Loss of GCC (λ_dec = 0 and λ_dec by cross-validation per N) and BACC versus "
    "the number of workers N (log-spaced), for x·sin(x) and a smooth map R²→R³, over several "
    "input draws: worst case at fixed S (local search), iid stragglers with probability p, and "
    "noisy workers (f + N(0, σ²)). Prints medians and means with bootstrap CIs, fitted log-log "
    "slopes over stated ranges and the chosen λ; writes rates.json, rates.txt and rates.png.",
    module="gcc_jax.experiments.rates",
    flags=Flags(
        DEFAULTS,
        TOY,
        own=(
            own(
                "--p",
                "iid straggling probability",
                check=within(0.0, 1.0, lo_open=True, hi_open=True),
            ),
            own("--draws", "evaluation input draws", check=at_least(2)),
            own("--cv-draws", "held-out input draws for GCC-cv's λ", check=count),
            own("--cv-masks", "patterns per held-out draw in the CV", check=count),
            own("--noise", "worker-noise levels σ", check=within(0.0)),
            own("--bootstrap", "bootstrap replicates", check=at_least(10)),
            own(
                "--solver",
                "spline solver",
                choices=("auto", "kalman", "banded", "parallel", "kernel"),
            ),
        ),
        help=dict(stragglers="worst-case S", num_masks="iid patterns per draw"),
        rules=(
            shared_sizes("num_inputs", "workers", "stragglers"),
            choice("functions", flag("functions"), FUNCTION_NAMES),
        ),
    ),
    float32_flag=True,
)
