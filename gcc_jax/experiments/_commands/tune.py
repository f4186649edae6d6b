"""``gcc-jax tune``: flags, sizes and rules of :mod:`gcc_jax.experiments.tune`."""

from .._checks import choice
from .._command import Command
from ._flags import Flags, at_least, flag, one_of, own

__all__ = ["COMMAND", "DEFAULTS", "REGIMES", "TOY_WORKLOADS", "WORKLOADS"]

REGIMES = ("worst", "iid")
WORKLOADS = ("xsinx", "vector_map", "lenet5")
TOY_WORKLOADS = ("xsinx",)
"""The workloads of ``gcc-jax tune --toy`` (each workload compiles every method anew)."""


DEFAULTS = dict(workloads=WORKLOADS, regimes=REGIMES, steps=None)
"""Keyword defaults of :func:`~gcc_jax.experiments.tune.run_tune` that the rules read."""


COMMAND = Command(
    name="tune",
    help="choose GCC's λs and nodes: defaults vs grid CV vs GCV vs gradient tuning",
    description="For x·sin(x), a smooth map R²→R³ and LeNet-5 on the digits, and for "
    "worst-case and iid stragglers: held-out loss of GCC with default λs, grid-CV λs, "
    "per-pattern GCV and CV choices of λ_dec, Adam-tuned λs and Adam-tuned λs and nodes "
    "(gcc_jax.tuning). Tuning sees training jobs only; evaluation uses held-out jobs and "
    "patterns. Writes tune.json, tune.txt and tune.png into --out. --toy runs x·sin(x) only "
    "(--workloads adds others, each compiling every method anew).",
    module="gcc_jax.experiments.tune",
    flags=Flags(
        DEFAULTS,
        dict(workloads=TOY_WORKLOADS),
        own=(
            own("--regimes", "straggler regimes", check=one_of(REGIMES)),
            own("--steps", "maximum tuning steps (500)", int, check=at_least(0, optional=True)),
        ),
        rules=(choice("workloads", flag("workloads"), WORKLOADS),),
        finish=lambda config, toy: config | dict(toy=toy),  # the toy run's own tuning budget
    ),
)
