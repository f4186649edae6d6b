"""One output format for every experiment: a typed result, its JSON record, a text summary, figures.

Every ``run_*`` function of :mod:`gcc_jax.experiments` returns an :class:`ExperimentResult`, and
:func:`save_result` writes it as ``<name>.json`` with one schema (:data:`SCHEMA_VERSION`)::

    {
      "schema_version": 1,
      "experiment": "rates",                 # which experiment produced it
      "timestamp": "2026-12-01T13:45:00+00:00",  # UTC, ISO 8601, when the file was written
      "command": ["gcc-jax", "rates", ...],  # sys.argv of the process that wrote it
      "versions": {"gcc_jax", "jax", "jaxlib", "flax", "optax", "numpy"},
      "backend": "cpu", "devices": ["TFRT_CPU_0", ...], "x64": true,
      "git_commit": "<sha of HEAD of gcc_jax's own checkout>" | null,
      "toy": false,                          # true for a toy run (--toy, GCC_JAX_TOY=1)
      "seeds": {"seed": 0, ...},             # every seed the run used
      "config": {...},                       # every setting the run used (sizes, grids, ...)
      "metrics": {"loss": "plain-language definition", ...},
      "timing_s": {...},                     # wall-clock seconds per phase
      "results": {...}                       # the experiment's numbers (see its module)
    }

NaN and ±Inf are written as ``null`` (strict JSON); tuples become lists, NumPy values Python
ones. Next to it: ``<name>.txt`` (the plain-text summary the command prints) and one PNG per
figure (:func:`save_figure`).

A toy run is marked in all three by one mechanism: :attr:`ExperimentResult.toy` (set from
``GCC_JAX_TOY=1`` when the result is built, or by ``gcc-jax ... --toy``) writes ``"toy": true``
into the record, puts :data:`TOY_NOTE` on the first line of the summary (:func:`summary_text`)
and into the title of every figure (:func:`save_figure`, also the PNG's ``Title`` metadata).
"""

import dataclasses
import datetime
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .._core.env import environment, git_commit, versions

__all__ = [
    "SCHEMA_VERSION",
    "TOY_NOTE",
    "ExperimentResult",
    "environment",
    "git_commit",
    "json_clean",
    "load_result",
    "new_figure",
    "record",
    "save_figure",
    "save_report",
    "save_result",
    "summary_text",
    "toy_environment",
    "versions",
    "warn_float32",
]

SCHEMA_VERSION = 1
"""Version of the JSON schema written by :func:`save_result`."""

TOY_NOTE = "TOY RUN (tiny sizes): checks the pipeline, not a measurement"
"""The line that marks a toy run's summary and figures."""


def toy_environment() -> bool:
    """Whether ``GCC_JAX_TOY`` asks for toy sizes (set, and not ``0``)."""
    return os.environ.get("GCC_JAX_TOY", "") not in ("", "0")


@dataclasses.dataclass(frozen=True)
class ExperimentResult:
    """What a ``run_*`` experiment function returns (and :func:`save_result` writes).

    Attributes:
        experiment: the experiment's name (``"rates"``, ``"dnn"``, ...).
        config: every setting of the run (sizes, grids, λs, dtype, ...), JSON-ready.
        seeds: every seed the run used, by name.
        metrics: each reported metric's name → its definition in plain language.
        results: the experiment's numbers (JSON-ready; layout documented by its module).
        timing_s: wall-clock seconds per phase.
        toy: a toy run (tiny sizes): marked as such in the record, summary and figures. Its
            default is :func:`toy_environment` when the result is built.
    """

    experiment: str
    config: dict[str, Any]
    seeds: dict[str, int]
    metrics: dict[str, str]
    results: dict[str, Any]
    timing_s: dict[str, float] = dataclasses.field(default_factory=dict)
    toy: bool = dataclasses.field(default_factory=toy_environment)

    def __post_init__(self):
        if not isinstance(self.experiment, str) or not self.experiment:
            raise ValueError(f"`experiment` must be a non-empty name; got {self.experiment!r}")
        for name in ("config", "seeds", "metrics", "results", "timing_s"):
            if not isinstance(getattr(self, name), Mapping):
                raise TypeError(f"`{name}` must be a dict; got {type(getattr(self, name))}")
        for name, text in self.metrics.items():
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"metric {name!r} needs a plain-language definition")

    @classmethod
    def of_run(
        cls,
        experiment: str,
        config: dict[str, Any],
        seed: int,
        metrics: dict[str, str],
        results: dict[str, Any],
        *,
        t_start: float,
        phases: Mapping[str, float] | None = None,
    ) -> "ExperimentResult":
        """The record of a run with one seed that started at ``t_start``
        (``time.perf_counter()``): ``timing_s`` is ``phases`` and the total seconds until now."""
        total = time.perf_counter() - t_start
        timing = {**(phases or {}), "total": total}
        return cls(experiment, config, {"seed": int(seed)}, metrics, results, timing)


def json_clean(obj: Any) -> Any:
    """``obj`` as strict JSON data: NaN/±Inf → ``None``, NumPy → Python, tuples → lists.

    Example:
        >>> import numpy as np
        >>> json_clean({"a": (np.float64(1.5), float("nan")), 2: np.arange(2)})
        {'a': [1.5, None], '2': [0, 1]}
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_clean(v) for v in obj]
    if isinstance(obj, np.ndarray | jax.Array):
        return json_clean(np.asarray(obj).tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def record(result: ExperimentResult) -> dict[str, Any]:
    """The JSON record of ``result`` (the schema of the module docstring), as strict JSON data."""
    if not isinstance(result, ExperimentResult):
        raise TypeError(f"`result` must be an ExperimentResult; got {type(result).__name__}")
    return json_clean(
        {
            "schema_version": SCHEMA_VERSION,
            "experiment": result.experiment,
            "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            **environment(),
            "toy": bool(result.toy),
            "seeds": result.seeds,
            "config": result.config,
            "metrics": result.metrics,
            "timing_s": result.timing_s,
            "results": result.results,
        }
    )


def new_figure(*args, **kwargs):
    """``matplotlib.pyplot.subplots(*args, **kwargs)`` on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def summary_text(result: ExperimentResult, text: str) -> str:
    """The summary ``text`` of ``result`` as printed and saved: :data:`TOY_NOTE` first for a
    toy run.

    Example:
        >>> r = ExperimentResult("demo", {}, {"seed": 0}, {}, {}, toy=True)
        >>> print(summary_text(r, "loss 0.1"))
        TOY RUN (tiny sizes): checks the pipeline, not a measurement
        loss 0.1
    """
    return f"{TOY_NOTE}\n{text}" if result.toy else text


def _mark_toy(fig) -> str:
    """Put :data:`TOY_NOTE` into ``fig``'s title (its suptitle, or a new one); the title."""
    title = fig._suptitle.get_text() if fig._suptitle is not None else ""
    if title:
        # the extra line grows upwards, above the axes (the saved bounding box is "tight")
        fig._suptitle.set_text(f"{TOY_NOTE}\n{title}")
        fig._suptitle.set_y(1.0)
        fig._suptitle.set_va("bottom")
    else:
        fig.suptitle(TOY_NOTE, y=1.0, va="bottom", color="C3")
    return fig._suptitle.get_text()


def save_figure(fig, path: str | Path, *, dpi: int = 120, toy: bool = False) -> Path:
    """Write a Matplotlib figure to ``path`` (folders created) and close it; ``toy`` puts
    :data:`TOY_NOTE` into its title and the PNG's ``Title`` metadata."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"Title": _mark_toy(fig)} if toy else None
    # bbox "tight": legends outside the axes stay in
    fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata=metadata)
    plt.close(fig)
    return path


def save_result(
    result: ExperimentResult,
    out: str | Path,
    *,
    name: str | None = None,
    summary: str | None = None,
    figures: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``result`` into the folder ``out``: ``<name>.json``, ``<name>.txt``, figures.

    Args:
        result: an :class:`ExperimentResult`.
        out: output folder (created).
        name: file stem (default ``result.experiment``).
        summary: the plain-text summary written to ``<name>.txt`` (skipped when ``None``;
            :func:`summary_text` marks a toy run's).
        figures: file stem → Matplotlib figure, each written as ``<stem>.png`` and closed
            (a toy run's titled as such).

    Returns:
        ``{"json": path, "table": path, <stem>: path, ...}`` for what was written.

    Example:
        >>> import json, tempfile
        >>> r = ExperimentResult("demo", {"n": 3}, {"seed": 0}, {"loss": "mean squared error"},
        ...                      {"loss": float("nan")}, toy=False)
        >>> paths = save_result(r, tempfile.mkdtemp(), summary="loss: nan")
        >>> rec = json.loads(paths["json"].read_text())
        >>> rec["schema_version"], rec["results"], paths["table"].read_text()
        (1, {'loss': None}, 'loss: nan\\n')
    """
    rec = record(result)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = result.experiment if name is None else str(name)
    paths = {"json": out / f"{stem}.json"}
    paths["json"].write_text(json.dumps(rec, indent=2, allow_nan=False) + "\n")
    if summary is not None:
        paths["table"] = out / f"{stem}.txt"
        paths["table"].write_text(summary_text(result, summary.rstrip("\n")) + "\n")
    for fig_name, fig in (figures or {}).items():
        paths[fig_name] = save_figure(fig, out / f"{fig_name}.png", toy=result.toy)
    return paths


def save_report(
    report: Callable[[ExperimentResult], str], plot: Callable[[ExperimentResult], Any]
) -> Callable[[ExperimentResult, str | Path], dict[str, Path]]:
    """The ``save`` of an experiment with one figure: ``save(result, out)`` writes, with
    :func:`save_result`, ``<experiment>.json``, ``.txt`` (``report(result)``) and ``.png``
    (``plot(result)``) into the folder ``out``, the figure's path under ``"plot"``."""

    def save(result: ExperimentResult, out: str | Path) -> dict[str, Path]:
        """Write ``<experiment>.json``, ``.txt`` and ``.png`` into the folder ``out``."""
        figures = {result.experiment: plot(result)}
        paths = save_result(result, out, summary=report(result), figures=figures)
        paths["plot"] = paths.pop(result.experiment)
        return paths

    return save


def warn_float32(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn the caller of a ``run_*`` function with ``message`` when JAX runs in float32
    (``jax_enable_x64`` off)."""
    if not jax.config.jax_enable_x64:
        warnings.warn(message, category, stacklevel=3)


def load_result(path: str | Path) -> ExperimentResult:
    """Read back a JSON file written by :func:`save_result` (NaNs come back as ``None``)."""
    rec = json.loads(Path(path).read_text())
    if rec.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"{path}: schema_version {rec.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        )
    return ExperimentResult(
        rec["experiment"],
        rec["config"],
        rec["seeds"],
        rec["metrics"],
        rec["results"],
        rec.get("timing_s", {}),
        toy=bool(rec.get("toy", False)),
    )
