"""``gcc-jax run``: flags, sizes and rules of :mod:`gcc_jax.experiments.dnn`."""

import argparse

from .._checks import SEARCH, choice, count, lam, nested, real, sizes
from .._command import (
    Command,
    explicit,
    float_list,
    int_list,
    json_dict,
    merge_config,
    str_list,
)
from ._search import add_search_arguments, search_config
from .regimes import FILLS

__all__ = [
    "CODES",
    "COMMAND",
    "DEFAULTS",
    "DEFAULT_CODES",
    "DEFAULT_LAM_DEC_GRID",
    "DEFAULT_LAM_ENC_GRID",
    "DEFAULT_SEARCH",
    "toy_config",
]

CODES = ("GCC", "GCC-interp", "GCC-tuned", "BACC", "uncoded", "replication")
"""Codes `run_dnn` can compare (case-insensitive names): GCC with λ by grid CV, GCC with
``λ_enc = λ_dec = 0`` (interpolation), GCC with gradient-tuned λ (:func:`gcc_jax.tuning.tune`
from the CV choice), BACC, uncoded, replication."""
DEFAULT_CODES = ("GCC", "GCC-interp", "BACC", "uncoded", "replication")
"""Codes run by default (``GCC-tuned`` costs a gradient run per ``S``; ask for it)."""
DEFAULT_LAM_ENC_GRID = (0.0, *(10.0**e for e in range(-10, -1)))
"""GCC encoder λ candidates of the cross-validation: 0 (interpolating encoder), 10⁻¹⁰ … 10⁻²."""
DEFAULT_LAM_DEC_GRID = (0.0, *(10.0**e for e in range(-10, 1)))
"""GCC decoder λ candidates: 0 (interpolation), 10⁻¹⁰ … 10⁰ (where the fit is a straight line)."""
DEFAULT_SEARCH = dict(restarts=8, proposals=128, max_iters=25)
"""Local-search budget of the worst case (see :func:`gcc_jax.worst_case_mask`)."""

DEFAULTS = dict(
    num_workers=40,
    num_inputs=20,
    stragglers=(0, 2, 4, 6, 8, 10),
    num_trials=20,
    num_batches=10,
    num_cv_batches=5,
    codes=DEFAULT_CODES,
    lam_enc_grid=DEFAULT_LAM_ENC_GRID,
    lam_dec_grid=DEFAULT_LAM_DEC_GRID,
    worst_case_batches=3,
    search=DEFAULT_SEARCH,
    tune_steps=100,
    epochs=20,
    batch_size=64,
    lr=1e-3,
)
"""Keyword defaults of :func:`~gcc_jax.experiments.dnn.run_dnn` that the rules read."""

_TOY = dict(
    num_workers=10,
    num_inputs=4,
    stragglers=(0, 3),
    num_trials=4,
    num_batches=2,
    num_cv_batches=2,
    lam_enc_grid=(0.0, 1e-6),
    lam_dec_grid=(0.0, 1e-6, 1e-1),
    tune_steps=3,
    epochs=1,
    search=dict(restarts=1, proposals=8, max_iters=2),
)


def toy_config() -> dict:
    """Tiny keyword arguments for :func:`~gcc_jax.experiments.dnn.run_dnn` (seconds; what
    ``GCC_JAX_TOY=1`` runs)."""
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in _TOY.items()}


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset", default="digits", help="digits (default), fashion_mnist, mnist, cifar10"
    )
    p.add_argument("--data-path", default=None, help="directory of the data files")
    p.add_argument("--model", default="lenet5", help="lenet5 (default), mlp, cnn, vit")
    p.add_argument(
        "--model-kwargs",
        type=json_dict,
        default=None,
        help="architecture options as JSON, e.g. '{\"dim\": 32}' for the ViT",
    )
    p.add_argument("--num-workers", "-N", type=int, help="N (default 40)")
    p.add_argument("--num-inputs", "-K", type=int, help="K images per batch (default 20)")
    p.add_argument(
        "--stragglers", "-S", type=int_list, help="comma-separated S values (default 0,2,...,10)"
    )
    p.add_argument("--trials", type=int, help="straggler sets per batch and S (default 20)")
    p.add_argument("--batches", type=int, help="evaluation batches (default 10)")
    p.add_argument(
        "--cv-batches",
        type=int,
        help="batches of held-out training images for the λ CV (default 5)",
    )
    p.add_argument(
        "--codes",
        type=str_list,
        default=DEFAULT_CODES,
        help="comma-separated codes (default gcc,gcc-interp,bacc,uncoded,replication; also "
        "gcc-tuned)",
    )
    p.add_argument(
        "--lam-enc-grid", type=float_list, help="GCC encoder λ candidates (default 0,1e-10..1e-2)"
    )
    p.add_argument(
        "--lam-dec-grid", type=float_list, help="GCC decoder λ candidates (default 0,1e-10..1)"
    )
    p.add_argument("--tune-steps", type=int, help="gradient steps of GCC-tuned (default 100)")
    p.add_argument(
        "--fill",
        choices=FILLS,
        default="mean",
        help="uncoded's and replication's estimate of a lost result (default mean)",
    )
    p.add_argument("--no-worst-case", action="store_true", help="skip the worst-case search")
    p.add_argument("--worst-case-batches", type=int, default=3, help="batches searched (3)")
    add_search_arguments(p, DEFAULT_SEARCH)
    p.add_argument("--epochs", type=int, help="training epochs (default 20)")
    p.add_argument("--batch-size", type=int, default=64, help="training batch size (64)")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (1e-3)")
    p.add_argument("--no-cache", action="store_true", help="always train; write no checkpoint")


def _config(args: argparse.Namespace, toy: bool) -> dict:
    sizes = explicit(  # the sizing flags, which --toy sets
        args,
        *("num_workers", "num_inputs", "stragglers", "lam_enc_grid", "lam_dec_grid", "epochs"),
        "tune_steps",
        num_trials="trials",
        num_batches="batches",
        num_cv_batches="cv_batches",
    )
    config = merge_config({}, toy_config() if toy else None, sizes)
    config["search"] = search_config(args, config.get("search", DEFAULT_SEARCH))
    return (
        config
        | explicit(
            args,
            *("dataset", "model", "model_kwargs", "data_path", "codes", "worst_case_batches"),
            *("batch_size", "lr", "fill"),
        )
        | dict(worst_case=not args.no_worst_case, use_cache=not args.no_cache)
    )


COMMAND = Command(
    name="run",
    help="the main job: coded inference of a trained classifier, GCC vs BACC vs uncoded",
    description="Trains (or loads from the cache) a classifier, then measures coded "
    "inference as in LeTCC §5: K test images per coded batch over N workers, random "
    "straggler sets per S (and the worst case), GCC with (lam_enc, lam_dec) chosen by grid "
    "cross-validation on held-out training images (never test images), BACC, uncoded and "
    "replication. Prints tables (rows: codes, columns: S) of MSE, RMSE = √MSE, mean L2 "
    "error, accuracy and RelAcc with 95% CIs and writes results.json (schema: "
    "gcc_jax.experiments.dnn), results.txt, results.png and cv.png into --out. Defaults: "
    "LeNet-5 on scikit-learn's digits, N=40, K=20, S=0..10. Explicit flags win over --toy.",
    add_arguments=_add_arguments,
    config=_config,
    module="gcc_jax.experiments.dnn",
    defaults=DEFAULTS,
    rules=(
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
        nested("search", SEARCH),
    ),
)
