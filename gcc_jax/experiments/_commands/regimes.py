"""``gcc-jax regimes``: flags, sizes and rules of :mod:`gcc_jax.experiments.regimes`."""

import argparse

from .._checks import SEARCH, choice, count, nested, real
from .._command import Command, explicit, float_list, merge_config, str_list
from ._search import add_search_arguments, search_config

__all__ = [
    "CODES",
    "COMMAND",
    "DEFAULTS",
    "DEFAULT_SEARCH",
    "FILLS",
    "FULL",
    "MODES",
    "ORDERS",
    "TOY",
    "WORKLOADS",
]

CODES = ("GCC", "BACC", "LCC", "uncoded", "replication", "ParM")
"""The codes of the map."""
ORDERS = ("given", "sort", "pca", "spectral", "greedy")
"""Input orders (:func:`gcc_jax.input_order`); ``sort`` applies to scalar inputs only."""
FILLS = ("zero", "mean", "interpolate")
"""Fill rules of the codes that can lose an input (uncoded, replication, ParM)."""
MODES = ("random", "worst")
"""Straggler models: uniformly random ``S``-subsets and the worst pattern found."""
WORKLOADS = ("xsinx", "vector_map", "localization", "lenet_logits", "lenet_softmax")
"""Worker functions of the map."""
DEFAULT_SEARCH = dict(restarts=2, proposals=32, max_iters=5)
"""Local-search budget of the worst case (:func:`gcc_jax.worst_case_mask`), by default."""

DEFAULTS = dict(
    num_inputs=20,
    ratios=(1.1, 1.25, 1.5, 2.0, 3.0),
    fractions=(0.0, 0.1, 0.2, 0.3),
    workloads=WORKLOADS,
    orders=("given", "sort", "spectral"),
    fills=FILLS,
    num_trials=10,
    num_batches=3,
    num_cv_batches=3,
    worst_case_batches=1,
    epochs=10,
    parm_epochs=10,
    dataset="fashion_mnist",
)
"""Keyword arguments of :func:`~gcc_jax.experiments.regimes.run_regimes` (the command line's
defaults): the reduced map of ``docs/results.md``."""

FULL = dict(
    fractions=(0.0, 0.05, 0.1, 0.2, 0.3),
    num_trials=20,
    num_batches=5,
    num_cv_batches=5,
    worst_case_batches=2,
    search=dict(restarts=4, proposals=64, max_iters=10),
)
"""A larger map (over :data:`DEFAULTS`; flags ``--fractions 0,0.05,0.1,0.2,0.3 --trials 20
--batches 5 --cv-batches 5 --worst-batches 2 --restarts 4 --proposals 64 --max-iters 10``);
it runs for hours on two CPU cores."""
TOY = dict(
    num_inputs=4,
    ratios=(1.5, 2.0),
    fractions=(0.0, 0.25),
    workloads=("xsinx",),
    orders=("given", "sort"),
    fills=("zero", "mean"),
    num_trials=4,
    num_batches=2,
    num_cv_batches=2,
    worst_case_batches=1,
    lam_enc_grid=(0.0, 1e-4),
    lam_dec_grid=(0.0, 1e-6, 1e-2),
    search=dict(restarts=1, proposals=8, max_iters=2),
    epochs=1,
    parm_epochs=2,
    dataset="digits",
)
"""Toy sizes (``--toy``)."""


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--num-inputs", "-K", type=int, help="K inputs per coded computation (20)")
    p.add_argument("--ratios", type=float_list, help="redundancies N/K (1.1,1.25,1.5,2,3)")
    p.add_argument("--fractions", type=float_list, help="straggler fractions (0,.1,.2,.3)")
    p.add_argument("--workloads", type=str_list, help=f"subset of {','.join(WORKLOADS)}")
    p.add_argument("--codes", type=str_list, help=f"subset of {','.join(CODES)}")
    p.add_argument("--modes", type=str_list, help="random,worst (both)")
    p.add_argument(
        "--orders",
        type=str_list,
        help=f"input orders, subset of {','.join(ORDERS)} (given,sort,spectral)",
    )
    p.add_argument("--fills", type=str_list, help=f"fill rules, subset of {','.join(FILLS)} (all)")
    p.add_argument("--trials", type=int, help="random patterns per batch and cell (10)")
    p.add_argument("--batches", type=int, help="evaluation batches (3)")
    p.add_argument("--cv-batches", type=int, help="held-out batches for GCC's λ (3)")
    p.add_argument("--worst-batches", type=int, help="batches searched for the worst case (1)")
    add_search_arguments(p, DEFAULT_SEARCH)
    p.add_argument("--dataset", help="the classifier's data set (fashion_mnist)")
    p.add_argument("--data-path", help="directory of the data files")
    p.add_argument("--epochs", type=int, help="LeNet-5 training epochs (10)")
    p.add_argument("--parm-epochs", type=int, help="parity-model training epochs (10)")
    p.add_argument("--no-cache", action="store_true", help="always train; write no checkpoint")


def _config(args: argparse.Namespace, toy: bool) -> dict:
    flags = explicit(
        args,
        *("num_inputs", "ratios", "fractions", "workloads", "codes", "modes", "dataset"),
        *("orders", "fills"),
        *("data_path", "epochs", "parm_epochs"),
        num_trials="trials",
        num_batches="batches",
        num_cv_batches="cv_batches",
        worst_case_batches="worst_batches",
    )
    config = merge_config(DEFAULTS, TOY if toy else None, flags)
    config["search"] = search_config(args, config.get("search", DEFAULT_SEARCH))
    return config | dict(use_cache=not args.no_cache)


COMMAND = Command(
    name="regimes",
    help="when does coding pay? the winner among GCC, BACC, LCC, uncoded, replication, ParM",
    description="The regime map: for x·sin(x), a smooth map R²→R³ and a LeNet-5's logits and "
    "softmax (Fashion-MNIST, or digits when absent), over redundancy N/K and straggler fraction "
    "(random and worst case), the winner and its margin over the runner-up in MSE, mean L2 "
    "error and accuracy among GCC (λ by CV on held-out batches), BACC and LCC (where it "
    "applies) in each input order, and uncoded, replication at the same N and ParM with "
    "N = K + K/k with each fill rule. Prints winner tables and a "
    "plain-language summary; writes regimes.json, regimes.txt and one heat map per workload. "
    "The defaults are a reduced map (20 cells x 4 workloads, 3 batches x 10 patterns per "
    "cell, λ by CV on 3 batches, worst case on 1 batch); gcc_jax.experiments.regimes.FULL "
    "lists the flags of a larger one.",
    add_arguments=_add_arguments,
    config=_config,
    module="gcc_jax.experiments.regimes",
    defaults=DEFAULTS | dict(codes=CODES, modes=MODES, search=DEFAULT_SEARCH),
    rules=(
        count("num_inputs", "--num-inputs/-K", 2),
        real("ratios", "--ratios", 1.0, lo_open=True),
        real("fractions", "--fractions", 0.0, 1.0, hi_open=True),
        choice("workloads", "--workloads", WORKLOADS),
        choice("codes", "--codes", CODES),
        choice("modes", "--modes", MODES),
        choice("orders", "--orders", ORDERS),
        choice("fills", "--fills", FILLS),
        count("num_trials", "--trials"),
        count("num_batches", "--batches"),
        count("num_cv_batches", "--cv-batches"),
        count("worst_case_batches", "--worst-batches"),
        count("epochs", "--epochs"),
        count("parm_epochs", "--parm-epochs"),
        nested("search", SEARCH),
    ),
)
