"""``gcc-jax tune``: flags, sizes and rules of :mod:`gcc_jax.experiments.tune`."""

import argparse

from .._checks import choice, count
from .._command import Command, str_list

__all__ = ["COMMAND", "REGIMES", "TOY_WORKLOADS", "WORKLOADS"]

REGIMES = ("worst", "iid")
WORKLOADS = ("xsinx", "vector_map", "lenet5")
TOY_WORKLOADS = ("xsinx",)
"""The workloads of ``gcc-jax tune --toy`` (each workload compiles every method anew)."""


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workloads",
        type=str_list,
        help="comma-separated workloads (default xsinx,vector_map,lenet5; --toy: xsinx)",
    )
    p.add_argument("--regimes", type=str_list, default=REGIMES, help="worst,iid (default both)")
    p.add_argument("--steps", type=int, default=None, help="maximum tuning steps (500)")


def _config(args: argparse.Namespace, toy: bool) -> dict:
    workloads = args.workloads or (TOY_WORKLOADS if toy else WORKLOADS)  # explicit flags win
    return dict(workloads=workloads, regimes=args.regimes, toy=toy, steps=args.steps)


COMMAND = Command(
    name="tune",
    help="choose GCC's λs and nodes: defaults vs grid CV vs GCV vs gradient tuning",
    description="For x·sin(x), a smooth map R²→R³ and LeNet-5 on the digits, and for "
    "worst-case and iid stragglers: held-out loss of GCC with default λs, grid-CV λs, "
    "per-pattern GCV and CV choices of λ_dec, Adam-tuned λs and Adam-tuned λs and nodes "
    "(gcc_jax.tuning). Tuning sees training jobs only; evaluation uses held-out jobs and "
    "patterns. Writes tune.json, tune.txt and tune.png into --out. --toy runs x·sin(x) only "
    "(--workloads adds others, each compiling every method anew).",
    add_arguments=_add_arguments,
    config=_config,
    module="gcc_jax.experiments.tune",
    defaults=dict(workloads=WORKLOADS, regimes=REGIMES, steps=None),
    rules=(
        choice("workloads", "--workloads", WORKLOADS),
        choice("regimes", "--regimes", REGIMES),
        count("steps", "--steps", 0, optional=True),
    ),
)
