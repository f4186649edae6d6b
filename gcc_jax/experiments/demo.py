"""Synthetic demo: GCC on a smooth vector-valued function, loss versus number of stragglers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._pipeline import monte_carlo_loss
from .._stragglers import sample_masks
from ..codes import SplineCode


def smooth_map(x: jax.Array) -> jax.Array:
    """A smooth map ℝ^d → ℝ^(d+2): ``[x·sin(x), tanh(x), mean(cos x), ‖x‖²/d]``."""
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
) -> dict:
    """Mean and worst loss of GCC versus ``S`` over random straggler sets (exactly S per set).

    Inputs ``x_k ∈ [−2, 2]^dim`` are drawn once from the seed; the worker function is
    :func:`smooth_map`. Returns a JSON-ready dict.
    """
    if any(s < 0 or s > num_workers - 2 for s in stragglers):
        raise ValueError(f"every S must be in [0, N-2] = [0, {num_workers - 2}]; got {stragglers}")
    key = jax.random.key(seed)
    kx, km = jax.random.split(key)
    x = jax.random.uniform(kx, (num_inputs, dim), minval=-2.0, maxval=2.0)
    code = SplineCode.chebyshev(
        num_inputs=num_inputs, num_workers=num_workers, lam_enc=lam_enc, lam_dec=lam_dec
    )
    rows = []
    for i, s in enumerate(stragglers):
        masks = sample_masks(jax.random.fold_in(km, i), num_workers, num=num_masks, stragglers=s)
        t0 = time.perf_counter()
        loss = monte_carlo_loss(code, smooth_map, x, masks, progress=progress)
        rows.append(
            dict(
                stragglers=int(s),
                mean_loss=float(np.mean(loss)),
                worst_loss=float(np.max(loss)),
                median_loss=float(np.median(loss)),
                seconds=time.perf_counter() - t0,
            )
        )
    return dict(
        experiment="demo",
        num_inputs=num_inputs,
        num_workers=num_workers,
        num_masks=num_masks,
        dim=dim,
        lam_enc=lam_enc,
        lam_dec=lam_dec,
        seed=seed,
        dtype=str(code.beta.dtype),
        rows=rows,
    )


def format_table(result: dict) -> str:
    """A plain-text table of a :func:`run_demo` result."""
    head = (
        f"GCC demo: K={result['num_inputs']} inputs, N={result['num_workers']} workers, "
        f"{result['num_masks']} random straggler sets per S, lam_enc={result['lam_enc']:g}, "
        f"lam_dec={result['lam_dec']:g}, {result['dtype']}"
    )
    lines = [head, f"{'S':>5} {'mean loss':>12} {'median':>12} {'worst':>12} {'time':>8}"]
    for r in result["rows"]:
        lines.append(
            f"{r['stragglers']:>5} {r['mean_loss']:>12.3e} {r['median_loss']:>12.3e} "
            f"{r['worst_loss']:>12.3e} {r['seconds']:>7.2f}s"
        )
    return "\n".join(lines)


def save(result: dict, out: str | Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "demo.json"
    path.write_text(json.dumps(result, indent=2))
    return path
