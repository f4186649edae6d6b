"""``gcc-jax run``: flags, sizes and rules of :mod:`gcc_jax.experiments.dnn`."""

from .._checks import ConfigError, Rule, choice, count
from .._command import Command, json_dict
from ._flags import MODELS, Flags, flag, own, shared_sizes, within
from .regimes import FILLS

__all__ = [
    "CODES",
    "COMMAND",
    "DEFAULTS",
    "DEFAULT_CODES",
    "DEFAULT_LAM_DEC_GRID",
    "DEFAULT_LAM_ENC_GRID",
    "LOCALIZATION",
    "RUN_SEARCH",
    "is_localization",
    "localization_conflict",
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
RUN_SEARCH = dict(restarts=8, proposals=128, max_iters=25)
"""``run``'s worst-case local-search budget (chains, proposals, steps of
:func:`gcc_jax.worst_case_mask`): those of the library's
:data:`gcc_jax.evaluation.DEFAULT_SEARCH`, written out so that the command line parses its
arguments without importing JAX."""
LOCALIZATION = "localization"
"""The regression data set: boxes of digits on a 40×40 canvas, predicted by the small CNN
localizer (:mod:`gcc_jax.experiments._localizer`)."""


def is_localization(dataset) -> bool:
    """Whether ``dataset`` names the localization (regression) workload (any case)."""
    return isinstance(dataset, str) and dataset.lower() == LOCALIZATION


def localization_conflict(dataset, model, data_path, model_kwargs) -> tuple[str, str] | None:
    """``(keyword, reason)`` of the first setting the localization workload refuses, else
    ``None``: its model is the small CNN localizer (``model`` ``None`` or ``"cnn"``, no
    ``model_kwargs``) and its images are made offline (no ``data_path``).

    Example:
        >>> localization_conflict("localization", "lenet5", None, None)[0]
        'model'
        >>> localization_conflict("digits", "lenet5", None, None) is None
        True
    """
    if not is_localization(dataset):
        return None
    if model not in (None, "cnn"):
        return "model", (
            "the localization workload runs the small CNN localizer ('cnn'); leave the model "
            f"out or give 'cnn'; got {model!r}"
        )
    if data_path is not None:
        return "data_path", (
            "the localization images are made offline (gcc_jax.nn.data.make_localization): "
            f"no data path applies; got {str(data_path)!r}"
        )
    if model_kwargs:
        return "model_kwargs", (
            f"the localizer's architecture is fixed: no model options apply; got {model_kwargs!r}"
        )
    return None


def _localization_rule() -> Rule:
    """:func:`localization_conflict` on the effective settings, naming the refused flag."""
    flags = {"model": "--model", "data_path": "--data-path", "model_kwargs": "--model-kwargs"}

    def rule(cfg):
        keys = ("dataset", "model", "data_path", "model_kwargs")
        conflict = localization_conflict(*(cfg.get(k) for k in keys))
        if conflict is not None:
            raise ConfigError(flags[conflict[0]], f"with --dataset {LOCALIZATION}: {conflict[1]}")

    return Rule(rule, ("--dataset", *flags.values()), ("dataset", *flags))


DEFAULTS = dict(
    dataset="digits",
    data_path=None,
    model=None,
    model_kwargs=None,
    num_workers=40,
    num_inputs=20,
    stragglers=(0, 2, 4, 6, 8, 10),
    num_trials=20,
    num_batches=10,
    num_cv_batches=5,
    codes=DEFAULT_CODES,
    lam_enc_grid=DEFAULT_LAM_ENC_GRID,
    lam_dec_grid=DEFAULT_LAM_DEC_GRID,
    worst_case=True,
    worst_case_batches=3,
    search=RUN_SEARCH,
    tune_steps=100,
    fill="mean",
    order="given",
    epochs=20,
    batch_size=64,
    lr=1e-3,
    use_cache=True,
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


COMMAND = Command(
    name="run",
    help="the main job: coded inference of a trained classifier (or the localizer), GCC vs BACC "
    "vs uncoded",
    description="Trains (or loads from the cache) a classifier, then measures coded "
    "inference as in LeTCC §5: K test images per coded batch over N workers, random "
    "straggler sets per S (and the worst case), GCC with (lam_enc, lam_dec) chosen by grid "
    "cross-validation on held-out training images (never test images), BACC, uncoded and "
    "replication. Prints tables (rows: codes, columns: S) of MSE, RMSE = √MSE, mean L2 "
    "error, accuracy and RelAcc with 95% CIs and writes results.json (schema: "
    "gcc_jax.experiments.dnn), results.txt, results.png and cv.png into --out. With "
    "--dataset localization the same protocol runs a regression: a small CNN (cached, "
    "seeded) predicts the box of a digit on a 40x40 canvas made offline, the worker output "
    "is the 4 box coordinates and the tables are MSE, RMSE and mean L2 error only (--model "
    "cnn or none; --data-path and --model-kwargs are refused). Defaults: LeNet-5 on "
    "scikit-learn's digits, N=40, K=20, S=0..10. Explicit flags win over --toy.",
    module="gcc_jax.experiments.dnn",
    flags=Flags(
        DEFAULTS,
        _TOY,
        own=(
            own(
                "--model-kwargs",
                "architecture options as JSON, e.g. '{\"dim\": 32}' for the ViT",
                json_dict,
            ),
            own("--tune-steps", "gradient steps of GCC-tuned"),
            own("--fill", "uncoded's and replication's estimate of a lost result", choices=FILLS),
            own(
                "--order",
                "each batch's image order along the encoders' line (given, pca, spectral, greedy)",
                choices=("given", "pca", "spectral", "greedy"),
            ),
            own("--no-worst-case", "skip the worst-case search", key="worst_case", switch=False),
            own("--batch-size", "training batch size", check=count),
            own("--lr", "learning rate", check=within(0.0, lo_open=True)),
        ),
        help=dict(
            dataset="data set: digits, fashion_mnist, mnist, cifar10 (a classifier), or "
            "localization (a regression: the small CNN localizer's box; images made offline)",
            model=f"classifier: {', '.join(MODELS)} (default lenet5; with --dataset "
            "localization the localizer, cnn)",
            num_inputs="K images per coded batch",
            num_trials="random straggler sets per batch and S",
            num_cv_batches="batches of held-out training images for the λ CV",
            codes=f"codes compared (any case): {', '.join(CODES)}",
        ),
        rules=(
            shared_sizes("num_inputs", "num_workers", "stragglers"),
            choice("codes", flag("codes"), CODES, case=False),
            _localization_rule(),
        ),
    ),
)
