"""``gcc-jax compare-learned``: ParM and a learned code against GCC and BACC in degraded mode.

Learning-based coded computation (Kosaian, Rashmi & Venkataraman) recovers an
unavailable base-model output from ``k`` queries and ``r = 1`` extra worker. This experiment
measures it head to head with the training-free codes:

* **Base models.** MLP (784-200-100-10) and LeNet-5 trained by
  :func:`gcc_jax.nn.training.train_classifier` (cached) on Fashion-MNIST, or on scikit-learn's
  digits when the Fashion-MNIST files are absent (a note says so).
* **ParM** (:class:`gcc_jax.ParityModelCode`): ``k + 1`` workers, the parity model trained by
  :func:`gcc_jax.train_parity_model` on the base model's logits; the summation encoder for every
  ``k``, the concatenation encoder for ``k ∈ {2, 4}``.
* **Learned code** (:class:`gcc_jax.LearnedCode`): ``k + 1`` workers, encoder and decoder
  trained end to end through the frozen base model by :func:`gcc_jax.train_learned_code`.
* **GCC / BACC at N = k + 1, S = 1**: the same worker budget and the same single unavailable
  worker (:class:`gcc_jax.SplineCode`, :class:`gcc_jax.BerrutCode`; worker output = softmax
  probabilities, the LeTCC protocol).
* **GCC / BACC at their natural operating point with the same number of extra workers**:
  ``g`` groups merged into one code, ``K = g·k`` inputs on ``N = g·(k + 1)`` workers — the same
  one extra worker per ``k`` inputs (``N/K = (k + 1)/k``) — with ``S = g`` random stragglers,
  the same fraction ``1/(k + 1)`` of unavailable workers that ParM absorbs. Splines and Berrut
  interpolants are built for many points (LeTCC runs ``K ≈ 20`` and more); at ``N = k + 1``
  GCC has 2–4 live points per decode, which is not the regime its error bounds describe.
  ``g = 10`` by default (``K = 20, 30, 40``).

GCC's ``λ_enc = 0`` (interpolating encoder); ``λ_dec`` is picked per setting from
``lam_dec_grid`` by the lowest mean RMSE of the softmax outputs on held-out *training* images
(never the evaluation images).

**Degraded mode.** ParM and the learned code: every group of ``k`` test images is decoded once
per single unavailable *base* worker (``k`` patterns); the metrics count the reconstructed slot
only (ParM's protocol; the other ``k − 1`` outputs are exact). GCC and BACC have no systematic
workers — every decoded output is an approximation — so all ``K`` outputs of every pattern
count (at ``N = k + 1``: all ``N`` single-straggler patterns; natural point: ``trials`` random
patterns of ``S`` stragglers per batch). Metrics, with ``ŷ`` the decoded estimate:

* ``recon``: ``argmax ŷ = argmax F(x)`` (ParM's "reconstruction accuracy");
* ``overall``: ``argmax ŷ`` = true label (ParM's "overall accuracy");
* ``gap_points``: base-model accuracy on the same images minus ``overall``, in percentage
  points — ParM reports 1.79 for Fashion-MNIST, ResNet-18, ``k = 2`` (Kosaian & Rashmi);
* ``all_overall``: accuracy over all ``k`` outputs when one of the ``N`` workers (any) is
  unavailable — the accuracy a user of the system sees in degraded mode.

95% confidence half-widths treat each group (batch) as one sample. Training times come from the
checkpoint cache's metadata (the run that trained the weights); GCC and BACC train nothing (their
λ search is reported as ``tuning_time_s``).

``run_compare_learned`` returns an :class:`~gcc_jax.experiments.ExperimentResult`, written by
:func:`save_compare` as ``compare_learned.json`` in the common schema of
:mod:`gcc_jax.experiments._io`, with::

    "config": {dataset, models, ks, base_epochs, code_epochs, code_train_size, eval_images,
               concat, learned_encoder, learned_hidden, gcc_groups, gcc_trials, cv_images,
               lam_dec_grid, batch_size, dtype},
    "results": {
      "dataset": {name, requested, note, num_code_train, num_eval, num_cv},
      "models": {MODEL: {test_accuracy, eval_accuracy, num_params, epochs, train_time_s,
                         from_cache}},
      "rows": [{model, k, method, encoder, output, num_inputs, num_workers, stragglers,
                extra_workers_per_input, patterns, recon, overall, all_overall: {mean, ci95},
                gap_points, num_degraded, num_failed, train_time_s, from_cache, val_metric,
                lam_dec, tuning_time_s, base_model, base_test_accuracy, base_epochs}],
      "published": {...}, "comparison": [{model, method, base_accuracy, base_epochs, overall,
                     gap_points, published_gap_points, published_base_model, like_for_like}]
    },
    "timing_s": {base_training, code_training, tuning, evaluation, total}
"""

import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from .._core.scalars import as_int
from .._core.types import Array, Bool, Float, Int
from ..codes import AbstractCode, BerrutCode, SplineCode
from ..evaluation._evaluator import MaskEvaluator
from ..evaluation._metrics import mean_ci
from ..evaluation._stragglers import sample_masks
from ..nn.data import Dataset, DatasetNotFoundError, load_dataset
from ..nn.models import count_params, make_model
from ..nn.training import base_outputs, train_classifier, train_learned_code, train_parity_model
from ._command import StopOnInterrupt
from ._commands.learned import DEFAULT_LAM_DEC_GRID, toy_config
from ._io import ExperimentResult, json_clean, new_figure, save_result
from ._plots import legend_outside

__all__ = [
    "METHODS",
    "PUBLISHED",
    "decode_groups",
    "decoded_groups",
    "format_compare_table",
    "plot_compare",
    "run_compare_learned",
    "save_compare",
    "toy_config",
]

METHODS = (
    "ParM-sum",
    "ParM-concat",
    "learned",
    "GCC",
    "BACC",
    "GCC-natural",
    "BACC-natural",
)
"""Row labels of the comparison, in table order."""

PUBLISHED = {
    "parm_gap_points": 1.79,
    "dataset": "fashion_mnist",
    "base_model": "resnet18",
    "num_inputs": 2,
    "accuracy": {"deployed": 92.9, "reconstructed": 91.1},
    "source": "Kosaian & Rashmi blog, parity-models-k2-graph.png (method-notes §3.4)",
    "learned_code_gap_points": 0.7,
    "learned_code_source": "blog part 1, ResNet-18, k=2, r=1 [SECONDARY] (method-notes §3.4)",
}
"""ParM's published Fashion-MNIST ``k = 2`` degraded-mode gap (percentage points)."""

DEFAULT_BASE_EPOCHS = {"mlp": 10, "lenet5": 3}
"""Base-model epochs per model when ``base_epochs`` is not given."""


def _load(dataset: str | Dataset, data_path) -> tuple[Dataset, str, str]:
    """The data set, the requested name and a note (digits when Fashion-MNIST is absent)."""
    if isinstance(dataset, Dataset):
        return dataset, dataset.name, ""
    try:
        return load_dataset(dataset, data_path), dataset, ""
    except DatasetNotFoundError as err:
        if dataset.lower().replace("-", "_") not in ("fashion_mnist", "fashionmnist"):
            raise
        note = f"Fashion-MNIST not found, ran on scikit-learn's digits instead ({err})"
        return load_dataset("digits"), dataset, note


def code_train_indices(num_train: int, size: int | None, seed: int) -> np.ndarray:
    """Training-split indices the codes are trained on: the first ``size`` of a seeded
    permutation, sorted (all of them for ``None``)."""
    if size is None or size >= num_train:
        return np.arange(num_train)
    return np.sort(np.random.default_rng((seed, 0x7A1)).permutation(num_train)[:size])


def eval_indices(num_test: int, size: int, seed: int) -> np.ndarray:
    """Test-split indices of the evaluation images (a seeded permutation's first ``size``)."""
    return np.random.default_rng((seed, 0xE7A1)).permutation(num_test)[: min(size, num_test)]


def cv_indices(num_train: int, size: int, seed: int) -> np.ndarray:
    """Training-split indices of GCC's λ cross-validation images."""
    return np.random.default_rng((seed, 0xC5)).permutation(num_train)[: min(size, num_train)]


def single_erasures(n: int) -> np.ndarray:
    """The ``n`` masks with exactly one unavailable worker (row ``j`` loses worker ``j``)."""
    return ~np.eye(n, dtype=bool)


def decoded_groups(
    code: AbstractCode, yt: Float[Array, "n g *m"], targets: None, mask: Bool[Array, " n"]
) -> tuple[Float[Array, "g k *m"], Int[Array, " g"]]:
    """Decode every group (axis 1 of ``yt``) under one mask: values ``(g, k, *m)``, statuses.

    The ``per_mask`` function of :class:`gcc_jax.MaskEvaluator` for groups of inputs coded
    independently with the same code (``targets`` unused).
    """
    dec = jax.vmap(lambda y: code.decode_with_status(y, mask), in_axes=1)(yt)
    return dec.value, dec.status


def decode_groups(
    code: AbstractCode, yt: Float[np.ndarray, "g n *m"], masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Decoded values ``(g, p, k, *m)`` and statuses ``(g, p)`` of groups ``yt`` ``(g, n, *m)``.

    ``masks`` is ``(p, n)``, the same patterns for every group (one evaluator call), or
    ``(g, p, n)``, one set of patterns per group (one call per group). Every pattern goes
    through :class:`gcc_jax.MaskEvaluator` with :func:`decoded_groups`.
    """
    masks = np.asarray(masks)
    by_worker = np.moveaxis(np.asarray(yt), 0, 1)  # (n, g, *m)
    if masks.ndim == 2:
        vals, st = MaskEvaluator(code, by_worker, None, per_mask=decoded_groups)(masks)
        return np.moveaxis(vals, 0, 1), st.T
    vals, sts = [], []
    for b in range(masks.shape[0]):
        ev = MaskEvaluator(code, by_worker[:, b : b + 1], None, per_mask=decoded_groups)
        v, st = ev(masks[b])
        vals.append(v[:, 0])
        sts.append(st[:, 0])
    return np.stack(vals), np.stack(sts)


@functools.partial(jax.jit, static_argnames="f")
def _group_outputs(code: AbstractCode, f: Callable, x: Array) -> Array:
    """``code.worker_outputs(f, x_b)`` of every group ``x`` ``(b, K, ...)``: ``(b, n, *m)``."""
    return jax.vmap(lambda xb: code.worker_outputs(f, xb))(x)


def group_outputs(
    code: AbstractCode, f: Callable, x: np.ndarray, chunk_images: int = 1000
) -> np.ndarray:
    """The workers' outputs on groups ``x (b, K, ...)`` in fixed-size chunks of groups (one
    compilation per code shape; the last chunk is padded), in the default float dtype."""
    per = max(1, chunk_images // x.shape[1])
    size = min(per, x.shape[0])
    out = []
    for start in range(0, x.shape[0], size):
        xb = x[start : start + size]
        pad = size - xb.shape[0]
        if pad:
            xb = np.concatenate([xb, np.zeros((pad, *xb.shape[1:]), xb.dtype)])
        out.append(np.asarray(_group_outputs(code, f, jnp.asarray(xb)))[: size - pad])
    return np.concatenate(out).astype(jnp.zeros(()).dtype)


def score(
    values: np.ndarray,
    status: np.ndarray,
    degraded: np.ndarray,
    base_pred: np.ndarray,
    labels: np.ndarray,
) -> dict:
    """Degraded-mode metrics of decoded groups (module docstring).

    Args:
        values: decoded estimates ``(g, p, k, m)``.
        status: decode statuses ``(g, p)`` (a failed decode counts as wrong).
        degraded: which slots are reconstructions, broadcastable to ``(g, p, k)``.
        base_pred: the base model's argmax ``(g, k)``.
        labels: true labels ``(g, k)``.

    Returns:
        ``{"recon", "overall", "all_overall": {"mean", "ci95"}, "num_degraded", "num_failed"}``
        with per-group means as the samples of the 95% CI.
    """
    values, status = np.asarray(values), np.asarray(status)
    ok = (status == 0)[..., None]
    pred = np.argmax(values, axis=-1)
    recon = (pred == base_pred[:, None, :]) & ok
    overall = (pred == labels[:, None, :]) & ok
    w = np.broadcast_to(degraded, recon.shape)
    per = w.sum(axis=(1, 2))
    keep = per > 0

    def stat(hits, weights, rows):
        g = (hits & weights).sum(axis=(1, 2))[rows] / weights.sum(axis=(1, 2))[rows]
        m, ci = mean_ci(g.astype(float)) if g.size > 1 else (float(g.mean()), float("nan"))
        return {"mean": float(m), "ci95": float(ci)}

    everything = np.ones_like(w)
    all_rows = np.ones(w.shape[0], bool)
    return {
        "recon": stat(recon, w, keep),
        "overall": stat(overall, w, keep),
        "all_overall": stat(overall, everything, all_rows),
        "num_degraded": int(w.sum()),
        "num_failed": int(np.count_nonzero(status)),
    }


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def run_compare_learned(
    *,
    dataset: str | Dataset = "fashion_mnist",
    data_path: str | os.PathLike | None = None,
    models: Sequence[str] = ("mlp", "lenet5"),
    ks: Sequence[int] = (2, 3, 4),
    base_epochs: int | None = None,
    code_epochs: int = 4,
    code_train_size: int | None = 12000,
    eval_images: int = 10000,
    concat: bool = True,
    learned_encoder: str = "mlp",
    learned_hidden: int | None = 256,
    gcc_groups: int = 10,
    gcc_trials: int = 10,
    cv_images: int = 1000,
    lam_dec_grid: Sequence[float] = DEFAULT_LAM_DEC_GRID,
    batch_size: int = 64,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> ExperimentResult:
    """Run the comparison (module docstring); returns its :class:`ExperimentResult`.

    Args:
        dataset: data-set name (default Fashion-MNIST; digits when its files are absent) or a
            ``Dataset``.
        data_path: directory of the data files.
        models: base models (:func:`gcc_jax.nn.models.make_model` names).
        ks: numbers of inputs per group ``k`` (each ``≥ 2``).
        base_epochs: base-model epochs (default :data:`DEFAULT_BASE_EPOCHS` per model).
        code_epochs: epochs of every parity model and learned code.
        code_train_size: training images the codes are trained on (``None``: all).
        eval_images: test images evaluated (rounded down to whole groups per ``k``).
        concat: also train ParM's concatenation encoder for ``k ∈ {2, 4}``.
        learned_encoder: ``"mlp"`` or ``"conv"``.
        learned_hidden: MLP encoder hidden width (``None``: the input size), or the conv
            encoder's channels (``None``: ``20·k``).
        gcc_groups: ``g`` of GCC's natural operating point (``K = g·k``, ``N = g·(k+1)``,
            ``S = g``).
        gcc_trials: random straggler patterns per batch at the natural operating point.
        cv_images: training images for GCC's λ cross-validation.
        lam_dec_grid: GCC decoder λ candidates.
        batch_size: base-model training batch size.
        seed: seeds every training, split and straggler pattern.
        cache_dir: checkpoint cache directory (default ``$GCC_JAX_CACHE`` or the XDG cache).
        use_cache: read and write the cache.
        progress: progress bars.

    Returns:
        The result described in the module docstring.

    Raises:
        ValueError: bad sizes or names.
        DatasetNotFoundError: a data set other than Fashion-MNIST is missing.
    """
    t_start = time.perf_counter()
    ks = tuple(as_int(k, "k", 2) for k in ks)
    models = tuple(str(m) for m in models)
    if not ks or not models:
        raise ValueError("`ks` and `models` must be non-empty")
    code_epochs = as_int(code_epochs, "code_epochs", 1)
    eval_images = as_int(eval_images, "eval_images", 2)
    g_nat = as_int(gcc_groups, "gcc_groups", 1)
    trials = as_int(gcc_trials, "gcc_trials", 1)
    cv_images = as_int(cv_images, "cv_images", 2)
    grid = tuple(float(v) for v in lam_dec_grid)
    if not grid or any(not np.isfinite(v) or v < 0 for v in grid):
        raise ValueError(f"`lam_dec_grid` must be finite λ >= 0; got {lam_dec_grid!r}")
    if learned_encoder not in ("mlp", "conv"):
        raise ValueError(f"`learned_encoder` must be 'mlp' or 'conv'; got {learned_encoder!r}")
    dtype = jnp.zeros(()).dtype

    ds, requested, note = _load(dataset, data_path)
    if note and progress:
        tqdm.write(note, file=sys.stderr)
    if eval_images < max(ks):
        raise ValueError(f"`eval_images`={eval_images} is smaller than a group (k={max(ks)})")
    x_code = ds.x_train[code_train_indices(ds.num_train, code_train_size, seed)]
    ev = eval_indices(ds.x_test.shape[0], eval_images, seed)
    cv = cv_indices(ds.num_train, cv_images, seed)
    h, w = ds.input_shape[:2]
    can_concat = concat and h % 2 == 0 and w % 2 == 0
    key = jax.random.key(seed)

    times = {"base_training": 0.0, "code_training": 0.0, "tuning": 0.0, "evaluation": 0.0}
    model_info: dict[str, dict] = {}
    rows: list[dict] = []
    with StopOnInterrupt() as stop:
        for model in models:
            epochs = base_epochs if base_epochs is not None else DEFAULT_BASE_EPOCHS.get(model, 5)
            t0 = time.perf_counter()
            tm = train_classifier(
                model,
                ds,
                epochs=epochs,
                batch_size=batch_size,
                seed=seed,
                cache_dir=cache_dir,
                use_cache=use_cache,
                progress=progress,
            )
            times["base_training"] += time.perf_counter() - t0
            apply, params = tm.apply, tm.params
            in_dtype = ds.x_test.dtype  # the workers run the model in its own precision

            def f_logits(v, apply=apply, params=params, in_dtype=in_dtype):
                return apply(params, v.astype(in_dtype))

            def f_probs(v, apply=apply, params=params, in_dtype=in_dtype):
                return jax.nn.softmax(apply(params, v.astype(in_dtype)), axis=-1)

            x_ev = ds.x_test[ev]  # float32: the workers run the model in its own precision
            y_ev = ds.y_test[ev]
            logits_ev = base_outputs(apply, params, x_ev).astype(dtype)
            base_pred_ev = logits_ev.argmax(-1)
            x_cv = ds.x_train[cv]
            probs_cv = _softmax(base_outputs(apply, params, x_cv))
            model_info[model] = {
                "test_accuracy": tm.test_accuracy,
                "eval_accuracy": float(np.mean(base_pred_ev == y_ev)),
                "num_params": count_params(params),
                "epochs": int(epochs),
                "train_time_s": tm.train_time_s,
                "from_cache": tm.from_cache,
            }

            def groups(size: int, n_img: int = len(ev)):
                """Evaluation images in groups of ``size`` (first whole groups)."""
                g = n_img // size
                idx = np.arange(g * size).reshape(g, size)
                return idx, x_ev[idx], y_ev[idx], base_pred_ev[idx], logits_ev[idx]

            for k in ks:
                desc = f"{model} k={k}"
                idx, xg, yg, bg, lg = groups(k)
                erase_base = single_erasures(k + 1)[:k]  # (k, n): pattern j loses base worker j
                degraded_base = ~erase_base[None, :, :k]  # slot j reconstructed in pattern j

                def common(method, encoder, output, n, kk, s, patterns, extra_per_input):
                    return {
                        "model": model,
                        "k": k,
                        "method": method,
                        "encoder": encoder,
                        "output": output,
                        "num_inputs": kk,
                        "num_workers": n,
                        "stragglers": s,
                        "extra_workers_per_input": extra_per_input,
                        "patterns": patterns,
                    }

                def trained_row(method, encoder, trained):
                    """The row of a trained code (ParM or learned: k + 1 workers, one erasure)."""
                    yt = group_outputs(trained.code, f_logits, xg)
                    vals, st = decode_groups(trained.code, yt, erase_base)
                    row = common(method, encoder, "logits", k + 1, k, 1, "single base", 1 / k)
                    row.update(score(vals, st, degraded_base, bg, yg))
                    row["all_overall"] = _all_outputs_parm(row, vals, st, yg, logits=lg)
                    row.update(
                        train_time_s=trained.train_time_s,
                        from_cache=trained.from_cache,
                        val_metric=trained.val_metrics[-1] if trained.val_metrics else None,
                        lam_dec=None,
                        tuning_time_s=0.0,
                    )
                    return row

                # -- ParM --------------------------------------------------------------------------
                encoders = ["sum"] + (["concat"] if can_concat and k in (2, 4) else [])
                for enc in encoders:
                    _, init = make_model(
                        model, input_shape=ds.input_shape, num_classes=ds.num_classes, key=seed + 1
                    )
                    t0 = time.perf_counter()
                    tc = train_parity_model(
                        apply,
                        params,
                        x_code,
                        num_inputs=k,
                        init_params=init,
                        encoder=enc,
                        epochs=code_epochs,
                        seed=seed,
                        cache_dir=cache_dir,
                        use_cache=use_cache,
                        progress=progress,
                    )
                    times["code_training"] += time.perf_counter() - t0
                    t0 = time.perf_counter()
                    rows.append(trained_row(f"ParM-{enc}", enc, tc))
                    times["evaluation"] += time.perf_counter() - t0

                # -- learned code ------------------------------------------------------------------
                t0 = time.perf_counter()
                hidden = None if learned_hidden is None else int(learned_hidden)
                tl = train_learned_code(
                    apply,
                    params,
                    x_code,
                    num_inputs=k,
                    encoder=learned_encoder,
                    encoder_hidden=(hidden,) if learned_encoder == "mlp" and hidden else None,
                    channels=hidden if learned_encoder == "conv" else None,
                    epochs=code_epochs,
                    seed=seed,
                    cache_dir=cache_dir,
                    use_cache=use_cache,
                    progress=progress,
                )
                times["code_training"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                rows.append(trained_row("learned", learned_encoder, tl))
                times["evaluation"] += time.perf_counter() - t0

                # -- GCC and BACC: N = k + 1, S = 1, and the natural operating point ---------------
                settings = [
                    ("", k, k + 1, 1, None),
                    ("-natural", g_nat * k, g_nat * (k + 1), g_nat, 1),
                ]
                for suffix, kk, n, s, nat in settings:
                    if kk > len(ev):
                        continue
                    if nat is None:  # every single-straggler pattern
                        patterns = "all single"

                        def masks_for(base_key, num_batches, n=n):
                            return single_erasures(n)  # the same patterns for every batch

                    else:
                        patterns = f"{trials} random S={s}"

                        def masks_for(base_key, num_batches, n=n, s=s, kk=kk):
                            return np.stack(
                                [
                                    np.asarray(
                                        sample_masks(
                                            jax.random.fold_in(jax.random.fold_in(base_key, kk), b),
                                            n,
                                            num=trials,
                                            stragglers=s,
                                        )
                                    )
                                    for b in range(num_batches)
                                ]
                            )

                    k_cv, k_ev = jax.random.split(jax.random.fold_in(key, n))
                    # λ_dec by cross-validation on training images (GCC only)
                    t0 = time.perf_counter()
                    n_cv = len(cv) // kk
                    lam = grid[0]
                    if n_cv >= 1 and len(grid) > 1:
                        xc = x_cv[: n_cv * kk].reshape(n_cv, kk, *x_cv.shape[1:])
                        pc = probs_cv[: n_cv * kk].reshape(n_cv, kk, -1)
                        code0 = SplineCode.chebyshev(num_inputs=kk, num_workers=n, lam_dec=0.0)
                        yt = group_outputs(code0, f_probs, xc)
                        masks = masks_for(k_cv, n_cv)
                        rmse = []
                        for lam_c in grid:
                            c = SplineCode.chebyshev(num_inputs=kk, num_workers=n, lam_dec=lam_c)
                            vals, st = decode_groups(c, yt, masks)
                            err = np.linalg.norm(np.asarray(vals) - pc[:, None], axis=-1)
                            bad = np.asarray(st) != 0
                            rmse.append(np.inf if bad.any() else float(err.mean()))
                        lam = grid[int(np.argmin(rmse))]
                    t_tune = time.perf_counter() - t0
                    times["tuning"] += t_tune

                    t0 = time.perf_counter()
                    _, xb, yb, bb, _ = groups(kk)
                    masks = masks_for(k_ev, xb.shape[0])
                    for name, code in (
                        ("GCC", SplineCode.chebyshev(num_inputs=kk, num_workers=n, lam_dec=lam)),
                        ("BACC", BerrutCode.chebyshev(num_inputs=kk, num_workers=n)),
                    ):
                        yt = group_outputs(code, f_probs, xb)
                        vals, st = decode_groups(code, yt, masks)
                        row = common(
                            name + suffix, None, "probs", n, kk, s, patterns, (n - kk) / kk
                        )
                        row.update(score(vals, st, np.ones(1, bool), bb, yb))
                        row.update(
                            train_time_s=0.0,
                            from_cache=None,
                            val_metric=None,
                            lam_dec=lam if name == "GCC" else None,
                            tuning_time_s=t_tune if name == "GCC" else 0.0,
                        )
                        rows.append(row)
                    times["evaluation"] += time.perf_counter() - t0
                if progress:
                    tqdm.write(f"{desc}: done", file=sys.stderr)

    comparison = []
    for row in rows:
        info = model_info[row["model"]]
        base = info["eval_accuracy"]
        row["gap_points"] = 100.0 * (base - row["overall"]["mean"])
        # every row states the base model it codes for (ParM like for like)
        row["base_model"] = row["model"]
        row["base_test_accuracy"] = info["test_accuracy"]
        row["base_epochs"] = info["epochs"]
        if row["method"].startswith("ParM") and row["k"] == 2:
            comparison.append(
                {
                    "model": row["model"],
                    "method": row["method"],
                    "base_accuracy": base,
                    "base_epochs": info["epochs"],
                    "overall": row["overall"]["mean"],
                    "gap_points": row["gap_points"],
                    "published_gap_points": PUBLISHED["parm_gap_points"],
                    "published_base_model": PUBLISHED["base_model"],
                    "like_for_like": row["model"] == PUBLISHED["base_model"],
                }
            )
    times["total"] = time.perf_counter() - t_start
    config = {
        "interrupted": stop.interrupted,
        "dataset": ds.name,
        "models": list(models),
        "ks": list(ks),
        "base_epochs": base_epochs,
        "code_epochs": code_epochs,
        "code_train_size": code_train_size,
        "eval_images": eval_images,
        "concat": bool(concat),
        "learned_encoder": learned_encoder,
        "learned_hidden": learned_hidden,
        "gcc_groups": g_nat,
        "gcc_trials": trials,
        "cv_images": cv_images,
        "lam_dec_grid": list(grid),
        "batch_size": int(batch_size),
        "dtype": str(dtype),
    }
    payload = {
        "dataset": {
            "name": ds.name,
            "requested": requested,
            "note": note,
            "num_code_train": int(x_code.shape[0]),
            "num_eval": int(len(ev)),
            "num_cv": int(len(cv)),
        },
        "models": model_info,
        "rows": rows,
        "published": PUBLISHED,
        "comparison": comparison,
    }
    return stop.finish(
        ExperimentResult(
            "compare_learned",
            json_clean(config),
            {"seed": int(seed)},
            METRIC_DEFINITIONS,
            json_clean(payload),
            times,
        )
    )


def _all_outputs_parm(row: dict, vals, st, yg: np.ndarray, logits: np.ndarray) -> dict:
    """All-``k`` accuracy over the ``k + 1`` single-erasure patterns of a systematic code.

    The ``k`` base-erasure patterns are the decoded ones; the parity-erasure pattern returns
    the base outputs themselves.
    """
    pred = np.argmax(np.asarray(vals), axis=-1)  # (g, k, k)
    ok = (np.asarray(st) == 0)[..., None]
    hits = ((pred == yg[:, None, :]) & ok).sum(axis=(1, 2))
    hits = hits + (np.argmax(logits, axis=-1) == yg).sum(axis=1)
    k = yg.shape[1]
    per_group = hits / (k * (k + 1))
    m, ci = mean_ci(per_group.astype(float)) if per_group.size > 1 else (per_group.mean(), np.nan)
    return {"mean": float(m), "ci95": float(ci)}


# -- reporting -----------------------------------------------------------------------------------


METRIC_DEFINITIONS = {
    "recon": "fraction of reconstructed outputs whose argmax equals the base model's argmax "
    "(ParM's reconstruction accuracy; GCC/BACC: all K outputs of every pattern count)",
    "overall": "fraction of those outputs whose argmax equals the true label (ParM's overall "
    "accuracy)",
    "gap_points": "base-model accuracy on the same images minus overall, in percentage points",
    "all_overall": "accuracy over all k outputs of a group when one of the N workers (any) is "
    "unavailable",
    "ci95": "95% half-width with each group (batch) as one sample",
    "train_time_s": "wall time of the training that produced the code's weights (from the cache "
    "metadata when loaded)",
}


def _view(result: ExperimentResult) -> dict:
    """Configuration, results and timing in one dict (what the report functions read)."""
    return {"config": result.config, "timing_s": result.timing_s, **result.results}


def _pct(stat: dict | None) -> str:
    if stat is None or stat.get("mean") is None:
        return "—"
    ci = stat.get("ci95")
    return f"{100 * stat['mean']:.2f}" + ("" if ci is None else f"±{100 * ci:.2f}")


def format_compare_table(result: ExperimentResult) -> str:
    """Plain-text table of a :func:`run_compare_learned` result (accuracies in %)."""
    result = _view(result)
    ds, cfg = result["dataset"], result["config"]
    lines = [
        f"compare-learned on {ds['name']} ({ds['num_eval']} test images; codes trained on "
        f"{ds['num_code_train']} training images for {cfg['code_epochs']} epochs)"
        + (f"\nnote: {ds['note']}" if ds["note"] else ""),
        "degraded mode, one unavailable output per group (GCC/BACC-natural: S = g of N); "
        "accuracies in % ± 95% CI",
        "",
    ]
    if cfg.get("interrupted"):
        lines.insert(1, "INTERRUPTED (Ctrl-C): only the rows finished are below.")
    for model, info in result["models"].items():
        lines.append(
            f"{model}: test accuracy {100 * info['test_accuracy']:.2f}%, "
            f"{100 * info['eval_accuracy']:.2f}% on the evaluation images; "
            f"{info['epochs']} epochs, {info['train_time_s']:.1f} s of training"
            + (" (cached)" if info["from_cache"] else "")
        )
    head = (
        f"{'model':<7}{'k':>2}  {'method':<13}{'K/N, S':>12}{'recon':>14}{'overall':>14}"
        f"{'gap pts':>9}{'all-k':>14}{'train s':>9}  {'λ_dec':>7}"
    )
    lines += ["", head, "-" * len(head)]
    for r in result["rows"]:
        shape = f"{r['num_inputs']}/{r['num_workers']}, {r['stragglers']}"
        lam = "" if r["lam_dec"] is None else format(r["lam_dec"], "g")
        train = f"{r['train_time_s']:.1f}" + ("*" if r.get("from_cache") else "")
        lines.append(
            f"{r['model']:<7}{r['k']:>2}  {r['method']:<13}{shape:>12}{_pct(r['recon']):>14}"
            f"{_pct(r['overall']):>14}{r['gap_points']:>9.2f}{_pct(r['all_overall']):>14}"
            f"{train:>9}  {lam:>7}"
        )
    lines += [
        "",
        "recon: argmax equal to the base model's; overall: equal to the true label; gap: base "
        "accuracy − overall; all-k: all outputs of a group with one worker unavailable; "
        "train s: training time of the code (* = loaded from the cache; GCC/BACC train nothing)",
    ]
    pub = result["published"]
    if result["comparison"]:
        lines += [
            "",
            f"published ParM gap, {pub['dataset']} {pub['base_model']} k=2: "
            f"{pub['parm_gap_points']:.2f} points ({pub['accuracy']['deployed']} → "
            f"{pub['accuracy']['reconstructed']}%)",
        ]
        for c in result["comparison"]:
            epochs = c.get("base_epochs")
            lines.append(
                f"  {c['model']:<7}{c['method']:<13} gap {c['gap_points']:.2f} points "
                f"({100 * c['base_accuracy']:.2f} → {100 * c['overall']:.2f}%; base {c['model']}"
                + ("" if epochs is None else f", {epochs} epochs")
                + ")"
                + (
                    ""
                    if c.get("like_for_like")
                    else f" — NOT like for like: the published "
                    f"number is a {pub['base_model']} base; compare {c['model']} rows only with "
                    f"each other"
                )
            )
        lines.append(
            f"  a {pub['base_model']} base on {pub['dataset']} at the published budget is not "
            "run here (no ResNet-18 in gcc_jax.nn.models); the gap depends on how "
            "long the base model was trained (its epochs are in every row of the JSON)"
        )
    t = result["timing_s"]
    lines.append(
        f"\ntime: base training {t['base_training']:.1f} s, code training "
        f"{t['code_training']:.1f} s, GCC λ tuning {t['tuning']:.1f} s, evaluation "
        f"{t['evaluation']:.1f} s, total {t['total']:.1f} s"
    )
    return "\n".join(lines)


_COLORS = {
    "ParM-sum": "C1",
    "ParM-concat": "C5",
    "learned": "C2",
    "GCC": "C0",
    "BACC": "C3",
    "GCC-natural": "C9",
    "BACC-natural": "C6",
}


def plot_compare(result: ExperimentResult):
    """Bars of degraded-mode accuracy per ``k`` and method; one column per model.

    Top row: overall accuracy (vs labels) with the base model's accuracy dashed; bottom row:
    reconstruction accuracy (vs the base argmax). Error bars are 95% CIs.
    """
    result = _view(result)
    models = list(result["models"])
    fig, axes = new_figure(2, len(models), figsize=(6.5 * len(models), 7.5), squeeze=False)
    ks = result["config"]["ks"]
    methods = [m for m in METHODS if any(r["method"] == m for r in result["rows"])]
    width = 0.8 / max(len(methods), 1)
    for col, model in enumerate(models):
        for row_i, metric in enumerate(("overall", "recon")):
            ax = axes[row_i, col]
            ends = [0.0, 100.0]  # the symmetric CIs are drawn in full, even past 0 or 100 %
            for j, method in enumerate(methods):
                xs, ys, es = [], [], []
                for i, k in enumerate(ks):
                    match = [
                        r
                        for r in result["rows"]
                        if r["model"] == model and r["k"] == k and r["method"] == method
                    ]
                    if match and match[0][metric]["mean"] is not None:
                        xs.append(i + (j - (len(methods) - 1) / 2) * width)
                        ys.append(100 * match[0][metric]["mean"])
                        es.append(100 * (match[0][metric]["ci95"] or 0.0))
                ax.bar(xs, ys, width, yerr=es, color=_COLORS.get(method), label=method, capsize=2)
                ends += [y - e for y, e in zip(ys, es, strict=True)]
                ends += [y + e for y, e in zip(ys, es, strict=True)]
            if metric == "overall":
                base = 100 * result["models"][model]["eval_accuracy"]
                ax.axhline(base, color="k", ls="--", lw=1, label="base model")
            ax.set_xticks(range(len(ks)))
            ax.set_xticklabels([f"k={k}" for k in ks])
            ax.set_ylabel(
                "accuracy vs true labels (%)"
                if metric == "overall"
                else "agreement with the base model (%)"
            )
            ax.set_title(f"{model} on {result['dataset']['name']}: {metric}", fontsize=10)
            ax.set_ylim(min(ends) - 2.0, max(ends) + 2.0)
            ax.grid(True, axis="y", alpha=0.3)
    legend_outside(axes[0, -1], fontsize=7)  # outside the data, next to the last column
    fig.suptitle("Degraded mode: accuracy on the queries whose output was unavailable (±95% CI)")
    fig.tight_layout()
    return fig


def save_compare(result: ExperimentResult, out: str | Path) -> dict[str, Path]:
    """Write ``compare_learned.json``, ``compare_learned.txt`` and ``compare_learned.png``."""
    paths = save_result(
        result,
        out,
        summary=format_compare_table(result),
        figures={"compare_learned": plot_compare(result)},
    )
    paths["plot"] = paths.pop("compare_learned")
    return paths
