"""`gcc-jax tune` at toy sizes: structure, outputs, and held-out losses recomputed by loops."""

import itertools
import json

import jax
import numpy as np
import pytest

import gcc_jax as gcc
from gcc_jax.experiments import tune as exp


@pytest.fixture(scope="module")
def toy_result():
    return exp.run_tune(workloads=("xsinx",), toy=True, progress=False)


@pytest.fixture(scope="module")
def toy(toy_result):
    """Configuration, seeds and results of the toy run as one dict."""
    return {**toy_result.config, **toy_result.seeds, **toy_result.results}


def _row(result, regime, method):
    (row,) = [r for r in result["rows"] if r["regime"] == regime and r["method"] == method]
    return row


def test_toy_run_structure_and_outputs(toy, toy_result, tmp_path):
    assert toy["toy"] and toy["regimes"] == ["worst", "iid"]
    assert len(toy["rows"]) == 2 * len(exp.METHODS)
    assert all(np.isfinite(r["loss"]) and r["loss"] > 0 for r in toy["rows"])
    for regime in ("worst", "iid"):
        for method in ("tuned λ", "tuned λ+nodes"):
            row = _row(toy, regime, method)
            # validated on held-out training jobs: never worse than its grid-CV start there
            assert row["best_val_loss"] <= row["initial_val_loss"]
            assert np.all(np.diff(row["beta"]) > 0) and row["beta"][0] == -1.0
        assert _row(toy, regime, "GCV")["lam_dec"] is None  # chosen per pattern and job
    nodes = _row(toy, "iid", "tuned λ")
    assert nodes["beta"] == pytest.approx(np.asarray(gcc.chebyshev_nodes(16, kind=2)).tolist())
    assert len(toy["summary"]) == 4
    table = exp.format_tune_table(toy_result)
    assert "grid-CV" in table and "tuned λ+nodes" in table and "ratio" in table
    paths = exp.save_tune(toy_result, tmp_path)
    assert json.loads(paths["json"].read_text())["experiment"] == "tune"
    assert paths["plot"].stat().st_size > 1000


def test_held_out_losses_match_loops(toy):
    """Recompute the default, grid-CV and tuned rows on the held-out jobs with loops."""
    w = exp.TOY["xsinx"]
    key = jax.random.key(toy["seed"])
    k_w = jax.random.fold_in(key, 0)
    f, _, x_test, _ = exp._inputs("xsinx", w, k_w, True, False)
    for ri, regime in enumerate(("worst", "iid")):
        k_r = jax.random.fold_in(jax.random.fold_in(k_w, 100), ri)
        k_test = jax.random.split(k_r, 3)[2]
        for method in ("default", "grid-CV", "tuned λ+nodes"):
            row = _row(toy, regime, method)
            cheb = gcc.SplineCode.chebyshev(num_inputs=w.num_inputs, num_workers=w.num_workers)
            code = gcc.SplineCode(
                alpha=np.asarray(row.get("alpha", cheb.alpha)),
                beta=np.asarray(row.get("beta", cheb.beta)),
                lam_enc=np.asarray(row["lam_enc"]),
                lam_dec=np.asarray(row["lam_dec"]),
            )
            if regime == "iid":
                model = exp.StragglerModel.iid(w.p)
                num = exp.TOY_EVAL["num_masks"]
                ms = np.asarray(model.sample(jax.random.split(k_test)[0], 16, num=num))
                ok = ms.sum(1) >= 2
                per = [gcc.monte_carlo_loss(code, f, xj, ms[ok]) for xj in x_test]
                assert row["loss"] == pytest.approx(np.mean(per), rel=1e-9)
            else:  # C(16, 2) = 120 patterns: the exact worst case
                assert row["exhaustive"]
                ms = np.ones((120, 16), bool)
                for i, dead in enumerate(itertools.combinations(range(16), 2)):
                    ms[i, list(dead)] = False
                per = np.mean([gcc.monte_carlo_loss(code, f, xj, ms) for xj in x_test], axis=0)
                assert row["loss"] == pytest.approx(per.max(), rel=1e-9)


def test_cli_tune_toy(toy_result, tmp_path, capsys, monkeypatch):
    """`gcc-jax tune --toy` runs `run_tune` with the flags' settings and writes its outputs.

    The computation itself is the module fixture's (checked above); the command line's part is
    the flags → `run_tune` keywords mapping, the printed summary and the files.
    """
    from gcc_jax.experiments import cli

    seen = {}

    def run(command, config, args):
        seen.update(config, seed=args.seed, progress=not args.no_progress, name=command.name)
        return toy_result

    monkeypatch.setattr(cli, "_run_command", run)
    out = tmp_path / "res"
    args = ["tune", "--toy", "--workloads", "xsinx", "--regimes", "iid", "--no-progress"]
    assert cli.main([*args, "--seed", "3", "--out", str(out)]) == 0
    assert seen == dict(
        name="tune",
        workloads=("xsinx",),
        regimes=("iid",),
        toy=True,
        steps=None,
        seed=3,
        progress=False,
    )
    assert "Held-out loss" in capsys.readouterr().out
    record = json.loads((out / "tune.json").read_text())
    assert (
        record["experiment"] == "tune" and record["results"]["rows"] == toy_result.results["rows"]
    )
    assert (out / "tune.png").stat().st_size > 1000 and (out / "tune.txt").exists()
    with pytest.raises(SystemExit) as exit_info:  # rejected before any compute
        cli.main(["tune", "--toy", "--workloads", "nope", "--out", str(out)])
    assert exit_info.value.code == 2
    assert "--workloads: unknown name 'nope'" in capsys.readouterr().err
