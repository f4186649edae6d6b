"""Argument checks for every ``gcc-jax`` subcommand, run before any compute (and before JAX).

Each subcommand lists its rules (:attr:`gcc_jax.experiments.Command.rules`): which setting comes
from which flag and what its valid range is. The rules are built from the library's scalar
checks (:mod:`gcc_jax._core.scalars`: integers, real numbers in an interval, names), and the
*shared* rules (sizes ``2 ≤ K ≤ N``, stragglers ``0 ≤ S ≤ N − 2``) are the same functions for
every subcommand, so ``-K 30 -N 12`` is rejected identically by ``run``, ``demo``, ``rates`` and
``serve-bench``. The checks see the *effective* settings: the run function's defaults
(:attr:`~gcc_jax.experiments.Command.defaults`), then the toy sizes, then the flags given
explicitly. A violation raises :class:`ConfigError`, which the command line reports as
``gcc-jax NAME: error: argument FLAG: ...`` with exit code 2 and the subcommand's usage.
"""

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._core.scalars import as_choice, as_int, as_real, interval

__all__ = [
    "ConfigError",
    "Rule",
    "check_config",
    "check_out",
    "choice",
    "count",
    "dataset",
    "effective_config",
    "lam",
    "nested",
    "real",
    "sizes",
]


class ConfigError(ValueError):
    """An invalid setting, found before any compute. ``flag`` names the command-line flag."""

    def __init__(self, flag: str, message: str):
        self.flag = flag
        super().__init__(f"argument {flag}: {message}")


class Rule:
    """A check of the effective settings (a mapping): ``rule(cfg)`` raises :class:`ConfigError`.

    ``flags`` lists the flags it names, ``keys`` the settings it reads.
    """

    def __init__(self, check: Callable[[Mapping[str, Any]], None], flags, keys):
        self.check = check
        self.flags = tuple(f for f in flags if f)
        self.keys = tuple(keys)

    def __call__(self, cfg: Mapping[str, Any]) -> None:
        self.check(cfg)


def _values(value) -> list:
    return list(value) if isinstance(value, list | tuple) else [value]


def _flag_error(flag: str, err: Exception) -> ConfigError:
    """The library's message (``"`name` must be ..."``) under the flag's name."""
    return ConfigError(flag, re.sub(r"^`[^`]*`:? ", "", str(err)))


def _each(key: str, flag: str, check: Callable[[Any], Any], empty: str, optional: bool) -> Rule:
    """A rule: ``key`` (a value or a list) has at least one value and ``check`` accepts each;
    else a :class:`ConfigError` on ``flag``. ``optional``: an absent (``None``) setting passes."""

    def rule(cfg):
        value = cfg.get(key)
        if value is None and optional:
            return
        values = _values(value)
        if not values:
            raise ConfigError(flag, f"needs at least one value {empty}")
        for v in values:
            try:
                check(v)
            except (TypeError, ValueError) as err:
                raise _flag_error(flag, err) from None

    return Rule(rule, (flag,), (key,))


# -- rule builders (the shared rules) --------------------------------------------------------


def count(key: str, flag: str, lo: int = 1, *, optional: bool = False) -> Rule:
    """Every value of ``key`` (an int or a list of ints) is an integer ``>= lo``."""
    return _each(key, flag, lambda v: as_int(v, key, lo), f"(each an integer >= {lo})", optional)


def real(
    key: str,
    flag: str,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    optional: bool = False,
) -> Rule:
    """Every value of ``key`` is a finite number in the given (half-)open interval."""
    rng = interval(lo, hi, lo_open=lo_open, hi_open=hi_open)
    return _each(
        key,
        flag,
        lambda v: as_real(v, key, lo, hi, lo_open=lo_open, hi_open=hi_open),
        f"in {rng}",
        optional,
    )


def lam(key: str, flag: str, *, optional: bool = False) -> Rule:
    """A smoothing parameter (or a grid of them): finite and ``>= 0``."""
    return real(key, flag, 0.0, optional=optional)


def choice(key: str, flag: str, allowed: Sequence[str], *, case: bool = True) -> Rule:
    """Every value of ``key`` is one of ``allowed``."""

    def rule(cfg):
        value = cfg.get(key)
        if value is None:
            return
        for v in _values(value):
            try:
                as_choice(v, key, allowed, case=case)
            except ValueError as err:
                raise _flag_error(flag, err) from None

    return Rule(rule, (flag,), (key,))


def sizes(
    k: tuple[str, str] | int,
    n: tuple[str, str],
    s: tuple[str, str] | None = None,
    *,
    min_k: int = 2,
) -> Rule:
    """The shared size rules: ``K >= min_k``, ``N >= 2``, ``K <= N``, ``0 <= S <= N − 2``.

    ``k``/``n``/``s`` are ``(config key, flag)`` pairs (``k`` may be a fixed int); ``N`` and
    ``S`` may be lists (every combination is checked against the smallest ``N``).
    """

    def rule(cfg):
        if isinstance(k, int):
            k_val, k_flag = k, None
        else:
            k_val, k_flag = cfg.get(k[0]), k[1]
            count(k[0], k_flag, min_k)(cfg)
        count(n[0], n[1], 2)(cfg)
        n_min = min(_values(cfg[n[0]]))
        if k_val > n_min:
            if k_flag is None:
                raise ConfigError(
                    n[1], f"must be >= K = {k_val} (N workers for K inputs); got {n_min}"
                )
            raise ConfigError(
                k_flag,
                f"K = {k_val} must be <= N = {n_min} ({n[1]}): valid range {min_k} <= K <= N",
            )
        if s is not None and cfg.get(s[0]) is not None:
            count(s[0], s[1], 0)(cfg)
            for v in _values(cfg[s[0]]):
                if v > n_min - 2:
                    raise ConfigError(
                        s[1],
                        f"S = {v} stragglers leaves fewer than 2 of N = {n_min} workers ({n[1]}); "
                        f"valid range 0 <= S <= N - 2 = {n_min - 2}",
                    )

    pairs = [x for x in (k, n, s) if isinstance(x, tuple)]
    return Rule(rule, (x[1] for x in pairs), (x[0] for x in pairs))


def nested(key: str, rules: Sequence[Rule]) -> Rule:
    """Apply ``rules`` to the dict ``cfg[key]`` (e.g. the worst-case ``search`` settings)."""

    def rule(cfg):
        sub = cfg.get(key)
        if isinstance(sub, Mapping):
            for r in rules:
                r(sub)

    return Rule(rule, (f for r in rules for f in r.flags), (key,))


def dataset(
    key: str = "dataset",
    flag: str = "--dataset",
    path_key: str = "data_path",
    path_flag: str = "--data-path",
) -> Rule:
    """The data set ``cfg[key]`` is a known name and its files are found (under
    ``cfg[path_key]``): the check loads it (:func:`gcc_jax.nn.data.load_dataset`, no JAX), so
    a missing or corrupt data set that was asked for stops the command before any compute,
    naming the flags. scikit-learn's digits (shipped with the package) is not loaded."""

    def rule(cfg):
        name = cfg.get(key)
        if not isinstance(name, str):
            return  # None: the run's own default (e.g. a fallback it states)
        from ..nn.data import DatasetError, load_dataset

        if name.lower() == "digits":
            return
        try:
            load_dataset(name, cfg.get(path_key))
        except ValueError as err:  # an unknown name
            if isinstance(err, DatasetError):
                raise ConfigError(flag, str(err).replace("`path`", path_flag)) from None
            raise _flag_error(flag, err) from None
        except DatasetError as err:  # files missing
            raise ConfigError(flag, str(err).replace("`path`", path_flag)) from None

    return Rule(rule, (flag, path_flag), (key, path_key))


def effective_config(command, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` on top of the run function's keyword defaults (``command.defaults``): the
    settings the run will really use."""
    return dict(command.defaults) | dict(config)


def check_config(command, config: Mapping[str, Any], seed: int = 0) -> None:
    """Apply ``command``'s rules to its effective settings; raise :class:`ConfigError`."""
    try:
        as_int(seed, "seed", 0)
    except (TypeError, ValueError) as err:
        raise _flag_error("--seed", err) from None
    for rule in command.rules:
        rule(config)


def check_out(out: str | os.PathLike) -> Path:
    """Prove that the output folder ``out`` can be created and written (a probe file), and
    leave nothing behind: folders made for the probe are removed again (the run's ``save``
    creates them), so a run stopped by a later error leaves no empty ``--out``.

    Raises:
        ConfigError: naming ``--out`` and why (not a folder, permission, read-only, ...).
    """
    path = Path(out)
    made = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gcc-jax-probe-"):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        raise ConfigError("--out", f"cannot write results to {str(out)!r}: {reason}") from None
    finally:
        for folder in made:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
    return path
