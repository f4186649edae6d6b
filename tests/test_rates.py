"""The rates and polynomial experiments at toy sizes: structure, outputs and a few invariants."""

import inspect
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


def test_slopes_and_bootstrap_match_loops():
    rng = np.random.default_rng(0)
    n = np.array([20.0, 40.0, 80.0, 160.0])
    values = rng.uniform(0.5, 2.0, size=(7, 4)) * n**-2.5
    ref = [np.polyfit(np.log(n), np.log(v), 1)[0] for v in values]
    np.testing.assert_allclose(rates._slopes(n, values), ref, rtol=1e-10)
    losses = rng.lognormal(size=(5, 6))
    losses[1, 2] = np.nan  # an undecodable pattern is ignored
    idx = rng.integers(5, size=(50, 5))
    means, medians = rates.bootstrap_stats(losses, idx, np.random.default_rng(7))
    cols = np.random.default_rng(7).integers(6, size=(50, 5, 6))
    for b in range(50):
        sample = np.concatenate([losses[d][cols[b, i]] for i, d in enumerate(idx[b])])
        np.testing.assert_allclose(means[b], np.nanmean(sample), rtol=1e-12)
        np.testing.assert_allclose(medians[b], np.nanmedian(sample), rtol=1e-12)


@pytest.fixture(scope="module")
def toy_rates():
    return rates.run_rates(**RATES_TOY, progress=False)


def test_run_rates_toy(toy_rates, tmp_path):
    result = toy_rates
    cfg, r = result.config, result.results
    assert len(r["rows"]) == 2 * 2 * 2 * 3  # σ × N × regimes × codes
    assert all(np.isfinite(row["mean"]["value"]) and row["mean"]["value"] >= 0 for row in r["rows"])
    for row in r["rows"]:
        lo, hi = row["median"]["ci95"]
        assert lo <= hi and len(row["per_draw"]) == cfg["draws"]
        if row["code"] == "GCC-interp":
            assert row["lam_dec"] == 0.0
        if row["code"] == "GCC-cv":  # the argmin of its held-out CV curve
            j = int(np.argmin(row["cv_curve"]))
            assert row["lam_dec"] == cfg["lam_dec_grid"][j]
    worst = [row for row in r["rows"] if row["regime"] == "worst"]
    assert all(row["exhaustive"] for row in worst)  # C(24, 2) = 276 is small
    assert r["search_check"]["cases"] == len(worst) and r["search_check"]["equal"] == len(worst)
    noisy = {row["code"]: row for row in r["rows"] if row["sigma"] > 0 and row["N"] == 24}
    assert {f["range"] for f in r["fits"]} == {"all"}  # two N: no upper-half range
    assert all(f["ci95"] is None for f in r["fits"])  # and no interval on a 2-point slope
    assert len(r["lams"]) == 2 * 2 and len(r["ratios"]) == 2 * 2
    assert noisy["GCC-cv"]["lam_dec"] in cfg["lam_dec_grid"]
    table = rates.format_rates_table(result)
    assert "fitted log-log slopes" in table and "interpolation accuracy" in table
    assert "GCC-cv/BACC" in table
    paths = rates.save_rates(result, tmp_path)
    assert json.loads(paths["json"].read_text())["experiment"] == "rates"
    assert paths["plot"].stat().st_size > 1000
    with pytest.raises(ValueError, match="unknown function"):
        rates.run_rates(workers=(12, 24), functions=("nope",), progress=False)


def test_noisy_workers_match_a_direct_loop(toy_rates):
    """BACC's iid per-draw mean at σ > 0 recomputed by encode → f → + noise → decode per mask."""
    import jax
    import jax.numpy as jnp

    import gcc_jax as gcc

    cfg = toy_rates.config
    k, n, sigma, d = cfg["num_inputs"], 24, cfg["noise"][1], 1
    kx = jax.random.fold_in(jax.random.key(0), 0)
    x = jax.random.uniform(jax.random.fold_in(kx, 0), (cfg["draws"], k, 1), minval=-3, maxval=3)
    km = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(kx, 2), 1), 1)
    eps = sigma * jax.random.normal(jax.random.fold_in(km, 1), (cfg["draws"], n, 1))
    masks = gcc.sample_masks(jax.random.fold_in(km, 100 + d), n, num=cfg["num_masks"], p=cfg["p"])
    code = gcc.BerrutCode.chebyshev(num_inputs=k, num_workers=n)
    xd = np.asarray(x[d])
    yt = np.asarray(code.encode(jnp.asarray(xd))) * np.sin(np.asarray(code.encode(jnp.asarray(xd))))
    yt = yt + np.asarray(eps[d])
    target = xd * np.sin(xd)
    losses = [
        np.sum((np.asarray(code.decode(jnp.asarray(yt), m)) - target) ** 2) / k
        for m in np.asarray(masks)
        if m.sum() >= 1
    ]
    row = next(
        r
        for r in toy_rates.results["rows"]
        if r["sigma"] == sigma and r["N"] == n and r["code"] == "BACC" and r["regime"] == "iid"
    )
    np.testing.assert_allclose(row["per_draw"][d], np.mean(losses), rtol=1e-9)


POLY_TOY = dict(settings=((3, 5, 20),), stragglers=(0, 7, 9), num_trials=3)
RATES_TOY = rates.TOY | dict(functions=("xsinx",))


@pytest.fixture(scope="module")
def toy_poly():
    return poly.run_poly(**POLY_TOY, progress=False)


def test_run_poly_toy(toy_poly, tmp_path):
    r = toy_poly
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


def _with_defaults(run, config: dict) -> dict:
    """``config`` completed with ``run``'s own defaults: the keywords a call really runs with."""
    params = inspect.signature(run).parameters.values()
    full = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    return full | config


def test_cli_rates_and_poly_toy(toy_rates, toy_poly, tmp_path, capsys, monkeypatch):
    """`gcc-jax rates --toy` / `poly --toy` run exactly the module fixtures' computations.

    The CLI's part is the flags → keywords mapping (checked here against the fixtures' keywords,
    defaults included), the printed summary and the files; the computations are the fixtures'
    (checked above), so the command's run returns them instead of computing them again.
    """
    from gcc_jax.experiments import cli
    from gcc_jax.experiments.cli import main

    fixtures = {
        "rates": (rates.run_rates, RATES_TOY, toy_rates),
        "poly": (poly.run_poly, POLY_TOY, toy_poly),
    }
    seen = []

    def run(command, config, args):
        run_fn, expected, result = fixtures[command.name]
        assert command.run.target is run_fn
        assert _with_defaults(run_fn, {**config, "seed": args.seed}) == _with_defaults(
            run_fn, expected
        )
        seen.append(command.name)
        return result

    monkeypatch.setattr(cli, "_run_command", run)
    args = ["--toy", "--functions", "xsinx", "--no-progress", "--out", str(tmp_path)]
    assert main(["rates", *args]) == 0
    assert "fitted log-log slopes" in capsys.readouterr().out
    assert (tmp_path / "rates.png").exists() and (tmp_path / "rates.json").exists()
    assert main(["poly", "--toy", "--no-progress", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "poly.json").exists()
    assert seen == ["rates", "poly"]
    with pytest.raises(SystemExit) as exit_info:  # rejected before any compute
        main(["rates", "--toy", "--functions", "nope", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
