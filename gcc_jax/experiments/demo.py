"""Synthetic demo: GCC on a smooth vector-valued function, loss versus the number of stragglers.

``results["rows"]``: one row per ``S`` with ``stragglers``, ``mean_loss``, ``median_loss``,
``worst_loss`` (over the random straggler sets) and ``seconds``.
"""

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import as_int
from .._core.types import Array, Float
from ..codes import SplineCode
from ..evaluation import monte_carlo_loss, sample_masks
from ._command import StopOnInterrupt
from ._commands.demo import DEFAULTS, TOY
from ._io import ExperimentResult, new_figure, save_result
from ._plots import integer_ticks, legend_outside, positive

__all__ = [
    "DEFAULTS",
    "TOY",
    "format_demo_table",
    "report",
    "run",
    "run_demo",
    "save",
    "save_demo",
    "smooth_map",
]


METRICS = {
    "loss": "(1/K) Σ_k ‖f^(x_k) − f(x_k)‖² for one straggler set (f^ the GCC estimate)",
    "mean_loss": "mean of the loss over the random straggler sets with exactly S stragglers",
    "median_loss": "median of the loss over those straggler sets",
    "worst_loss": "largest loss over those straggler sets (not the adversarial worst case)",
}


def smooth_map(x: Float[Array, " d"]) -> Float[Array, " 2*d+2"]:
    """A smooth map ℝ^d → ℝ^(2d+2): ``[x·sin(x), tanh(x), mean(cos x), ‖x‖²/d]``."""
    return jnp.concatenate(
        [x * jnp.sin(x), jnp.tanh(x), jnp.mean(jnp.cos(x))[None], (jnp.sum(x * x) / x.size)[None]]
    )


def run_demo(
    *,
    num_inputs: int = 20,
    num_workers: int = 100,
    stragglers: tuple[int, ...] = (0, 5, 10, 20, 30, 40),
    num_masks: int = 1000,
    dim: int = 4,
    lam_enc: float = 0.0,
    lam_dec: float = 0.0,
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """Mean, median and worst loss of GCC versus ``S`` over random straggler sets.

    Inputs ``x_k ∈ [−2, 2]^dim`` are drawn from ``split(key(seed))[0]``; the masks for the
    ``i``-th ``S`` from ``fold_in(split(key(seed))[1], i)``, exactly ``S`` stragglers each; the
    worker function is :func:`smooth_map`.

    Example:
        >>> r = run_demo(num_inputs=3, num_workers=8, stragglers=(0, 2), num_masks=4, dim=1,
        ...              progress=False)
        >>> [row["stragglers"] for row in r.results["rows"]]
        [0, 2]
    """
    k = as_int(num_inputs, "num_inputs", 2)
    n = as_int(num_workers, "num_workers", 2)
    num_masks = as_int(num_masks, "num_masks", 1)
    dim = as_int(dim, "dim", 1)
    stragglers = tuple(as_int(s, "stragglers", 0) for s in stragglers)
    if any(s > n - 2 for s in stragglers):
        raise ValueError(f"every S must be in [0, N-2] = [0, {n - 2}]; got {stragglers}")
    t_start = time.perf_counter()
    key = jax.random.key(seed)
    kx, km = jax.random.split(key)
    x = jax.random.uniform(kx, (k, dim), minval=-2.0, maxval=2.0)
    code = SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_enc=lam_enc, lam_dec=lam_dec)
    rows = []
    with StopOnInterrupt() as stop:
        for i, s in enumerate(stragglers):
            masks = sample_masks(jax.random.fold_in(km, i), n, num=num_masks, stragglers=s)
            t0 = time.perf_counter()
            loss = monte_carlo_loss(code, smooth_map, x, masks, progress=progress)
            rows.append(
                dict(
                    stragglers=int(s),
                    mean_loss=float(np.mean(loss)),
                    median_loss=float(np.median(loss)),
                    worst_loss=float(np.max(loss)),
                    seconds=time.perf_counter() - t0,
                )
            )
    config = dict(
        interrupted=stop.interrupted,
        num_inputs=k,
        num_workers=n,
        stragglers=list(stragglers),
        num_masks=num_masks,
        dim=dim,
        lam_enc=float(lam_enc),
        lam_dec=float(lam_dec),
        function="smooth_map",
        dtype=str(code.beta.dtype),
    )
    result = ExperimentResult(
        "demo",
        config,
        {"seed": int(seed)},
        METRICS,
        {"rows": rows},
        {"total": time.perf_counter() - t_start},
    )
    return stop.finish(result)


run = run_demo


def format_demo_table(result: ExperimentResult) -> str:
    """A plain-text summary of a :func:`run_demo` result: what was measured, then the table."""
    cfg = result.config
    head = [
        f"GCC demo: K={cfg['num_inputs']} inputs in [-2, 2]^{cfg['dim']}, N={cfg['num_workers']} "
        f"workers, f = smooth_map (R^{cfg['dim']} -> R^{cfg['dim'] + 2}), "
        f"lam_enc={cfg['lam_enc']:g}, lam_dec={cfg['lam_dec']:g}, {cfg['dtype']}.",
        "loss = (1/K) sum_k ||f^(x_k) - f(x_k)||^2, the squared error of GCC's estimates of "
        "f(x_1..x_K) for one straggler set;",
        f"for each S: mean, median and largest loss over {cfg['num_masks']} random sets of "
        "exactly S stragglers (the largest of random sets is not the adversarial worst case).",
    ]
    if cfg.get("interrupted"):
        head.append("INTERRUPTED: only the rows below were measured.")
    cols = f"{'S':>5} {'mean loss':>12} {'median':>12} {'max of sets':>12} {'time':>8}"
    lines = [*head, "", cols]
    for r in result.results["rows"]:
        lines.append(
            f"{r['stragglers']:>5} {r['mean_loss']:>12.3e} {r['median_loss']:>12.3e} "
            f"{r['worst_loss']:>12.3e} {r['seconds']:>7.2f}s"
        )
    lines.append("(the first row's time includes compiling the decoder)")
    return "\n".join(lines)


report = format_demo_table


def plot_demo(result: ExperimentResult):
    """Mean, median and largest loss versus S on a log axis (zeros noted, not dropped)."""
    cfg, rows = result.config, result.results["rows"]
    fig, ax = new_figure(figsize=(6.4, 4.0))
    s = [r["stragglers"] for r in rows]
    series = (
        ("mean_loss", "mean over the random sets", "o-"),
        ("median_loss", "median", "s--"),
        ("worst_loss", f"largest of {cfg['num_masks']} random sets", "^:"),
    )
    for key, label, style in series:
        y, label = positive([r[key] for r in rows], label)
        ax.plot(s, y, style, label=label)
    ax.set_yscale("log")
    integer_ticks(ax, s)
    ax.set_xlabel(f"stragglers S (of N = {cfg['num_workers']} workers)")
    ax.set_ylabel("loss  (1/K) Σ_k ‖f̂(x_k) − f(x_k)‖²")
    ax.set_title(
        f"GCC, K = {cfg['num_inputs']}, λ_enc = {cfg['lam_enc']:g}, λ_dec = {cfg['lam_dec']:g}"
        + (" (interrupted)" if cfg.get("interrupted") else "")
    )
    ax.grid(True, which="major", alpha=0.3)
    legend_outside(ax)
    return fig


def save_demo(result: ExperimentResult, out: str | Path) -> dict[str, Path]:
    """Write ``demo.json``, ``demo.txt`` and ``demo.png`` into the folder ``out``."""
    return save_result(
        result, out, summary=format_demo_table(result), figures={"demo": plot_demo(result)}
    )


save = save_demo
