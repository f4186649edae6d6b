"""``gcc-jax regimes``: flags, sizes and rules of :mod:`gcc_jax.experiments.regimes`."""

from .._checks import choice, count
from .._command import Command
from ._flags import Flags, flag, one_of, own, within

__all__ = [
    "CODES",
    "COMMAND",
    "DEFAULTS",
    "FILLS",
    "FULL",
    "MODES",
    "ORDERS",
    "REGIMES_SEARCH",
    "TOY",
    "WORKLOADS",
]

CODES = ("GCC", "GCC-tuned", "BACC", "LCC", "uncoded", "replication", "ParM")
"""The codes of the map (``GCC-tuned``: GCC whose λs and nodes are tuned by gradient steps on the
held-out batches, from GCC's CV choice; not among the defaults: one tuning per cell and order,
each compiled anew, adds about 10-20 s per cell on two CPU cores)."""
ORDERS = ("given", "sort", "pca", "spectral", "greedy")
"""Input orders (:func:`gcc_jax.input_order`); ``sort`` applies to scalar inputs only."""
FILLS = ("zero", "mean", "interpolate")
"""Fill rules of the codes that can lose an input (uncoded, replication, ParM)."""
MODES = ("random", "worst")
"""Straggler models: uniformly random ``S``-subsets and the worst pattern found."""
WORKLOADS = ("xsinx", "vector_map", "localization", "lenet_logits", "lenet_softmax")
"""Worker functions of the map."""
REGIMES_SEARCH = dict(restarts=16, proposals=512, max_iters=200)
"""Local-search budget of the worst case (:func:`gcc_jax.worst_case_mask`), by default: 16
chains × 512 proposals × 200 steps, the smallest budget past which the bound stops moving on the
map's x·sin x cells (smaller budgets can miss the worst case several-fold at N = 40). A search
takes well under a second next to its compilation."""

DEFAULTS = dict(
    num_inputs=20,
    ratios=(1.1, 1.25, 1.5, 2.0, 3.0),
    fractions=(0.0, 0.1, 0.2, 0.3),
    workloads=WORKLOADS,
    codes=tuple(c for c in CODES if c != "GCC-tuned"),
    modes=MODES,
    orders=("given", "sort", "spectral"),
    fills=FILLS,
    num_trials=10,
    num_batches=3,
    num_cv_batches=3,
    worst_case_batches=1,
    epochs=10,
    parm_epochs=10,
    tune_steps=100,
    dataset="fashion_mnist",
    data_path=None,
    use_cache=True,
)
"""Keyword arguments of :func:`~gcc_jax.experiments.regimes.run_regimes` (the command line's
defaults): the reduced map of ``docs/results.md``."""

FULL = dict(
    fractions=(0.0, 0.05, 0.1, 0.2, 0.3),
    num_trials=20,
    num_batches=5,
    num_cv_batches=5,
    worst_case_batches=2,
    search=dict(restarts=32, proposals=1024, max_iters=400),
)
"""A larger map (over :data:`DEFAULTS`; flags ``--fractions 0,0.05,0.1,0.2,0.3 --masks 20
--batches 5 --cv-batches 5 --worst-case-batches 2 --restarts 32 --proposals 1024
--max-iters 400``);
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
    tune_steps=3,
    dataset="digits",
)
"""Toy sizes (``--toy``)."""


COMMAND = Command(
    name="regimes",
    help="when does coding pay? the winner among GCC, BACC, LCC, uncoded, replication, ParM",
    description="The regime map: for x·sin(x), a smooth map R²→R³, a small CNN's box on a "
    "synthetic localization task (a regression) and a LeNet-5's logits and softmax "
    "(Fashion-MNIST, or digits when absent), over redundancy N/K and straggler fraction "
    "(random and worst case), the winner and its margin over the runner-up in MSE, mean L2 "
    "error and accuracy among GCC (λ by CV on held-out batches), BACC and LCC (where it "
    "applies) in each input order, and uncoded, replication at the same N and ParM with "
    "N = K + K/k with each fill rule. Prints winner tables and a "
    "plain-language summary; writes regimes.json, regimes.txt and one heat map per workload. "
    "The defaults are a reduced map (20 cells x 5 workloads, 3 batches x 10 patterns per "
    "cell, λ by CV on 3 batches, worst case on 1 batch); gcc_jax.experiments.regimes.FULL "
    "lists the flags of a larger one.",
    module="gcc_jax.experiments.regimes",
    flags=Flags(
        DEFAULTS | dict(search=REGIMES_SEARCH),
        TOY,
        own=(
            own("--ratios", "redundancies N/K", check=within(1.0, lo_open=True)),
            own("--fractions", "straggler fractions", check=within(0.0, 1.0, hi_open=True)),
            own("--modes", "straggler models", check=one_of(MODES)),
            own("--orders", f"input orders: {', '.join(ORDERS)}", check=one_of(ORDERS)),
            own("--fills", "fill rules of uncoded, replication and ParM", check=one_of(FILLS)),
            own("--tune-steps", "gradient steps of GCC-tuned (its λs and nodes)", check=count),
        ),
        help=dict(
            num_trials="random patterns per batch and cell",
            dataset="the classifier's data set",
            epochs="training epochs of the LeNet-5 and the localizer (each cached)",
        ),
        rules=(
            count("num_inputs", flag("num_inputs"), 2),
            choice("workloads", flag("workloads"), WORKLOADS),
            choice("codes", flag("codes"), CODES),
        ),
    ),
)
