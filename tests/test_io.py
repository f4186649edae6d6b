"""`gcc_jax.experiments._io`: the one JSON schema of every experiment, and the CLI registry."""

import datetime
import json
import subprocess
import sys

import flax
import jax
import jaxlib
import numpy as np
import optax
import pytest

import gcc_jax
from gcc_jax.experiments import COMMANDS, ExperimentResult, load_result, save_result
from gcc_jax.experiments._command import Batches, check_batches, from_arguments, merge_config
from gcc_jax.experiments._io import git_commit, json_clean
from gcc_jax.experiments.cli import build_parser
from gcc_jax.experiments.rates import TOY


def _result():
    return ExperimentResult(
        "toy",
        config={"sizes": (3, 4), "lam": np.float64(0.5)},
        seeds={"seed": 7},
        metrics={"loss": "mean squared error over patterns"},
        results={"loss": [np.float32(0.25), float("nan"), float("inf")], "n": np.int64(3)},
        timing_s={"total": 1.5},
        toy=False,
    )


def test_save_result_writes_the_schema(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["gcc-jax", "toy", "--seed", "7"])
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    paths = save_result(_result(), tmp_path / "out", summary="a table\n")
    after = datetime.datetime.now(datetime.UTC)
    text = paths["json"].read_text()
    rec = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert paths["json"].name == "toy.json" and paths["table"].read_text() == "a table\n"
    assert rec["schema_version"] == 1 and rec["experiment"] == "toy"
    stamp = datetime.datetime.fromisoformat(rec["timestamp"])
    assert stamp.utcoffset() == datetime.timedelta(0) and before <= stamp <= after
    assert rec["command"] == ["gcc-jax", "toy", "--seed", "7"]
    assert rec["versions"] == {
        "gcc_jax": gcc_jax.__version__,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "numpy": np.__version__,
    }
    assert rec["backend"] == jax.default_backend()
    assert rec["devices"] == [str(d) for d in jax.devices()]
    assert rec["x64"] is bool(jax.config.jax_enable_x64)
    assert rec["seeds"] == {"seed": 7}
    assert rec["config"] == {"sizes": [3, 4], "lam": 0.5}
    assert rec["metrics"] == {"loss": "mean squared error over patterns"}
    assert rec["results"] == {"loss": [0.25, None, None], "n": 3}  # NaN/Inf -> null
    assert rec["timing_s"] == {"total": 1.5}
    back = load_result(paths["json"])
    assert back.config == rec["config"] and back.results == rec["results"]


def test_git_commit_is_head_of_the_checkout():
    here = gcc_jax.__path__[0]
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True)
    expected = proc.stdout.strip() if proc.returncode == 0 else None
    assert git_commit() == expected


def _git(cwd, *args):
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


def test_git_commit_is_none_outside_the_packages_own_repository(tmp_path, monkeypatch):
    """A copy of the package inside another project's repository (a venv there, or an
    untracked copy at a repository's root) records no commit: not that project's HEAD."""
    from gcc_jax._core import env

    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("")
    _git(project, "init", "-q")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@t", "add", "src")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "project")
    for root in (project / ".venv" / "lib" / "site-packages", project):
        module = root / "gcc_jax" / "_core" / "env.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        (root / "gcc_jax" / "__init__.py").write_text("")
        monkeypatch.setattr(env, "__file__", str(module))
        assert env.git_commit() is None, root
    # the same copy, tracked by the repository at its parent: that repository's HEAD
    _git(project, "-c", "user.name=t", "-c", "user.email=t@t", "add", "gcc_jax/__init__.py")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "gcc_jax")
    head = subprocess.run(
        ["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert env.git_commit() == head


def test_a_toy_result_is_marked_in_record_summary_and_figures(tmp_path, monkeypatch):
    """One mechanism: GCC_JAX_TOY=1 when the result is built (or toy=True) gives
    `"toy": true` in the JSON, the toy note first in the .txt and in every figure's title
    (drawn and in the PNG's Title metadata); a full run has none of them."""
    from PIL import Image

    from gcc_jax.experiments._io import TOY_NOTE, new_figure

    for env, toy in (("1", True), ("0", False)):
        monkeypatch.setenv("GCC_JAX_TOY", env)
        result = ExperimentResult("x", {}, {"seed": 0}, {}, {})
        assert result.toy is toy
        fig, ax = new_figure()
        fig2, _ = new_figure()
        fig2.suptitle("a title")
        paths = save_result(
            result, tmp_path / env, summary="a table", figures={"a": fig, "b": fig2}
        )
        assert json.loads(paths["json"].read_text())["toy"] is toy
        assert (TOY_NOTE in paths["table"].read_text().splitlines()[0]) is toy
        for name in ("a", "b"):
            title = Image.open(paths[name]).text.get("Title", "")
            assert (TOY_NOTE in title) is toy
        assert (TOY_NOTE in (fig._suptitle.get_text() if fig._suptitle else "")) is toy
        assert fig2._suptitle.get_text().endswith("a title")
        assert load_result(paths["json"]).toy is toy


def test_figures_are_written_as_png(tmp_path):
    from gcc_jax.experiments._io import new_figure

    fig, ax = new_figure()
    ax.plot([0, 1], [1, 0])
    paths = save_result(_result(), tmp_path, name="x", figures={"curve": fig})
    assert paths["curve"].name == "curve.png"
    assert paths["curve"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "table" not in paths  # no summary given


def test_bad_results_are_rejected():
    with pytest.raises(ValueError, match="definition"):
        ExperimentResult("x", {}, {}, {"loss": ""}, {})
    with pytest.raises(TypeError, match="results"):
        ExperimentResult("x", {}, {}, {}, [1, 2])
    with pytest.raises(TypeError, match="ExperimentResult"):
        save_result({"results": 1}, "unused")


def test_json_clean_by_hand():
    assert json_clean({1: (np.bool_(True), np.array([1.0, np.nan]))}) == {"1": [True, [1.0, None]]}


def test_registry_lists_every_subcommand_once():
    names = [c.name for c in COMMANDS]
    assert names == [
        "run",
        "demo",
        "rates",
        "regimes",
        "poly",
        "serve-bench",
        "serve-sim",
        "compare-learned",
        "tune",
        "adversarial",
    ]
    parser = build_parser()
    for name in names:  # every subcommand has the common flags
        args = parser.parse_args([name, "--toy", "--seed", "3", "--out", "o", "--no-progress"])
        assert args.command.name == name and args.seed == 3 and args.toy


def test_from_arguments_is_the_field_by_field_record():
    from typing import NamedTuple

    class Settings(NamedTuple):
        n: int
        grid: tuple[float, ...]
        fill: str = "mean"

    def run(*, n=12, grid=(0.0, 1e-6), seed=0):
        return from_arguments(Settings, locals())

    # the reference: the record written out by name; names that are not fields are ignored
    assert run() == Settings(n=12, grid=(0.0, 1e-6), fill="mean")
    assert run(n=5, seed=3) == Settings(n=5, grid=(0.0, 1e-6))
    assert from_arguments(Settings, {"n": 1, "grid": (), "fill": "zero"}).fill == "zero"
    with pytest.raises(TypeError, match="grid"):
        from_arguments(Settings, {"n": 1})


def test_check_batches_names_the_bad_argument():
    assert check_batches(np.int64(8), 4, 0, 2, min_cv=0) == Batches(8, 4, 0, 2)
    assert type(check_batches(np.int64(8), 4, 0, 2, min_cv=0).trials) is int
    for args, name in (
        ((0, 4, 1, 1), "num_trials"),
        ((8, 0, 1, 1), "num_batches"),
        ((8, 4, 0, 1), "num_cv_batches"),
        ((8, 4, 1, 0), "worst_case_batches"),
    ):
        with pytest.raises(ValueError, match=name):
            check_batches(*args, min_cv=1)
    with pytest.raises(TypeError, match="num_batches"):
        check_batches(8, 2.5, 1, 1, min_cv=1)


def test_toy_defaults_then_explicit_flags():
    assert merge_config({"a": 1, "b": 2}, {"a": 10}, {"b": None}) == {"a": 10, "b": 2}
    rates = next(c for c in COMMANDS if c.name == "rates")
    args = build_parser().parse_args(["rates", "--toy", "-N", "8,16", "--restarts", "5"])
    cfg = rates.config(args, True)
    assert cfg["workers"] == (8, 16) and cfg["num_inputs"] == 4  # explicit N, toy K
    assert cfg["search"] == dict(TOY["search"], restarts=5)  # the flag given, the rest toy
    assert TOY["search"]["restarts"] != 5
    full = rates.config(build_parser().parse_args(["rates"]), False)
    assert full["workers"] == (20, 40, 80, 160, 320, 640) and full["search"]["restarts"] == 8
