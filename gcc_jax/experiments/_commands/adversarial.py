"""``gcc-jax adversarial``: flags, sizes and rules of :mod:`gcc_jax.experiments.adversarial`."""

from .._checks import choice, count, sizes
from .._command import Command
from ._flags import Flags, at_least, flag, one_of, own, shared_sizes, within

__all__ = [
    "COMMAND",
    "DECODERS",
    "DEFAULTS",
    "FULL",
    "FUNCTION_NAMES",
    "STRATEGIES",
    "TOY",
    "VALUE_STRATEGIES",
]

STRATEGIES = ("max", "sign_flip", "random", "bias", "pgd", "targeted")
VALUE_STRATEGIES = STRATEGIES[:5]
"""The strategies that set values only; the table also runs each at searched positions."""
DECODERS = ("gcc", "gcc-lam0", "huber", "tukey", "trim", "bacc", "approxifer", "lcc-ec")
FUNCTION_NAMES = ("xsinx", "cubic", "zero", "lenet5")
"""Worker functions of the rate experiment and the table."""

DEFAULTS = dict(
    workers=(20, 40, 80, 160, 320),
    exponents=(0.0, 0.25, 0.5),
    num_inputs=10,
    functions=("xsinx",),
    table_functions=("xsinx", "cubic"),
    table_workers=40,
    table_adversaries=3,
    trials=5,
    constants=(1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0),
    pgd_steps=40,
    search=dict(restarts=1, proposals=16, max_iters=2, patience=1),
    lenet_epochs=5,
    rate_positions="sample",
    decoders=DECODERS,
    strategies=STRATEGIES,
)
"""Keyword arguments of :func:`~gcc_jax.experiments.adversarial.run_adversarial` (the command
line's defaults): a reduced run. :data:`FULL` is the full-size one."""

FULL = dict(
    workers=(20, 28, 40, 56, 80, 113, 160, 226, 320, 453, 640, 905, 1280),
    functions=("xsinx", "lenet5"),
    table_workers=80,
    trials=10,
    search=dict(restarts=2, proposals=32, max_iters=4, patience=2),
)
"""The full-size settings (over :data:`DEFAULTS`; flags ``--workers 20,28,...,1280 --functions
xsinx,lenet5 --table-workers 80 --jobs 10 --restarts 2 --proposals 32 --max-iters 4
--patience 2``)."""

TOY = dict(
    workers=(12, 24),
    exponents=(0.0, 0.5),
    num_inputs=4,
    functions=("xsinx",),
    table_functions=("cubic",),
    table_workers=12,
    table_adversaries=1,
    trials=2,
    constants=(1e-3, 1e-1),
    pgd_steps=5,
    search=dict(restarts=1, proposals=4, max_iters=1, patience=1),
    lenet_epochs=1,
    rate_positions="sample",
    decoders=("gcc", "huber", "bacc", "lcc-ec"),
    strategies=("max", "pgd", "targeted"),
)
"""Toy sizes (``--toy``): the table's plain, robust, rational and error-correcting decoders
against the largest value, the gradient attack and the targeted one (each compiles anew)."""


COMMAND = Command(
    name="adversarial",
    help="Byzantine workers: the adversarial GCC rate experiment and decoder × adversary table",
    description="γ = N^a adversarial workers return anything within [-M, M]: the worst loss of "
    "GCC with the paper's λ_dec rule against N (slopes beside 6/5 (a − 1)), and a table of "
    "every decoder (GCC, robust Huber/Tukey/trimmed splines, BACC, ApproxIFER, LCC with error "
    "correction) against every adversary (largest value, sign flip, random, a bias on a block, "
    "and the gradient attack at the worst positions). Writes adversarial.json, adversarial.txt "
    "and adversarial.png. The defaults are a reduced run (N = 20 ... 320 for x·sin(x), the "
    "table at N = 40, 5 jobs per cell), most of its time the gradient attack on the robust "
    "decoders at searched positions; docs/cli.md gives the full-size run. Ctrl-C saves the "
    "finished rows (exit status 130).",
    module="gcc_jax.experiments.adversarial",
    flags=Flags(
        DEFAULTS,
        TOY,
        own=(
            own("--exponents", "a values, γ = ⌈N^a⌉", check=within(0.0, 1.0, hi_open=True)),
            own("--table-functions", "table jobs", check=one_of(FUNCTION_NAMES)),
            own("--table-workers", "N of the table"),
            own("--table-adversaries", "γ of the table", check=at_least(0)),
            own("--decoders", "table rows", check=one_of(DECODERS)),
            own("--strategies", "adversaries", check=one_of(STRATEGIES)),
            own("--jobs", "jobs per cell", key="trials", aliases=("--trials",), check=count),
            own("--pgd-steps", "gradient-attack steps", check=count),
            own("--lenet-epochs", "LeNet-5 training epochs, cached", check=count),
            own("--rate-positions", "pgd positions in the rates", choices=("sample", "search")),
        ),
        help=dict(functions="rate jobs: xsinx, cubic, zero, lenet5"),
        rules=(
            shared_sizes("num_inputs", "workers"),
            sizes(("num_inputs", flag("num_inputs")), ("table_workers", "--table-workers")),
            choice("functions", flag("functions"), FUNCTION_NAMES),
        ),
    ),
)
