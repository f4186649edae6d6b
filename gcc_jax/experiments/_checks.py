"""Argument checks for every ``gcc-jax`` subcommand, run before any compute.

One table (:data:`RULES`) says, per subcommand, which setting comes from which flag and what its
valid range is; the *shared* rules — sizes ``2 ≤ K ≤ N``, stragglers ``0 ≤ S ≤ N − 2``, counts
``≥ 1``, probabilities, smoothing parameters ``λ ≥ 0`` — are the same functions for every
subcommand, so ``-K 30 -N 12`` is rejected identically by ``run``, ``demo``, ``rates`` and
``serve-bench``. The checks see the *effective* settings: the run function's defaults, then the
toy sizes, then the flags given explicitly. A violation raises :class:`ConfigError`, which the
command line reports as ``gcc-jax NAME: error: argument FLAG: ...`` with exit code 2 and the
subcommand's usage.
"""

import inspect
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RULES", "ConfigError", "check_config", "check_out", "effective_config"]


class ConfigError(ValueError):
    """An invalid setting, found before any compute. ``flag`` names the command-line flag."""

    def __init__(self, flag: str, message: str):
        self.flag = flag
        super().__init__(f"argument {flag}: {message}")


Rule = Callable[[Mapping[str, Any]], None]
"""A check of the effective settings; ``rule.flags`` lists the flags it names."""


def _named(rule, *flags: str):
    rule.flags = tuple(f for f in flags if f)
    return rule


def _values(value) -> list:
    return list(value) if isinstance(value, list | tuple) else [value]


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# -- rule builders (the shared rules) --------------------------------------------------------


def _each(
    key: str, flag: str, ok: Callable[[Any], bool], empty: str, bad: str, optional: bool
) -> Rule:
    """A rule: ``key`` (a value or a list) has at least one value and ``ok`` holds for each;
    else a :class:`ConfigError` on ``flag``: ``"needs at least one value {empty}"`` or
    ``"must be {bad}; got v"``. ``optional``: an absent (``None``) setting passes."""

    def rule(cfg):
        value = cfg.get(key)
        if value is None and optional:
            return
        values = _values(value)
        if not values:
            raise ConfigError(flag, f"needs at least one value {empty}")
        for v in values:
            if not ok(v):
                raise ConfigError(flag, f"must be {bad}; got {v!r}")

    return _named(rule, flag)


def count(key: str, flag: str, lo: int = 1, *, optional: bool = False) -> Rule:
    """Every value of ``key`` (an int or a list of ints) is an integer ``>= lo``."""
    return _each(
        key,
        flag,
        lambda v: _is_int(v) and v >= lo,
        f"(each an integer >= {lo})",
        f"an integer >= {lo}",
        optional,
    )


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
    left = "-inf" if lo is None else f"{lo:g}"
    right = "inf" if hi is None else f"{hi:g}"
    opening = "(" if lo_open or lo is None else "["
    closing = ")" if hi_open or hi is None else "]"
    interval = f"{opening}{left}, {right}{closing}"

    def ok(v) -> bool:
        return (
            isinstance(v, int | float)
            and not isinstance(v, bool)
            and math.isfinite(v)
            and (lo is None or (v > lo if lo_open else v >= lo))
            and (hi is None or (v < hi if hi_open else v <= hi))
        )

    return _each(key, flag, ok, f"in {interval}", f"a finite number in {interval}", optional)


def lam(key: str, flag: str, *, optional: bool = False) -> Rule:
    """A smoothing parameter (or a grid of them): finite and ``>= 0``."""
    return real(key, flag, 0.0, optional=optional)


def choice(key: str, flag: str, allowed: Sequence[str], *, case: bool = True) -> Rule:
    """Every value of ``key`` is one of ``allowed``."""

    def rule(cfg):
        value = cfg.get(key)
        if value is None:
            return
        names = allowed if case else [a.lower() for a in allowed]
        for v in _values(value):
            if (v if case else str(v).lower()) not in names:
                raise ConfigError(flag, f"unknown name {v!r}; choose from {', '.join(allowed)}")

    return _named(rule, flag)


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

    return _named(rule, *(x[1] for x in (k, n, s) if isinstance(x, tuple)))


def nested(key: str, rules: Sequence[Rule]) -> Rule:
    """Apply ``rules`` to the dict ``cfg[key]`` (e.g. the worst-case ``search`` settings)."""

    def rule(cfg):
        sub = cfg.get(key)
        if isinstance(sub, Mapping):
            for r in rules:
                r(sub)

    return _named(rule, *(f for r in rules for f in r.flags))


def _poly_settings(cfg):
    for deg, k, n in cfg.get("settings") or ():
        flag = "--n-low" if deg == 3 else "--n-high"
        if n < k:
            raise ConfigError(flag, f"N = {n} must be >= K = {k} (deg {deg}, K = {k}); got {n}")
        if n < 2:
            raise ConfigError(flag, f"must be >= 2; got {n}")
        for s in cfg.get("stragglers") or ():
            if not 0 <= s <= n - 2:
                raise ConfigError(flag, f"S = {s} needs N >= S + 2; got N = {n}")


_poly_settings.flags = ("--n-low", "--n-high")

_SEARCH = (
    count("restarts", "--restarts"),
    count("proposals", "--proposals"),
    count("max_iters", "--max-iters"),
)


def _rules() -> dict[str, tuple[Rule, ...]]:
    from .adversarial import DECODERS, STRATEGIES
    from .dnn import CODES
    from .rates import FUNCTIONS
    from .regimes import CODES as REGIME_CODES
    from .regimes import MODES
    from .regimes import WORKLOADS as REGIME_WORKLOADS
    from .serve import SCHEMES
    from .tune import REGIMES, WORKLOADS

    return {
        "run": (
            sizes(
                ("num_inputs", "--num-inputs/-K"),
                ("num_workers", "--num-workers/-N"),
                ("stragglers", "--stragglers/-S"),
            ),
            count("num_trials", "--trials"),
            count("num_batches", "--batches"),
            count("num_cv_batches", "--cv-batches"),
            count("epochs", "--epochs"),
            count("batch_size", "--batch-size"),
            count("worst_case_batches", "--worst-case-batches"),
            real("lr", "--lr", 0.0, lo_open=True),
            lam("lam_enc_grid", "--lam-enc-grid", optional=True),
            lam("lam_dec_grid", "--lam-dec-grid", optional=True),
            choice("codes", "--codes", CODES, case=False),
            nested("search", _SEARCH),
        ),
        "demo": (
            sizes(
                ("num_inputs", "--num-inputs/-K"),
                ("num_workers", "--num-workers/-N"),
                ("stragglers", "--stragglers/-S"),
            ),
            count("num_masks", "--masks/-M"),
            count("dim", "--dim"),
            lam("lam_enc", "--lam-enc"),
            lam("lam_dec", "--lam-dec"),
        ),
        "rates": (
            sizes(
                ("num_inputs", "--num-inputs/-K"),
                ("workers", "--workers/-N"),
                ("stragglers", "--stragglers/-S"),
            ),
            count("num_masks", "--masks/-M"),
            real("p", "--p", 0.0, 1.0, lo_open=True, hi_open=True),
            count("draws", "--draws", 2),
            count("cv_draws", "--cv-draws"),
            count("cv_masks", "--cv-masks"),
            count("bootstrap", "--bootstrap", 10),
            real("noise", "--noise", 0.0),
            lam("lam_dec_grid", "--lam-dec-grid", optional=True),
            choice("functions", "--functions", tuple(FUNCTIONS)),
            nested("search", _SEARCH),
        ),
        "regimes": (
            count("num_inputs", "--num-inputs/-K", 2),
            real("ratios", "--ratios", 1.0, lo_open=True),
            real("fractions", "--fractions", 0.0, 1.0, hi_open=True),
            choice("workloads", "--workloads", REGIME_WORKLOADS),
            choice("codes", "--codes", REGIME_CODES),
            choice("modes", "--modes", MODES),
            count("num_trials", "--trials"),
            count("num_batches", "--batches"),
            count("num_cv_batches", "--cv-batches"),
            count("worst_case_batches", "--worst-batches"),
            count("epochs", "--epochs"),
            count("parm_epochs", "--parm-epochs"),
            nested("search", _SEARCH),
        ),
        "poly": (count("num_trials", "--trials"), _poly_settings),
        "adversarial": (
            sizes(("num_inputs", "--num-inputs/-K"), ("workers", "--workers/-N")),
            sizes(("num_inputs", "--num-inputs/-K"), ("table_workers", "--table-workers")),
            real("exponents", "--exponents", 0.0, 1.0, hi_open=True),
            choice("functions", "--functions", ("xsinx", "cubic", "zero", "lenet5")),
            choice("table_functions", "--table-functions", ("xsinx", "cubic", "zero", "lenet5")),
            count("table_adversaries", "--table-adversaries", 0),
            count("trials", "--trials"),
            count("pgd_steps", "--pgd-steps"),
            count("lenet_epochs", "--lenet-epochs"),
            choice("decoders", "--decoders", DECODERS),
            choice("strategies", "--strategies", STRATEGIES),
            nested("search", (*_SEARCH, count("patience", "--patience"))),
        ),
        "serve-bench": (
            count("num_inputs", "--num-inputs"),
            count("groups", "--groups"),
            count("num_queries", "--queries"),
            real("rate", "--rate", 0.0, lo_open=True),
            count("epochs", "--epochs"),
            count("parm_epochs", "--parm-epochs"),
            real("shift_ms", "--shift-ms", 0.0),
            real("scale_ms", "--scale-ms", 0.0, lo_open=True),
            choice("tail", "--tail", ("exponential", "pareto")),
            real("straggle_prob", "--straggle-prob", 0.0, 1.0),
            real("slowdown", "--slowdown", 1.0),
            real("fail_prob", "--fail-prob", 0.0, 1.0, hi_open=True),
            lam("lam_dec", "--lam-dec"),
            choice("release", "--release", ("query", "batch")),
            real("deadline_ms", "--deadline-ms", 0.0, lo_open=True, optional=True),
            real("max_wait_ms", "--max-wait-ms", 0.0),
            real("timeout_s", "--timeout", 0.0, lo_open=True),
            count("max_in_flight", "--max-in-flight"),
            count("max_queue", "--max-queue"),
            real("max_seconds", "--max-seconds", 0.0, lo_open=True),
            choice("schemes", "--schemes", SCHEMES),
            sizes(
                ("sweep_inputs", "--sweep-inputs"),
                ("sweep_workers", "--sweep-workers"),
                ("sweep_stragglers", "--sweep-stragglers"),
            ),
            count("sweep_queries", "--sweep-queries", 0),
            real("sweep_deadlines_ms", "--sweep-deadlines-ms", 0.0, lo_open=True),
            count("num_cpus", "--num-cpus"),
        ),
        "compare-learned": (
            count("ks", "--ks/-k", 2),
            count("base_epochs", "--base-epochs", optional=True),
            count("code_epochs", "--code-epochs", optional=True),
            count("code_train_size", "--code-train-size", optional=True),
            count("eval_images", "--eval-images", 2, optional=True),
            count("learned_hidden", "--learned-hidden", optional=True),
            count("gcc_groups", "--gcc-groups", optional=True),
            count("gcc_trials", "--gcc-trials", optional=True),
            count("cv_images", "--cv-images", 2, optional=True),
            lam("lam_dec_grid", "--lam-dec-grid", optional=True),
        ),
        "tune": (
            choice("workloads", "--workloads", WORKLOADS),
            choice("regimes", "--regimes", REGIMES),
            count("steps", "--steps", 0, optional=True),
        ),
    }


RULES: dict[str, tuple[Rule, ...]] = {}
"""Subcommand → its rules (filled on first use: building it imports the experiments)."""


def _run_function(name: str, run: Callable) -> Callable:
    """The function whose keyword defaults apply (``serve-bench`` registers a lazy wrapper)."""
    if name == "serve-bench":
        from .serve import run_serve_bench

        return run_serve_bench
    return run


def effective_config(name: str, run: Callable, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` on top of ``run``'s keyword defaults: the settings the run will really use."""
    run = _run_function(name, run)
    try:
        params = inspect.signature(run).parameters.values()
    except (TypeError, ValueError):
        params = ()
    defaults = {
        p.name: p.default
        for p in params
        if p.default is not inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD
    }
    return defaults | dict(config)


def check_config(name: str, config: Mapping[str, Any], seed: int = 0) -> None:
    """Apply subcommand ``name``'s rules to its effective settings; raise :class:`ConfigError`."""
    if not RULES:
        RULES.update(_rules())
    if not _is_int(seed) or seed < 0:
        raise ConfigError("--seed", f"must be an integer >= 0; got {seed!r}")
    for rule in RULES.get(name, ()):
        rule(config)


def check_out(out: str | os.PathLike) -> Path:
    """Create the output folder ``out`` if needed and prove it is writable (a probe file).

    Raises:
        ConfigError: naming ``--out`` and why (not a folder, permission, read-only, ...).
    """
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gcc-jax-probe-"):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        raise ConfigError("--out", f"cannot write results to {str(out)!r}: {reason}") from None
    return path
