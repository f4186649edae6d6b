"""``gcc-jax serve-sim``: flags, sizes and rules of :mod:`gcc_jax.experiments.serve_sim`."""

from .._checks import ConfigError, Rule, count, real
from .._command import Command
from ._flags import Flags, at_least, flag, one_of, own, within
from .serve import SERVING

__all__ = ["COMMAND", "DEFAULTS", "TOY"]

DEFAULTS = SERVING | dict(
    instances=12,
    ks=(2, 3, 4),
    loads=(0.2, 0.4, 0.6, 0.8),
    fractions=(0.02, 0.05, 0.1),
    slowdown=5.0,
    num_queries=100_000,
    num_seeds=5,
    validation_queries=1_000_000,
    accuracy_queries=2000,
    engine="heap",
)
"""Keyword defaults of :func:`~gcc_jax.experiments.serve_sim.run_serve_sim`."""
TOY = dict(
    ks=(2,),
    loads=(0.3, 0.7),
    fractions=(0.05,),
    num_queries=20_000,
    num_seeds=3,
    validation_queries=100_000,
    epochs=1,
    parm_epochs=1,
    accuracy_queries=200,
)
"""Toy sizes of ``gcc-jax serve-sim --toy``."""


def _instances_fit(cfg) -> None:
    m = cfg["instances"]
    for k in cfg["ks"]:
        if int(m) % int(k):
            raise ConfigError(
                "--instances", f"m = {m} must be a multiple of every k ({flag('ks')}); got k = {k}"
            )


COMMAND = Command(
    name="serve-sim",
    help="ParM's tail claim in a discrete-event model of a serving cluster (no Ray; minutes)",
    description="A discrete-event model of a prediction-serving cluster (gcc_jax.distributed."
    "simulate): m model instances behind one frontend queue, Poisson arrivals, shifted-"
    "exponential work, persistent background-load episodes per instance (on/off, many "
    "queries long), nothing cancelled. Serves uncoded (m instances), equal resources "
    "(m + m/k, one queue), replication, ParM (m base + m/k parity instances; its decoder "
    "from ParityModelCode) and GCC/BACC (N-S results or a deadline) over utilisation, "
    "background intensity and k, with several seeds. First checks the model against "
    "queueing theory (M/M/1, M/M/c by Erlang C, M/G/1 by Pollaczek-Khinchine; the table is "
    "in the record). Reports the p99.9-median gap ratio against equal resources with 95% "
    "CIs over seeds, where ParM's 3.5x is reached, accuracy (answers weighted by the "
    "accuracy of their source, measured with the real decoders on test queries), and ranks "
    "tails only among schemes that answered at least 99% of their queries. Writes "
    "serve_sim.json, serve_sim.txt and serve_sim.png into --out. The default takes about 2 "
    "minutes on one idle core once the classifier and its three parity models are trained "
    "(cached; a few minutes more the first time); --toy under a minute.",
    module="gcc_jax.experiments.serve_sim",
    flags=Flags(
        DEFAULTS,
        TOY,
        own=(
            own("--instances", "m base model instances, a multiple of every k", check=count),
            own(
                "--loads",
                "utilisations of the m base instances",
                check=within(0.0, 1.0, lo_open=True, hi_open=True),
            ),
            own("--fractions", "time under background load", check=within(0, 1, hi_open=True)),
            own("--seeds", "seeds per setting, for the CIs", key="num_seeds", check=at_least(2)),
            own("--validation-queries", "queries per queueing check", check=at_least(0)),
            own("--accuracy-queries", "test queries per accuracy; 0 = none", check=at_least(0)),
            own(
                "--engine",
                "heap, or simpy: the reference (serving extra; slow)",
                check=one_of(("heap", "simpy")),
            ),
        ),
        help=dict(
            num_queries="queries per scheme, setting and seed",
            shift_ms="a query's work: shift, ms",
            scale_ms="a query's work: scale of its random part, ms",
            tail="work tail: exponential or pareto",
            max_wait_ms="GCC/BACC: longest wait for a group's k queries, ms",
            dataset="the classifier's data set: digits, fashion_mnist, mnist, cifar10",
        ),
        rules=(
            real("episode_ms", flag("episode_ms"), 0.0, lo_open=True),
            count("num_queries", flag("num_queries"), 100),
            Rule(_instances_fit, ("--instances", flag("ks")), ("instances", "ks")),
        ),
    ),
    x64=None,
)
