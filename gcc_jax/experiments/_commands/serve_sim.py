"""``gcc-jax serve-sim``: flags, sizes and rules of :mod:`gcc_jax.experiments.serve_sim`."""

import argparse

from .._checks import ConfigError, Rule, choice, count, lam, real
from .._command import Command, explicit, float_list, int_list, merge_config, str_list
from .serve import SCHEMES, add_flags

__all__ = ["COMMAND", "DEFAULTS", "TOY"]

DEFAULTS = dict(
    instances=12,
    ks=(2, 3, 4),
    loads=(0.2, 0.4, 0.6, 0.8),
    fractions=(0.02, 0.05, 0.1),
    slowdown=5.0,
    episode_ms=500.0,
    shift_ms=4.0,
    scale_ms=2.0,
    tail="exponential",
    num_queries=100_000,
    num_seeds=5,
    schemes=SCHEMES,
    deadline_ms=25.0,
    max_wait_ms=5.0,
    validation_queries=1_000_000,
    model="mlp",
    dataset="digits",
    epochs=10,
    parm_epochs=20,
    lam_dec=1e-6,
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

_FLAGS = (
    # (flag, keyword, type, help)
    ("--instances", "instances", int, "m base model instances, a multiple of every k (12)"),
    ("--slowdown", "slowdown", float, "how much slower an instance works in an episode (5)"),
    ("--episode-ms", "episode_ms", float, "mean background-episode length, ms (500)"),
    ("--shift-ms", "shift_ms", float, "a query's work: shift, ms (4)"),
    ("--scale-ms", "scale_ms", float, "a query's work: scale of its random part, ms (2)"),
    ("--tail", "tail", str, "exponential (default) or pareto work tail"),
    ("--queries", "num_queries", int, "queries per scheme, setting and seed (100000)"),
    ("--seeds", "num_seeds", int, "seeds per setting, for the CIs (5)"),
    ("--deadline-ms", "deadline_ms", float, "GCC/BACC: N-S results or this deadline (25)"),
    ("--max-wait-ms", "max_wait_ms", float, "GCC/BACC: longest wait for a group's k queries (5)"),
    ("--validation-queries", "validation_queries", int, "queries per queueing check (1e6)"),
    ("--model", "model", str, "classifier for the accuracies: mlp (default), lenet5, ..."),
    ("--dataset", "dataset", str, "its data set: digits (default), fashion_mnist, ..."),
    ("--data-path", "data_path", str, "directory of the data files"),
    ("--epochs", "epochs", int, "classifier training epochs (10; cached)"),
    ("--parm-epochs", "parm_epochs", int, "ParM parity-model epochs (20; cached)"),
    ("--lam-dec", "lam_dec", float, "GCC decoder smoothing (1e-6)"),
    ("--accuracy-queries", "accuracy_queries", int, "test queries per accuracy (2000; 0 = none)"),
    ("--engine", "engine", str, "heap (default) or simpy (the reference; serving extra; slow)"),
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, _FLAGS)
    for flag, dest, kind, text in (
        ("--ks", "ks", int_list, "coding group sizes k (2,3,4)"),
        ("--loads", "loads", float_list, "utilisations of the m base instances (0.2,0.4,0.6,0.8)"),
        ("--fractions", "fractions", float_list, "time under background load (0.02,0.05,0.1)"),
        ("--schemes", "schemes", str_list, f"comma-separated, from {','.join(SCHEMES)} (all)"),
    ):  # fmt: skip
        parser.add_argument(flag, dest=dest, type=kind, default=None, help=text)


def _config(args: argparse.Namespace, toy: bool) -> dict:
    keys = [dest for _, dest, _, _ in _FLAGS] + ["ks", "loads", "fractions", "schemes"]
    return merge_config({}, TOY if toy else None, explicit(args, *keys))


def _instances_fit(cfg) -> None:
    m = cfg["instances"]
    for k in cfg["ks"]:
        if int(m) % int(k):
            raise ConfigError(
                "--instances", f"m = {m} must be a multiple of every k (--ks); got k = {k}"
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
    add_arguments=_add_arguments,
    config=_config,
    module="gcc_jax.experiments.serve_sim",
    defaults=DEFAULTS,
    rules=(
        count("instances", "--instances"),
        count("ks", "--ks", 2),
        real("loads", "--loads", 0.0, 1.0, lo_open=True, hi_open=True),
        real("fractions", "--fractions", 0.0, 1.0, hi_open=True),
        real("slowdown", "--slowdown", 1.0),
        real("episode_ms", "--episode-ms", 0.0, lo_open=True),
        real("shift_ms", "--shift-ms", 0.0),
        real("scale_ms", "--scale-ms", 0.0, lo_open=True),
        choice("tail", "--tail", ("exponential", "pareto")),
        count("num_queries", "--queries", 100),
        count("num_seeds", "--seeds", 2),
        choice("schemes", "--schemes", SCHEMES),
        real("deadline_ms", "--deadline-ms", 0.0, lo_open=True, optional=True),
        real("max_wait_ms", "--max-wait-ms", 0.0),
        count("validation_queries", "--validation-queries", 0),
        count("epochs", "--epochs"),
        count("parm_epochs", "--parm-epochs"),
        lam("lam_dec", "--lam-dec"),
        count("accuracy_queries", "--accuracy-queries", 0),
        choice("engine", "--engine", ("heap", "simpy")),
        Rule(_instances_fit, ("--instances", "--ks"), ("instances", "ks")),
    ),
    x64=None,
)
