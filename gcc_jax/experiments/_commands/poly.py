"""``gcc-jax poly``: flags, sizes and rules of :mod:`gcc_jax.experiments.poly`."""

from .._checks import ConfigError, Rule
from .._command import Command
from ._flags import Flags, own

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


def _settings(config: dict, toy: bool) -> dict:
    """``--n-low`` and ``--n-high`` into the ``settings`` they change."""
    n = [config.pop(key, None) for key in ("n_low", "n_high")]
    if n != [None, None]:
        config["settings"] = tuple(
            (deg, k, default if given is None else given)
            for (deg, k, default), given in zip(SETTINGS, n, strict=True)
        )
    return config


COMMAND = Command(
    name="poly",
    help="GCC vs BACC vs LCC on polynomial f (loss versus S)",
    description="LeTCC App. D: polynomial worker functions (deg 3 with K=5, deg 15 with "
    "K=10), loss versus the number of stragglers S for GCC, BACC and LCC over random "
    "straggler sets. Writes poly.json, poly.txt and poly.png.",
    module="gcc_jax.experiments.poly",
    flags=Flags(
        DEFAULTS,
        TOY,
        own=(
            own("--n-low", "N for deg 3, K=5 (default 20)", int, key="n_low"),
            own("--n-high", "N for deg 15, K=10 (default 40)", int, key="n_high"),
        ),
        help=dict(stragglers="S values (to N/2)", num_trials="random sets per S"),
        rules=(Rule(_check_settings, ("--n-low", "--n-high"), ("settings", "stragglers")),),
        finish=_settings,
    ),
)
