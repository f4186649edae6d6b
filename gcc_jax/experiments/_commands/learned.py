"""``gcc-jax compare-learned``: flags, sizes and rules of :mod:`gcc_jax.experiments.learned`."""

from .._checks import dataset
from .._command import Command
from ._flags import Flags, at_least, own

__all__ = ["COMMAND", "DEFAULTS", "DEFAULT_LAM_DEC_GRID", "toy_config"]

DEFAULT_LAM_DEC_GRID = (0.0, 1e-8, 1e-6, 1e-4, 1e-2)
"""GCC decoder λ candidates (λ_enc = 0)."""

DEFAULTS = dict(
    dataset=None,
    data_path=None,
    models=("mlp", "lenet5"),
    ks=(2, 3, 4),
    base_epochs=None,
    code_epochs=4,
    code_train_size=12000,
    eval_images=10000,
    learned_hidden=256,
    gcc_groups=10,
    gcc_trials=10,
    cv_images=1000,
    lam_dec_grid=DEFAULT_LAM_DEC_GRID,
    learned_encoder="mlp",
    concat=True,
    use_cache=True,
)
"""Keyword defaults of :func:`~gcc_jax.experiments.learned.run_compare_learned` that the rules
read."""

_TOY = dict(
    dataset="digits",
    models=("mlp",),
    ks=(2,),
    base_epochs=2,
    code_epochs=1,
    code_train_size=600,
    eval_images=24,
    gcc_groups=2,
    gcc_trials=2,
    cv_images=24,
    lam_dec_grid=(0.0,),
)


def toy_config() -> dict:
    """Tiny keyword arguments for :func:`~gcc_jax.experiments.learned.run_compare_learned`
    (what ``GCC_JAX_TOY=1`` runs)."""
    return dict(_TOY)


_DATASET_HELP = (
    "data set (default: fashion_mnist, or digits when its files are absent; a data set named "
    "here must be found)"
)


_COUNT = at_least(1, optional=True)  # None: the run's own choice (``--all-train``: every image)


def _all_train(config: dict, toy: bool) -> dict:
    """``--all-train``: no limit on the codes' training images."""
    if config.pop("all_train", False):
        config["code_train_size"] = None
    return config


COMMAND = Command(
    name="compare-learned",
    help="ParM and a learned code vs GCC and BACC in degraded mode (one unavailable output)",
    description="Trains (or loads from the cache) MLP and LeNet-5 base models on "
    "Fashion-MNIST (scikit-learn's digits when its files are absent and no --dataset is "
    "given), then for k = 2, 3, 4: "
    "ParM parity models (sum encoder; concatenation for k = 2, 4) and a learned "
    "encoder/decoder (r = 1), and GCC and BACC both at N = k+1, S = 1 and at their natural "
    "operating point K = g·k, N = g·(k+1), S = g (the same extra workers per input). "
    "Reports degraded-mode reconstruction and overall accuracy on the unavailable outputs, "
    "the gap to the base model (ParM published 1.79 points on Fashion-MNIST, k = 2) and "
    "each code's training time; writes compare_learned.json, .txt and .png into --out. "
    "Every trained model is cached for reruns.",
    module="gcc_jax.experiments.learned",
    flags=Flags(
        DEFAULTS,
        _TOY,
        own=(
            own("--models", "base models"),
            own("--base-epochs", "base epochs; by default mlp 10, lenet5 3", int, check=_COUNT),
            own("--code-epochs", "code training epochs", check=_COUNT),
            own("--code-train-size", "training images for the codes", check=_COUNT),
            own("--eval-images", "test images", check=at_least(2, optional=True)),
            own("--no-concat", "skip ParM's concatenation encoder", key="concat", switch=False),
            own("--learned-encoder", "the learned encoder", choices=("mlp", "conv")),
            own("--learned-hidden", "MLP encoder width / conv channels", check=_COUNT),
            own("--gcc-groups", "g of GCC's natural point", check=_COUNT),
            own(
                "--gcc-masks",
                "random straggler sets per batch there",
                key="gcc_trials",
                aliases=("--gcc-trials",),
                check=_COUNT,
            ),
            own("--cv-images", "images for GCC's λ CV", check=at_least(2, optional=True)),
            own("--all-train", "train the codes on every image", switch=True),
        ),
        help=dict(ks="values of k", dataset=_DATASET_HELP),
        rules=(dataset(),),
        finish=_all_train,
    ),
)
