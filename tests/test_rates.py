"""The rates and polynomial experiments at toy sizes: structure, outputs and a few invariants."""

import json

import numpy as np
import pytest

from gcc_jax.experiments import poly, rates


def test_fit_slope_recovers_a_power_law():
    n = np.array([20.0, 40.0, 80.0, 160.0])
    slope, intercept = rates.fit_slope(n, 5.0 * n**-3.0)
    assert slope == pytest.approx(-3.0, abs=1e-12)
    assert intercept == pytest.approx(np.log(5.0), abs=1e-10)
    assert np.isnan(rates.fit_slope([10.0, 20.0], [1.0, np.nan])[0])


def test_functions_shapes():
    import jax.numpy as jnp

    assert rates.xsinx(jnp.ones(1)).shape == (1,)
    assert rates.vector_map(jnp.ones(2)).shape == (3,)


@pytest.fixture(scope="module")
def toy_rates():
    return rates.run_rates(
        workers=(12, 24),
        num_inputs=4,
        stragglers=2,
        p=0.2,
        num_masks=16,
        functions=("xsinx",),
        search=dict(restarts=2, proposals=16, max_iters=3),
        progress=False,
    )


def test_run_rates_toy(toy_rates, tmp_path):
    result = toy_rates
    r = result.results
    assert len(r["rows"]) == 2 * 2 * 2  # N × codes × regimes
    assert all(np.isfinite(row["loss"]) and row["loss"] >= 0 for row in r["rows"])
    worst = [row for row in r["rows"] if row["regime"] == "worst"]
    assert all(len(row["dead"]) == 2 for row in worst)
    assert all(row["exhaustive"] for row in worst)  # C(24, 2) = 276 is small
    assert r["search_check"]["cases"] == 4 and r["search_check"]["equal"] == 4
    assert len(r["fits"]) == 2 * 2 and len(r["ratios"]) == 2
    table = rates.format_rates_table(result)
    assert "slope" in table and "GCC/BACC" in table
    paths = rates.save_rates(result, tmp_path)
    assert json.loads(paths["json"].read_text())["experiment"] == "rates"
    assert paths["plot"].stat().st_size > 1000
    with pytest.raises(ValueError, match="unknown function"):
        rates.run_rates(workers=(12, 24), functions=("nope",), progress=False)


def test_run_poly_toy(tmp_path):
    r = poly.run_poly(settings=((3, 5, 20),), stragglers=(0, 7, 9), num_trials=3, progress=False)
    rows = r.results["rows"]
    lcc = {row["S"]: row for row in rows if row["code"] == "LCC"}
    assert lcc[7]["exact"] and not lcc[9]["exact"]
    assert lcc[0]["mean"] < 1e-20 and lcc[7]["mean"] < 1e-16  # exact up to round-off
    gcc_rows = [row for row in rows if row["code"] == "GCC"]
    bacc_rows = [row for row in rows if row["code"] == "BACC"]
    assert all(g["mean"] < b["mean"] for g, b in zip(gcc_rows, bacc_rows, strict=True))
    assert "LCC threshold 13" in poly.format_poly_table(r)
    paths = poly.save_poly(r, tmp_path)
    assert json.loads(paths["json"].read_text())["experiment"] == "poly"
    assert paths["plot"].stat().st_size > 1000


def test_cli_rates_and_poly_toy(tmp_path, capsys):
    from gcc_jax.cli import main

    args = ["--toy", "--functions", "xsinx", "--no-progress", "--out", str(tmp_path)]
    assert main(["rates", *args]) == 0
    assert "fitted log-log slopes" in capsys.readouterr().out
    assert (tmp_path / "rates.png").exists() and (tmp_path / "rates.json").exists()
    assert main(["poly", "--toy", "--no-progress", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "poly.json").exists()
    assert main(["rates", "--toy", "--functions", "nope", "--out", str(tmp_path)]) == 2
