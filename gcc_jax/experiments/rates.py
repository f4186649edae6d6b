"""Convergence rates of GCC and BACC in the number of workers ``N`` (the papers' theorems).

For a fixed worker function and ``K`` fixed inputs, the loss
``L = (1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` is measured as ``N`` grows (log-spaced) in two straggler
regimes:

* **worst case** with a fixed number ``S`` of stragglers: the loss of the worst pattern found by
  :func:`gcc_jax.worst_case_mask` (exact for small ``C(N, S)``, a lower bound otherwise);
* **probabilistic**: every worker straggles independently with probability ``p``; the mean loss
  over ``M`` random patterns (patterns a code cannot decode are counted apart, see ``failed``).

Theory (LeTCC Thm 4 and the probabilistic-regime paper; see the method notes §1.8):
GCC ``O(S³ N⁻³)`` in the worst case and ``O(log³_{1/p}(N) N⁻³)`` with independent stragglers;
the bound quoted for BACC is weaker, ``O(S⁴ N⁻²)`` (and ``O(log⁴_{1/p}(N) N⁻²)``). Fitted
log-log slopes are reported next to these exponents.

λ rule for GCC (documented choice): ``λ_enc = 0`` — the natural interpolating encoder, so
``u_enc(alpha_k) = x_k`` and the encoder term of the bound vanishes (App. B.5) — and
``λ_dec = 0``, the noiseless optimum (App. B.1: the bound increases with ``λ_d``). Both can be
overridden (``lam_enc``, ``lam_dec``).

Functions: the papers' ``x·sin(x)`` (scalar inputs ``x_k ~ U(−3, 3)``) and a smooth vector map
ℝ² → ℝ³ (:func:`vector_map`, inputs ``x_k ~ U(−1, 1)²``), inputs drawn once from the seed.
"""

import argparse
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._evaluator import MaskEvaluator
from .._pipeline import outputs_and_targets
from .._stragglers import sample_masks
from .._types import Array, Float
from .._worst_case import search_worst_case
from ..codes import BerrutCode, SplineCode
from ._command import Command, int_list, merge_config, str_list
from ._io import ExperimentResult, new_figure, save_result

__all__ = [
    "COMMAND",
    "DEFAULTS",
    "TOY",
    "FUNCTIONS",
    "xsinx",
    "vector_map",
    "run_rates",
    "format_rates_table",
    "plot_rates",
    "save_rates",
    "fit_slope",
]


def xsinx(x: Float[Array, " 1"]) -> Float[Array, " 1"]:
    """The papers' test function ``f(x) = x · sin(x)`` (one scalar input, one output)."""
    return x * jnp.sin(x)


def vector_map(x: Float[Array, " 2"]) -> Float[Array, " 3"]:
    """A smooth map ℝ² → ℝ³: ``[sin(2x₀)·cos(x₁), x₀·x₁, exp(−‖x‖²/2)]``."""
    return jnp.stack(
        [jnp.sin(2.0 * x[0]) * jnp.cos(x[1]), x[0] * x[1], jnp.exp(-0.5 * jnp.sum(x * x))]
    )


#: name → (worker function, input dimension, input half-range)
FUNCTIONS: dict[str, tuple[Callable, int, float]] = {
    "xsinx": (xsinx, 1, 3.0),
    "vector_map": (vector_map, 2, 1.0),
}

CODES = ("GCC", "BACC")
#: theory exponents of N and of the straggler term (S, or log_{1/p} N), per code and regime
THEORY = {
    ("GCC", "worst"): (-3.0, 3.0),
    ("GCC", "iid"): (-3.0, 3.0),
    ("BACC", "worst"): (-2.0, 4.0),
    ("BACC", "iid"): (-2.0, 4.0),
}


DEFAULTS = dict(
    workers=(20, 40, 80, 160, 320, 640),
    num_inputs=10,
    stragglers=3,
    num_masks=200,
    search=dict(restarts=8, proposals=128, max_iters=25),
)
"""Full-size keyword arguments of :func:`run_rates` (the command line's defaults)."""
TOY = dict(
    workers=(12, 24),
    num_inputs=4,
    stragglers=2,
    num_masks=16,
    search=dict(restarts=2, proposals=16, max_iters=3),
)
"""Toy sizes (``--toy``)."""

METRICS = {
    "loss": "(1/K) Σ_k ‖f^(x_k) − f(x_k)‖² for one straggler pattern",
    "worst": "loss of the worst pattern of S stragglers found by gcc_jax.worst_case_mask "
    "(exact when exhaustive, else a lower bound from local search)",
    "iid": "mean loss over M patterns, each worker straggling independently with probability p "
    "(patterns a code cannot decode are left out and counted in `failed`); ci95 = 1.96 std/√M",
    "slope": "least-squares slope b of log L = a + b log N over all N (slope_upper_half: over "
    "the upper half of the log-range of N)",
    "ratio": "GCC loss / BACC loss at the largest N",
}


def _make_code(name: str, k: int, n: int, lam_enc: float, lam_dec: float, solver: str):
    if name == "BACC":
        return BerrutCode.chebyshev(num_inputs=k, num_workers=n)
    return SplineCode.chebyshev(
        num_inputs=k, num_workers=n, lam_enc=lam_enc, lam_dec=lam_dec, solver=solver
    )


def pick_solver(solver: str) -> str:
    """``"auto"``: the O(N) Kalman solver when this SplineCode has it, else the kernel form."""
    if solver != "auto":
        return solver
    try:
        SplineCode.chebyshev(num_inputs=2, num_workers=4, solver="kalman")
    except (ValueError, TypeError):
        return "kernel"
    return "kalman"


def fit_slope(n: Sequence[float], loss: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit ``log L = a + b log N``; returns ``(b, a)`` (NaN if < 2 usable points)."""
    n = np.asarray(n, float)
    loss = np.asarray(loss, float)
    ok = np.isfinite(loss) & (loss > 0)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    b, a = np.polyfit(np.log(n[ok]), np.log(loss[ok]), 1)
    return float(b), float(a)


def _theory_curve(code: str, regime: str, n: np.ndarray, s: int, p: float) -> np.ndarray:
    """The theory's rate without its constant: ``S^a N^b`` or ``log_{1/p}(N)^a N^b``."""
    b, a = THEORY[(code, regime)]
    if regime == "worst":
        return float(max(s, 1)) ** a * n**b
    return (np.log(n) / np.log(1.0 / p)) ** a * n**b


def run_rates(
    *,
    workers: Sequence[int] = (20, 40, 80, 160, 320, 640),
    num_inputs: int = 10,
    stragglers: int = 3,
    p: float = 0.1,
    num_masks: int = 200,
    functions: Sequence[str] = ("xsinx", "vector_map"),
    lam_enc: float = 0.0,
    lam_dec: float = 0.0,
    solver: str = "auto",
    search: dict | None = None,
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """Measure GCC and BACC losses versus ``N`` (worst case at fixed ``S``, and iid ``p``).

    Args:
        workers: the ``N`` values (log-spaced; every ``N > stragglers + 1``).
        num_inputs: ``K``.
        stragglers: ``S`` for the worst-case regime.
        p: straggling probability for the probabilistic regime.
        num_masks: random patterns ``M`` per ``N`` in the probabilistic regime.
        functions: names from :data:`FUNCTIONS`.
        lam_enc, lam_dec: GCC's smoothing parameters (the λ rule; default 0 and 0).
        solver: SplineCode solver, ``"auto"`` = Kalman when available, else ``"kernel"``.
        search: keyword arguments for :func:`gcc_jax.worst_case_mask` (defaults below).
        seed: seeds the inputs, the random patterns and the search.
        progress: print one line per measurement.

    Returns:
        An :class:`ExperimentResult` whose ``results`` hold ``rows`` (one per function, regime,
        code and ``N``), ``fits`` (slope per function, regime and code), ``ratios`` (GCC/BACC at
        the largest ``N``) and ``search_check`` (heuristic vs exhaustive worst case).
    """
    t_start = time.perf_counter()
    workers = tuple(int(n) for n in workers)
    if len(workers) < 2 or any(n < stragglers + 2 for n in workers):
        raise ValueError(f"`workers` needs >= 2 values, each >= S + 2 = {stragglers + 2}")
    for name in functions:
        if name not in FUNCTIONS:
            raise ValueError(f"unknown function {name!r}; choose from {sorted(FUNCTIONS)}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"`p` must be in (0, 1); got {p}")
    if not jax.config.jax_enable_x64:
        warnings.warn(
            "run_rates in float32: losses below ~1e-10 are round-off; enable x64 "
            '(jax.config.update("jax_enable_x64", True)) for the rates',
            stacklevel=2,
        )
    solver = pick_solver(solver)
    search = dict(
        max_exhaustive=10_000, restarts=8, proposals=128, max_iters=25, patience=3
    ) | dict(search or {})
    chunk_size = 128
    key = jax.random.key(seed)
    rows = []
    for fi, fname in enumerate(functions):
        f, dim, half = FUNCTIONS[fname]
        kx = jax.random.fold_in(key, fi)
        x = jax.random.uniform(kx, (num_inputs, dim), minval=-half, maxval=half)
        for ni, n in enumerate(workers):
            km = jax.random.fold_in(jax.random.fold_in(kx, 1), ni)
            iid_masks = sample_masks(km, n, num=num_masks, p=p)
            for code_name in CODES:
                code = _make_code(code_name, num_inputs, n, lam_enc, lam_dec, solver)
                # One compiled decoder per (code, N, f), shared by the search and the iid masks.
                t0 = time.perf_counter()
                yt, fx = outputs_and_targets(code, f, x)
                ev = MaskEvaluator(code, yt, fx, chunk_size=chunk_size)
                skey = jax.random.fold_in(km, 7)
                wc = search_worst_case(ev, n, stragglers, key=skey, **search)
                worst_seconds = time.perf_counter() - t0
                check = {}
                if wc.exhaustive:  # how close the heuristic gets to the exact worst case
                    heur = search_worst_case(
                        ev, n, stragglers, key=skey, **(search | dict(max_exhaustive=0))
                    )
                    check = dict(
                        heuristic_loss=float(heur.loss), heuristic_ratio=heur.loss / wc.loss
                    )
                t1 = time.perf_counter()
                iid_loss, iid_status = ev(np.asarray(iid_masks))
                iid_seconds = time.perf_counter() - t1
                ok = iid_status == 0
                common = dict(function=fname, code=code_name, N=n, K=num_inputs)
                rows.append(
                    common
                    | dict(
                        regime="worst",
                        S=stragglers,
                        loss=float(wc.loss),
                        exhaustive=bool(wc.exhaustive),
                        evaluated=int(wc.num_evaluated),
                        dead=np.flatnonzero(~wc.mask).tolist(),
                        seconds=worst_seconds,
                    )
                    | check
                )
                mean = float(np.mean(iid_loss[ok])) if ok.any() else float("nan")
                sem = float(np.std(iid_loss[ok]) / math.sqrt(max(ok.sum(), 1)))
                rows.append(
                    common
                    | dict(
                        regime="iid",
                        p=p,
                        loss=mean,
                        ci95=1.96 * sem,
                        masks=num_masks,
                        failed=int((~ok).sum()),
                        seconds=iid_seconds,
                    )
                )
                if progress:
                    print(
                        f"{fname:>10} N={n:>5} {code_name:>4}: worst(S={stragglers}) "
                        f"{wc.loss:.3e} [{'exact' if wc.exhaustive else 'search'}, "
                        f"{worst_seconds:.1f}s]  iid(p={p}) {mean:.3e} [{iid_seconds:.1f}s]",
                        flush=True,
                    )
    config = dict(
        num_inputs=num_inputs,
        workers=list(workers),
        stragglers=stragglers,
        p=p,
        num_masks=num_masks,
        functions=list(functions),
        lam_enc=lam_enc,
        lam_dec=lam_dec,
        solver=solver,
        search=search,
        dtype=str(jnp.zeros(()).dtype),
    )
    fits, ratios = _summarise(rows, config["functions"])
    checked = [r for r in rows if "heuristic_ratio" in r]
    heuristic = [r["heuristic_ratio"] for r in checked]
    search_check = dict(
        cases=len(checked),
        equal=int(sum(q >= 1.0 - 1e-9 for q in heuristic)),
        min_ratio=float(min(heuristic)) if heuristic else float("nan"),
    )
    return ExperimentResult(
        "rates",
        config,
        {"seed": int(seed)},
        METRICS,
        dict(rows=rows, fits=fits, ratios=ratios, search_check=search_check),
        {"total": time.perf_counter() - t_start},
    )


def _series(rows: list[dict], fname: str, regime: str, code: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [
        r for r in rows if r["function"] == fname and r["regime"] == regime and r["code"] == code
    ]
    rows.sort(key=lambda r: r["N"])
    return np.array([r["N"] for r in rows], float), np.array([r["loss"] for r in rows], float)


def _summarise(rows: list[dict], functions: Sequence[str]) -> tuple[list[dict], list[dict]]:
    fits, ratios = [], []
    for fname in functions:
        for regime in ("worst", "iid"):
            for code in CODES:
                n, loss = _series(rows, fname, regime, code)
                slope, _ = fit_slope(n, loss)
                half = n >= np.sqrt(n.min() * n.max())  # the upper half of the log-range
                tail, _ = fit_slope(n[half], loss[half])
                fits.append(
                    dict(
                        function=fname,
                        regime=regime,
                        code=code,
                        slope=slope,
                        slope_upper_half=tail,
                        theory_slope=THEORY[(code, regime)][0],
                    )
                )
            n, gcc_loss = _series(rows, fname, regime, "GCC")
            _, bacc_loss = _series(rows, fname, regime, "BACC")
            ratios.append(
                dict(
                    function=fname,
                    regime=regime,
                    N=int(n[-1]),
                    gcc=float(gcc_loss[-1]),
                    bacc=float(bacc_loss[-1]),
                    ratio=float(gcc_loss[-1] / bacc_loss[-1]),
                )
            )
    return fits, ratios


def format_rates_table(result: ExperimentResult) -> str:
    """Plain-text tables of a :func:`run_rates` result: losses per ``N``, slopes and ratios."""
    cfg, res = result.config, result.results
    rows = res["rows"]
    s, p = cfg["stragglers"], cfg["p"]
    lines = [
        f"Rates: K={cfg['num_inputs']}, worst case S={s}, iid p={p} "
        f"({cfg['num_masks']} patterns), GCC lam_enc={cfg['lam_enc']:g} "
        f"lam_dec={cfg['lam_dec']:g} ({cfg['solver']}), {cfg['dtype']}"
    ]
    for fname in cfg["functions"]:
        lines.append(f"\n{fname}")
        lines.append(
            f"{'N':>6} {'GCC worst':>11} {'BACC worst':>11} {'GCC iid':>11} {'BACC iid':>11}"
        )
        cols = [
            _series(rows, fname, regime, code)[1] for regime in ("worst", "iid") for code in CODES
        ]
        n, _ = _series(rows, fname, "worst", "GCC")
        for i, ni in enumerate(n):
            lines.append(f"{int(ni):>6} " + " ".join(f"{c[i]:>11.3e}" for c in cols))
    lines.append("\nfitted log-log slopes in N (all N / upper half of the range; theory)")
    for fit in res["fits"]:
        lines.append(
            f"  {fit['function']:>10} {fit['regime']:>5} {fit['code']:>4}: "
            f"{fit['slope']:6.2f} / {fit['slope_upper_half']:6.2f}  "
            f"(theory {fit['theory_slope']:g})"
        )
    chk = res.get("search_check", {})
    if chk.get("cases"):
        lines.append(
            f"worst-case search vs exhaustive (where C(N,S) is small): {chk['equal']} of "
            f"{chk['cases']} equal, worst ratio {chk['min_ratio']:.4g}"
        )
    lines.append("GCC/BACC loss ratio at the largest N")
    for r in res["ratios"]:
        lines.append(
            f"  {r['function']:>10} {r['regime']:>5} N={r['N']}: {r['ratio']:.3g} "
            f"({r['gcc']:.3e} vs {r['bacc']:.3e})"
        )
    return "\n".join(lines)


def plot_rates(result: ExperimentResult):
    """Log-log figure of loss versus ``N`` with the theory lines; one panel per function and regime.

    Theory lines: GCC ``S³N⁻³`` (worst) and ``log³_{1/p}(N) N⁻³`` (iid), BACC ``S⁴N⁻²`` and
    ``log⁴_{1/p}(N) N⁻²``, each anchored at the code's loss at the smallest ``N``: only their
    *slopes* are theory (a measured curve falling below its line decays faster than the bound).
    """
    cfg, rows = result.config, result.results["rows"]
    funcs = cfg["functions"]
    fig, axes = new_figure(len(funcs), 2, figsize=(10, 4 * len(funcs)), squeeze=False)
    colors = {"GCC": "C0", "BACC": "C3"}
    for i, fname in enumerate(funcs):
        for j, regime in enumerate(("worst", "iid")):
            ax = axes[i, j]
            for code in CODES:
                n, loss = _series(rows, fname, regime, code)
                loss = np.array([np.nan if v is None else v for v in loss], float)
                ok = np.isfinite(loss) & (loss > 0)
                slope, _ = fit_slope(n, loss)
                ax.loglog(
                    n[ok], loss[ok], "o-", color=colors[code], label=f"{code} (slope {slope:.2f})"
                )
                shape = _theory_curve(code, regime, n, cfg["stragglers"], cfg["p"])
                if ok.any():
                    first = np.flatnonzero(ok)[0]
                    c = loss[first] / shape[first]  # anchored at the smallest N
                    b, a = THEORY[(code, regime)]
                    term = "S" if regime == "worst" else r"(\log_{1/p} N)"
                    ax.loglog(
                        n,
                        c * shape,
                        "--",
                        color=colors[code],
                        alpha=0.6,
                        label=f"theory ${term}^{{{a:g}}} N^{{{b:g}}}$",
                    )
            ax.set_xticks(n, [str(int(v)) for v in n])
            ax.minorticks_off()
            title = (
                f"worst case, S={cfg['stragglers']}" if regime == "worst" else f"iid p={cfg['p']}"
            )
            ax.set_title(f"{fname}: {title}")
            ax.set_xlabel("N (workers)")
            ax.set_ylabel("loss (1/K) Σ‖f^ − f‖²")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_rates(result: ExperimentResult, out: str | Path) -> dict[str, Path]:
    """Write ``rates.json``, ``rates.txt`` and ``rates.png`` into the folder ``out``."""
    paths = save_result(
        result, out, summary=format_rates_table(result), figures={"rates": plot_rates(result)}
    )
    paths["plot"] = paths.pop("rates")
    return paths


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workers", "-N", type=int_list, help="comma-separated N values (default 20,40,...,640)"
    )
    p.add_argument("--num-inputs", "-K", type=int, help="K (default 10)")
    p.add_argument("--stragglers", "-S", type=int, help="worst-case S (default 3)")
    p.add_argument("--p", type=float, default=0.1, help="iid straggling probability (0.1)")
    p.add_argument("--masks", "-M", type=int, help="iid patterns per N (200)")
    p.add_argument(
        "--functions",
        type=str_list,
        default=("xsinx", "vector_map"),
        help="comma-separated worker functions (default xsinx,vector_map)",
    )
    p.add_argument("--lam-enc", type=float, default=0.0, help="GCC encoder smoothing (0)")
    p.add_argument("--lam-dec", type=float, default=0.0, help="GCC decoder smoothing (0)")
    p.add_argument("--solver", choices=("auto", "kalman", "banded", "kernel"), default="auto")
    p.add_argument("--restarts", type=int, help="worst-case search chains (8)")
    p.add_argument("--proposals", type=int, help="neighbours per step (128)")
    p.add_argument("--max-iters", type=int, help="local-search steps (25)")


def _config(args: argparse.Namespace, toy: bool) -> dict:
    flags = dict(
        workers=args.workers,
        num_inputs=args.num_inputs,
        stragglers=args.stragglers,
        num_masks=args.masks,
    )
    config = merge_config(DEFAULTS, TOY if toy else None, flags)
    search = dict(restarts=args.restarts, proposals=args.proposals, max_iters=args.max_iters)
    config["search"] = merge_config(config["search"], None, search)
    return config | dict(
        p=args.p,
        functions=args.functions,
        lam_enc=args.lam_enc,
        lam_dec=args.lam_dec,
        solver=args.solver,
    )


COMMAND = Command(
    name="rates",
    help="convergence rates of GCC vs BACC in N (worst case and iid stragglers)",
    description="Loss of GCC and BACC versus the number of workers N (log-spaced), for "
    "x·sin(x) and a smooth map R²→R³: worst case at fixed S (exhaustive or local search) "
    "and iid stragglers with probability p. Prints a table with fitted log-log slopes and "
    "writes rates.json, rates.txt and rates.png (with the theory lines).",
    add_arguments=_add_arguments,
    config=_config,
    run=run_rates,
    report=format_rates_table,
    save=save_rates,
    float32_flag=True,
)
