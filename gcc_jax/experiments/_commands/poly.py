"""``gcc-jax poly``: flags, sizes and rules of :mod:`gcc_jax.experiments.poly`."""

import argparse

from .._checks import ConfigError, Rule, count
from .._command import Command
from ._flags import add_settings, flag, settings_config

__all__ = ["CODES", "COMMAND", "DEFAULTS", "SETTINGS", "TOY"]

#: the paper's settings as (deg f, K, N); N is not given in the paper (see the module docstring)
SETTINGS = ((3, 5, 20), (15, 10, 40))
CODES = ("GCC", "BACC", "LCC")
DEFAULTS = dict(settings=SETTINGS, stragglers=None, num_trials=20)
"""Full-size keyword arguments of :func:`~gcc_jax.experiments.poly.run_poly`."""
TOY = dict(settings=((3, 5, 20),), stragglers=(0, 7, 9), num_trials=3)
"""Toy sizes (``--toy``)."""


def _check_settings(cfg):
    for deg, k, n in cfg.get("settings") or ():
        flag = "--n-low" if deg == 3 else "--n-high"
        if n < k:
            raise ConfigError(flag, f"N = {n} must be >= K = {k} (deg {deg}, K = {k}); got {n}")
        if n < 2:
            raise ConfigError(flag, f"must be >= 2; got {n}")
        for s in cfg.get("stragglers") or ():
            if not 0 <= s <= n - 2:
                raise ConfigError(flag, f"S = {s} needs N >= S + 2; got N = {n}")


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_settings(p, DEFAULTS, TOY, stragglers="S values (to N/2)", num_trials="random sets per S")
    p.add_argument("--n-low", type=int, help="N for deg 3, K=5 (default 20)")
    p.add_argument("--n-high", type=int, help="N for deg 15, K=10 (default 40)")


def _config(args: argparse.Namespace, toy: bool) -> dict:
    config = settings_config(args, DEFAULTS, TOY if toy else None)
    if args.n_low is not None or args.n_high is not None:
        n_low = 20 if args.n_low is None else args.n_low
        n_high = 40 if args.n_high is None else args.n_high
        config["settings"] = ((3, 5, n_low), (15, 10, n_high))
    return config


COMMAND = Command(
    name="poly",
    help="GCC vs BACC vs LCC on polynomial f (loss versus S)",
    description="LeTCC App. D: polynomial worker functions (deg 3 with K=5, deg 15 with "
    "K=10), loss versus the number of stragglers S for GCC, BACC and LCC over random "
    "straggler sets. Writes poly.json, poly.txt and poly.png.",
    add_arguments=_add_arguments,
    config=_config,
    module="gcc_jax.experiments.poly",
    defaults=DEFAULTS,
    rules=(
        count("num_trials", flag("num_trials")),
        Rule(_check_settings, ("--n-low", "--n-high"), ("settings", "stragglers")),
    ),
)
