"""GCC versus BACC versus LCC on polynomial worker functions (LeTCC App. D).

LCC is *designed* for polynomials: with ``f`` of degree ``deg`` it is exact as long as at least
``(K − 1)·deg + 1`` workers return, and beyond that it falls back (as in LeTCC App. D) to the
lower-degree polynomial through all live results (``LagrangeCode(below_threshold="interpolate")``).
GCC and BACC are approximate for every ``S`` but degrade gracefully. This experiment measures
the loss ``(1/K) Σ_k ‖f^(x_k) − f(x_k)‖²`` versus the number of stragglers ``S`` for the paper's
two settings — ``deg f = 3, K = 5`` and ``deg f = 15, K = 10`` — with the same random straggler
sets (``num_trials`` per ``S``, exactly ``S`` dead workers each) and the same inputs for every
code, reporting the mean and a 95% confidence interval ``1.96·std/√trials``.

The polynomial is ``f(x) = Σ_j c_j x^j`` with ``c_j ~ N(0, 1)`` drawn once from the seed, and
the inputs are ``x_k ~ U(−1, 1)``. GCC uses ``λ_enc = λ_dec = 0`` unless overridden.
"""

import math
import sys
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..codes import BerrutCode, LagrangeCode, SplineCode
from ..evaluation import monte_carlo_loss, sample_masks
from ._command import StopOnInterrupt
from ._commands.poly import CODES, DEFAULTS, SETTINGS, TOY
from ._io import ExperimentResult, new_figure, save_report
from ._plots import integer_ticks, legend_outside, log_errorbar
from .rates import pick_solver

__all__ = [
    "DEFAULTS",
    "TOY",
    "format_poly_table",
    "plot_poly",
    "polynomial",
    "report",
    "run",
    "run_poly",
    "save",
    "save_poly",
]

"""Toy sizes (``--toy``)."""
METRICS = {
    "loss": "(1/K) Σ_k ‖f^(x_k) − f(x_k)‖² for one straggler set",
    "mean": "mean loss over the num_trials random sets of exactly S stragglers (sets a code "
    "cannot decode are left out and counted in `failed`)",
    "ci95": "1.96 · std / √(decoded sets), half-width of a normal 95% interval of the mean",
    "exact": "LCC only: S ≤ N − ((K − 1) deg f + 1), LCC's recovery threshold",
}


def polynomial(degree: int, *, seed: int = 0) -> tuple[Callable, np.ndarray]:
    """``f(x) = Σ_j c_j x^j`` with ``c_j ~ N(0, 1)`` (``c`` highest power first, as polyval).

    Returns ``(f, c)``; ``f`` maps an input of shape ``(1,)`` to an output of shape ``(1,)``.
    """
    c = np.random.default_rng(seed).standard_normal(degree + 1)
    coef = jnp.asarray(c)

    def f(x):
        return jnp.polyval(coef.astype(x.dtype), x)

    return f, c


def _default_stragglers(n: int) -> list[int]:
    top = max(n - 2, 0) if n <= 12 else n // 2
    return sorted({int(round(v)) for v in np.linspace(0, top, min(top + 1, 11))})


def run_poly(
    *,
    settings: Sequence[tuple[int, int, int]] = SETTINGS,
    stragglers: Sequence[int] | None = None,
    num_trials: int = 20,
    lam_enc: float = 0.0,
    lam_dec: float = 0.0,
    solver: str = "auto",
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """Loss versus ``S`` for GCC, BACC and LCC on polynomial ``f``.

    Args:
        settings: ``(deg f, K, N)`` triples. The defaults use ``N = 20`` for ``deg 3, K = 5``
            (LCC's threshold is 13, so it is exact for ``S ≤ 7``, as the paper reports) and
            ``N = 40`` for ``deg 15, K = 10`` (threshold 136: LCC is never exact there).
        stragglers: the ``S`` values (default: up to ``N/2``, at most 11 values); each must
            leave at least 2 live workers.
        num_trials: random straggler sets per ``S``.
        lam_enc, lam_dec: GCC's smoothing parameters.
        solver: SplineCode solver (``"auto"``: Kalman when available).
        seed: seeds the polynomial, the inputs and the straggler sets.
        progress: print one line per ``(setting, S)``.

    Returns:
        An :class:`ExperimentResult` whose ``results["rows"]`` has one row per setting, ``S``
        and code (``mean``, ``ci95``, ``failed``, and for LCC ``exact`` = ``S ≤ N − threshold``).
    """
    t_start = time.perf_counter()
    solver = pick_solver(solver)
    key = jax.random.key(seed)
    rows = []
    with StopOnInterrupt() as stop:
        for si, (deg, k, n) in enumerate(settings):
            f, coef = polynomial(deg, seed=seed + si)
            kx = jax.random.fold_in(key, si)
            x = jax.random.uniform(kx, (k, 1), minval=-1.0, maxval=1.0)
            codes = dict(
                GCC=SplineCode.chebyshev(
                    num_inputs=k, num_workers=n, lam_enc=lam_enc, lam_dec=lam_dec, solver=solver
                ),
                BACC=BerrutCode.chebyshev(num_inputs=k, num_workers=n),
                LCC=LagrangeCode.chebyshev(
                    num_inputs=k, num_workers=n, degree=deg, below_threshold="interpolate"
                ),
            )
            threshold = codes["LCC"].recovery_threshold
            s_values = list(stragglers) if stragglers is not None else _default_stragglers(n)
            if any(s < 0 or s > n - 2 for s in s_values):
                raise ValueError(f"every S must be in [0, N − 2] = [0, {n - 2}]; got {s_values}")
            for s in s_values:
                masks = sample_masks(
                    jax.random.fold_in(kx, 1000 + s), n, num=num_trials, stragglers=s
                )
                line = []
                for name, code in codes.items():
                    t0 = time.perf_counter()
                    res = monte_carlo_loss(code, f, x, masks, return_status=True)
                    ok = res.status == 0
                    loss = res.loss[ok]
                    mean = float(np.mean(loss)) if ok.any() else float("nan")
                    ci = 1.96 * float(np.std(loss)) / math.sqrt(max(ok.sum(), 1))
                    row = dict(
                        degree=deg,
                        K=k,
                        N=n,
                        S=int(s),
                        code=name,
                        mean=mean,
                        ci95=ci,
                        failed=int((~ok).sum()),
                        seconds=time.perf_counter() - t0,
                    )
                    if name == "LCC":
                        row["exact"] = bool(n - s >= threshold)
                    rows.append(row)
                    line.append(f"{name} {mean:.2e}")
                if progress:
                    print(
                        f"deg={deg:>2} K={k:>2} N={n:>3} S={s:>3}: " + "  ".join(line),
                        file=sys.stderr,
                        flush=True,
                    )
    config = dict(
        interrupted=stop.interrupted,
        settings=[dict(degree=d, K=k, N=n) for d, k, n in settings],
        stragglers=None if stragglers is None else [int(s) for s in stragglers],
        num_trials=num_trials,
        lam_enc=lam_enc,
        lam_dec=lam_dec,
        solver=solver,
        dtype=str(jnp.zeros(()).dtype),
    )
    result = ExperimentResult(
        "poly",
        config,
        {"seed": int(seed), "polynomial_seeds": [seed + i for i in range(len(settings))]},
        METRICS,
        {"rows": rows},
        {"total": time.perf_counter() - t_start},
    )
    return stop.finish(result)


run = run_poly


def _rows(result: ExperimentResult, setting: dict, code: str) -> list[dict]:
    rows = [
        r
        for r in result.results["rows"]
        if r["code"] == code and (r["degree"], r["K"], r["N"]) == tuple(setting.values())
    ]
    return sorted(rows, key=lambda r: r["S"])


def format_poly_table(result: ExperimentResult) -> str:
    """Plain-text table of a :func:`run_poly` result (mean loss per ``S``; ``*`` = LCC exact)."""
    cfg = result.config
    lines = [
        f"Polynomial f: GCC vs BACC vs LCC, {cfg['num_trials']} random straggler sets per S, "
        f"{cfg['dtype']}  (* = S within LCC's recovery threshold)"
    ]
    for st in cfg["settings"]:
        thr = (st["K"] - 1) * st["degree"] + 1
        exact = f"exact for S <= {st['N'] - thr}" if st["N"] >= thr else "never exact at this N"
        lines.append(
            f"\ndeg f={st['degree']}, K={st['K']}, N={st['N']} (LCC threshold {thr}: {exact})"
        )
        lines.append(f"{'S':>4} " + " ".join(f"{c:>11}" for c in CODES))
        per = {c: _rows(result, st, c) for c in CODES}
        for i, r in enumerate(per["GCC"]):
            cells = []
            for c in CODES:
                rr = per[c][i]
                mark = "*" if rr.get("exact") else " "
                cells.append(f"{rr['mean']:>10.3e}{mark}")
            lines.append(f"{r['S']:>4} " + " ".join(cells))
    return "\n".join(lines)


report = format_poly_table


def plot_poly(result: ExperimentResult):
    """Mean loss versus ``S`` (log scale, ±95% CI bars), one panel per setting.

    Exact zeros (LCC within its recovery threshold decodes polynomials exactly, up to round-off)
    cannot sit on a log axis: they are counted in the legend, not drawn. LCC's threshold, the
    largest ``S`` it can tolerate, is the dashed line.
    """
    settings = result.config["settings"]
    trials = result.config["num_trials"]
    fig, axes = new_figure(1, len(settings), figsize=(7.5 * len(settings), 4), squeeze=False)
    colors = dict(GCC="C0", BACC="C3", LCC="C2")
    for ax, st in zip(axes[0], settings, strict=True):
        s_all = []
        for c in CODES:
            rows = _rows(result, st, c)
            s = np.array([r["S"] for r in rows])
            s_all.extend(s.tolist())
            mean = np.array([r["mean"] for r in rows], float)
            ci = np.array([r["ci95"] for r in rows], float)
            log_errorbar(ax, s, mean, ci, c, fmt="o-", color=colors[c])
        limit = st["N"] - ((st["K"] - 1) * st["degree"] + 1)
        if limit >= 0:
            ax.axvline(
                limit, ls="--", color=colors["LCC"], alpha=0.6, label=f"LCC exact for S ≤ {limit}"
            )
        ax.set_yscale("log")
        if s_all:
            integer_ticks(ax, s_all)
        ax.set_xlabel(f"stragglers S (of N = {st['N']})")
        ax.set_ylabel(f"mean loss over {trials} sets  (1/K) Σ‖f̂ − f‖²")
        ax.set_title(f"deg f = {st['degree']}, K = {st['K']}, N = {st['N']}")
        ax.grid(True, which="major", alpha=0.3)
        legend_outside(ax, fontsize=8)
    fig.tight_layout()
    return fig


save = save_poly = save_report(format_poly_table, plot_poly)
"""Write ``poly.json``, ``poly.txt`` and ``poly.png`` into the folder ``out``."""
