"""The regime map: its pieces against NumPy loops, and one toy run checked end to end."""

import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gcc_jax as gcc
from gcc_jax.experiments import regimes

# -- sizes -------------------------------------------------------------------------------------


def test_parm_group_size_and_stragglers():
    assert [regimes.parm_group_size(20, n) for n in (22, 25, 30, 40, 60)] == [10, 4, 2, None, None]
    assert regimes.parm_group_size(4, 6) == 2 and regimes.parm_group_size(6, 10) is None
    assert [regimes.stragglers_for(p, 30) for p in (0.0, 0.05, 0.1, 0.2, 0.3)] == [0, 2, 3, 6, 9]
    assert regimes.stragglers_for(0.9, 10) == 8  # capped at N - 2
    with pytest.raises(ValueError, match="fraction"):
        regimes.stragglers_for(1.0, 10)


# -- per-pattern metrics through the one evaluator ------------------------------------------------


def test_regime_metrics_match_numpy_loop():
    rng = np.random.default_rng(0)
    k, n, m = 5, 12, 4
    code = gcc.ReplicationCode(num_inputs=k, num_workers=n, fill="zero")
    x = rng.normal(size=(k, m))
    labels = rng.integers(0, m, size=k)
    yt, fx = code.worker_outputs(jnp.tanh, jnp.asarray(x)), jnp.tanh(jnp.asarray(x))
    masks = np.asarray(gcc.sample_masks(jax.random.key(3), n, num=30, stragglers=7))
    rm, ms, cor, st = gcc.MaskEvaluator(
        code, yt, (fx, jnp.asarray(labels)), per_mask=regimes.regime_metrics
    )(masks)
    assert not st.any()
    f = np.tanh(x)
    for i, mask in enumerate(masks):
        est, have = np.zeros_like(f), np.zeros(k, bool)
        for j in range(k):
            live = [w for w in range(n) if w % k == j and mask[w]]
            if live:
                est[j], have[j] = f[j], True
        err = np.linalg.norm(est - f, axis=1)
        np.testing.assert_allclose(rm[i], err.mean(), rtol=1e-12)
        np.testing.assert_allclose(ms[i], (err**2).mean(), rtol=1e-12)
        assert cor[i] == np.sum((np.argmax(f, 1) == labels) & have)


def test_pick_winner_against_hand_computation():
    a = np.array([[1.0, 1.2], [0.9, 1.1], [1.0, 1.0]])
    b = 2 * a + np.array([[0.1, -0.1], [0.0, 0.2], [0.1, 0.0]])
    c = np.zeros_like(a)
    w = regimes.pick_winner({"b": b, "a": a})
    ratio = a.sum() / b.sum()
    assert w["code"] == "a" and w["runner_up"] == "b"
    np.testing.assert_allclose(w["ratio"], ratio, rtol=1e-12)
    np.testing.assert_allclose(w["margin"], 100 * (1 - ratio), rtol=1e-12)
    assert w["significant"] and not w["tie"]
    w = regimes.pick_winner({"a": a, "c": c, "d": c.copy()})
    assert w["tie"] and {w["code"], w["runner_up"]} == {"c", "d"} and not w["significant"]
    acc = regimes.pick_winner(
        {"x": np.array([[0.5, 0.6], [0.7, 0.5]]), "y": np.array([[0.4, 0.6], [0.6, 0.5]])},
        higher_is_better=True,
    )
    assert acc["code"] == "x"
    np.testing.assert_allclose(acc["margin"], 100 * 0.05, rtol=1e-12)
    assert acc["ratio"] is None
    assert regimes.pick_winner({}) is None
    assert regimes.pick_winner({"a": a})["runner_up"] is None


# -- one toy run, end to end ---------------------------------------------------------------


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    result = regimes.run_regimes(
        num_inputs=4,
        ratios=(1.5,),  # N = 6: ParM with k = 2 (two groups of 2 + 1)
        fractions=(0.0, 0.5),  # S = 0 and S = 3
        workloads=("xsinx",),
        codes=("GCC", "LCC", "uncoded", "replication", "ParM"),
        orders=("given", "sort"),
        fills=("zero", "mean", "interpolate"),
        num_trials=4,
        num_batches=2,
        num_cv_batches=2,
        worst_case_batches=1,
        lam_enc_grid=(0.0, 1e-3),
        lam_dec_grid=(0.0, 1e-4, 1e-1),
        search=dict(max_exhaustive=1000),
        parm_epochs=1,
        cache_dir=cache,
        progress=False,
    )
    out = tmp_path_factory.mktemp("out")
    return result, regimes.save_regimes(result, out)


def _cell(result, mode, s):
    return next(c for c in result.results["cells"] if c["mode"] == mode and c["S"] == s)


def _xsinx_batch(seed, b, k=4):
    """The documented draw of evaluation batch ``b``."""
    return np.random.default_rng((seed, 0xE7A1, b)).uniform(-3.0, 3.0, (k, 1))


def test_toy_worst_case_matches_exhaustive_loop(toy):
    result, _ = toy
    x = _xsinx_batch(0, 0)
    f = (x * np.sin(x))[:, 0]
    cell = _cell(result, "worst", 3)
    # uncoded, zero fill: the adversary kills the three largest |f(x_k)| among its K = 4
    np.testing.assert_allclose(
        cell["codes"]["uncoded·zero"]["mean_l2"]["mean"],
        np.sort(np.abs(f))[-3:].sum() / 4,
        rtol=1e-10,
    )
    # uncoded, mean fill: the three lost inputs get the fourth's value; the worst choice of
    # the survivor over all four (exhaustive: C(4, 3) patterns)
    mse = [np.mean((f - f[j]) ** 2) for j in range(4)]
    np.testing.assert_allclose(cell["codes"]["uncoded·mean"]["mse"]["mean"], max(mse), rtol=1e-10)
    row = cell["codes"]["uncoded·mean"]
    np.testing.assert_allclose(row["rmse"]["mean"], np.sqrt(row["mse"]["mean"]), rtol=1e-12)
    # replication on N = 6 (inputs 0, 1 twice, 2, 3 once): max MSE over all C(6, 3) patterns
    worst = max(
        itertools.combinations(range(6), 3),
        key=lambda dead: sum(
            f[j] ** 2 for j in range(4) if all(w in dead for w in range(6) if w % 4 == j)
        ),
    )
    lost = [j for j in range(4) if all(w in worst for w in range(6) if w % 4 == j)]
    np.testing.assert_allclose(
        cell["codes"]["replication·zero"]["mean_l2"]["mean"], np.abs(f[lost]).sum() / 4, rtol=1e-10
    )
    assert cell["codes"]["replication·zero"]["exhaustive"]
    # LCC needs N - S >= K: it applies at S = 0 only
    assert "LCC·given" not in cell["codes"]
    assert _cell(result, "random", 0)["codes"]["LCC·sort"]["applicable"]


def test_toy_cells_winners_and_lambda(toy):
    result, _ = toy
    cfg, res = result.config, result.results
    assert cfg["num_workers"] == [6] and {c["mode"] for c in res["cells"]} == {"random", "worst"}
    for cell in res["cells"]:
        rows = {c: r for c, r in cell["codes"].items() if r and r["applicable"]}
        for metric in ("mse", "mean_l2"):
            means = {c: r[metric]["mean"] for c, r in rows.items()}
            w = cell["winner"][metric]
            assert means[w["code"]] == min(means.values())
        assert cell["winner"]["accuracy"] is None  # not a classifier
        if cell["S"] == 0:  # copies are exact; uncoded and replication tie at zero
            assert means["uncoded·zero"] == 0 and means["replication·mean"] == 0 and w["tie"]
        assert rows["ParM·zero"]["k"] == 2
        assert {r["family"] for r in rows.values()} <= set(regimes.CODES)
        for order in ("given", "sort"):
            g = rows[f"GCC·{order}"]
            assert g["lam_enc"] in cfg["lam_enc_grid"] and g["lam_dec"] in cfg["lam_dec_grid"]
            cv = next(
                c for c in res["cv"] if c["order"] == order and c["fraction"] == cell["fraction"]
            )
            assert (g["lam_enc"], g["lam_dec"]) == (cv["lam_enc"], cv["lam_dec"])
    # λ is the argmin of the saved CV curve (held-out batches), per fraction
    for cv in res["cv"]:
        table = np.array(cv["mse"])
        e, d = np.unravel_index(np.argmin(table), table.shape)
        assert (cv["lam_enc"], cv["lam_dec"]) == (cfg["lam_enc_grid"][e], cfg["lam_dec_grid"][d])
    pm = res["models"]["parm"]
    assert len(pm) == 1 and pm[0]["k"] == 2 and pm[0]["epochs"] == 1


def test_toy_outputs_and_summary(toy):
    result, paths = toy
    loaded = json.loads(paths["json"].read_text())
    assert loaded["schema_version"] == 1 and loaded["experiment"] == "regimes"
    assert len(loaded["results"]["cells"]) == 4 and loaded["seeds"] == {"seed": 0}
    assert loaded["config"]["orders"] == ["given", "sort"] and loaded["config"]["rank_by"] == "mse"
    assert paths["regimes_xsinx"].name == "regimes_xsinx.png"
    assert paths["regimes_xsinx"].stat().st_size > 5000
    text = "\n".join(result.results["summary"])
    assert "at N/K = 1.5 (N = 6)" in text and "better than GCC (" in text and "uncoded in" in text
    assert "order gain" in text and "fill gain" in text
    table = regimes.format_regimes(result)
    assert "xsinx — worst stragglers — winner by mse" in table
    assert "xsinx — random stragglers — rmse (mean ± 95% CI half-width)" in table


def test_tuned_node_gcc_is_measured_like_every_code(tmp_path):
    # GCC-tuned: tuned on the held-out batches from GCC's CV choice; its worst case on the first
    # evaluation batch equals the largest MSE over all C(6, 2) patterns of the recorded code
    result = regimes.run_regimes(
        num_inputs=4, ratios=(1.5,), fractions=(0.25,), workloads=("xsinx",),
        codes=("GCC", "GCC-tuned"), modes=("worst",), orders=("sort",), fills=("zero",),
        num_trials=4, num_batches=1, num_cv_batches=4, worst_case_batches=1,
        lam_enc_grid=(0.0, 1e-4), lam_dec_grid=(0.0, 1e-4), tune_steps=4,
        cache_dir=tmp_path, progress=False,
    )  # fmt: skip
    (run,) = result.results["tuning"]
    assert run["best_val_loss"] <= run["initial_val_loss"] and run["steps_run"] <= 4
    (cell,) = result.results["cells"]
    row = cell["codes"]["GCC-tuned·sort"]
    code = gcc.SplineCode(
        alpha=np.array(run["alpha"]), beta=np.array(run["beta"]),
        lam_enc=run["lam_enc"], lam_dec=run["lam_dec"],
    )  # fmt: skip
    assert (row["lam_enc"], row["lam_dec"]) == (run["lam_enc"], run["lam_dec"])
    gap = np.median(np.abs(code.alpha[:, None] - code.beta[None, :]).min(axis=1))
    np.testing.assert_allclose(row["node_gap"], gap, rtol=1e-12)
    x = np.sort(_xsinx_batch(0, 0), axis=0)
    fx = x * np.sin(x)
    yt = np.asarray(code.encode(jnp.asarray(x)))
    yt = yt * np.sin(yt)
    worst = 0.0
    for dead in itertools.combinations(range(6), 2):
        mask = np.ones(6, bool)
        mask[list(dead)] = False
        y_hat = np.asarray(code.decode(jnp.asarray(yt), jnp.asarray(mask)))
        worst = max(worst, np.mean(np.sum((y_hat - fx) ** 2, axis=1)))
    np.testing.assert_allclose(row["mse"]["mean"], worst, rtol=1e-9)
    assert row["exhaustive"]


def test_a_huge_error_elsewhere_in_the_cell_ties_no_one():
    # ties are judged against the two values compared: LCC's 1e13 does not make 0.25 and 2.5 equal
    tables = {
        "uncoded": np.full((1, 1), 0.25),
        "GCC": np.full((1, 1), 2.5),
        "LCC": np.full((1, 1), 7.6e12),
    }
    w = regimes.pick_winner(tables)
    assert (w["code"], w["tie"], w["tied"]) == ("uncoded", False, ["uncoded"])
    w = regimes.pick_winner(tables | {"replication": np.zeros((1, 1)), "ParM": np.zeros((1, 1))})
    assert w["tie"] and w["tied"] == ["replication", "ParM"]


def test_worst_case_bounds_are_marked_in_the_tables(toy):
    # the toy's worst cases are exhaustive (N = 6): nothing is marked; once the winner's row is
    # a heuristic lower bound, its values carry "≥" and its win a dagger
    import copy

    result, _ = toy
    assert "≥" not in regimes.format_regimes(result).split("(? = ")[0]
    bounded = copy.deepcopy(result)
    cell = next(c for c in bounded.results["cells"] if c["mode"] == "worst" and c["S"] > 0)
    winner = cell["winner"]["mse"]["code"]
    cell["codes"][winner]["exhaustive"] = False
    text = regimes.format_regimes(bounded)
    value = f"{cell['codes'][winner]['mse']['mean']:.3g}"
    rows = [line for line in text.splitlines() if line.startswith(winner + " ")]
    assert any(f"≥ {value}" in line for line in rows)
    head = f"{bounded.results['cells'][0]['workload']} — worst stragglers — winner by mse"
    table = text.split(head)[1].split("\n\n")[0]
    assert "†" in table


def test_exact_winner_cells_are_grey_not_the_largest_ratio_colour(toy):
    # GCC's MSE over an exact winner's (uncoded at S = 0) is ∞: its cell takes the colour map's
    # "over" colour, distinct from every finite ratio's colour
    result, _ = toy
    fig = regimes.plot_regimes(result)["regimes_xsinx"]
    exact_cells = finite_cells = 0
    for ax in fig.axes:
        if "GCC's best MSE" not in ax.get_title() or not ax.get_images():
            continue
        im = ax.get_images()[0]
        data = np.ma.getdata(im.get_array()).astype(float)
        rgba = im.to_rgba(data)
        over = np.asarray(im.cmap.get_over())
        exact = np.isfinite(data) & (data > im.norm.vmax)
        finite = np.isfinite(data) & ~exact
        np.testing.assert_allclose(rgba[exact], np.broadcast_to(over, rgba[exact].shape))
        assert not np.any(np.all(np.isclose(rgba[finite], over), axis=-1))
        exact_cells, finite_cells = exact_cells + exact.sum(), finite_cells + finite.sum()
    assert exact_cells > 0 and finite_cells > 0


def test_cli_regimes_toy(tmp_path, capsys, monkeypatch):
    from gcc_jax.experiments.cli import main

    monkeypatch.setenv("GCC_JAX_CACHE", str(tmp_path / "cache"))
    # N = 6 only (--ratios 1.5): the module fixture's shapes, so its compiled programs serve
    args = ["regimes", "--toy", "--workloads", "xsinx", "--modes", "random", "--ratios", "1.5"]
    args.append("--no-progress")
    assert main([*args, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "xsinx — random stragglers — winner by mean_l2" in out and "summary:" in out
    assert (tmp_path / "regimes.json").exists() and (tmp_path / "regimes_xsinx.png").exists()


# -- the LeNet-5 workloads tune on held-out training images, never on test images ------------


def test_lenet_workloads_cross_validate_on_held_out_training_images(monkeypatch):
    from gcc_jax.nn import training
    from gcc_jax.nn.data import load_digits
    from gcc_jax.nn.models import ModelApply

    ds = load_digits()
    stub = ModelApply(None, "stub", (8, 8, 1), 10)  # never run: only the images are tested
    untrained = training.TrainedModel(
        stub, {}, "lenet5", ds.name, 0.1, 0.1, (), train_losses=(), num_steps=0, from_cache=True,
        cache_path=None, train_time_s=0.0, config={"val_fraction": 0.1, "seed": 0},
    )  # fmt: skip
    monkeypatch.setattr(training, "train_classifier", lambda *a, **kw: untrained)
    k, n_cv, n_eval = 4, 3, 2
    wls, note, info = regimes._lenet_workloads(
        ["lenet_softmax"], k, n_cv, n_eval, 0, jnp.float64, "digits", 1, None, None, False, False
    )
    assert note is None
    images = info["images"]
    assert (images["cv_split"], images["cv_pool"], images["eval_split"]) == (
        "train",
        "validation",
        "test",
    )
    cv_idx, ev_idx = np.asarray(images["cv"]), np.asarray(images["eval"])
    assert cv_idx.shape == (n_cv, k) and ev_idx.shape == (n_eval, k)
    # the CV indices are images held out from training (train_classifier's rule, by NumPy)
    held_out = np.random.default_rng((0, 0x5EED)).permutation(ds.num_train)[: round(0.1 * 1437)]
    assert len(set(cv_idx.ravel())) == cv_idx.size and set(cv_idx.ravel()) <= set(held_out)
    # the batches the workload tunes and scores on are exactly those images
    for (x, y), idx in zip(wls[0].cv, cv_idx, strict=True):
        np.testing.assert_array_equal(np.asarray(x), ds.x_train[idx].astype(np.float64))
        np.testing.assert_array_equal(np.asarray(y), ds.y_train[idx])
    for (x, _), idx in zip(wls[0].eval, ev_idx, strict=True):
        np.testing.assert_array_equal(np.asarray(x), ds.x_test[idx].astype(np.float64))
    # no CV image is (pixel for pixel) an evaluation image
    a = ds.x_train[cv_idx.ravel()].reshape(cv_idx.size, -1)
    b = ds.x_test[ev_idx.ravel()].reshape(ev_idx.size, -1)
    assert not (a[:, None, :] == b[None, :, :]).all(-1).any()


# -- the localization (regression) workload ----------------------------------------------------


def test_localization_workload_toy(tmp_path):
    result = regimes.run_regimes(
        num_inputs=4,
        ratios=(1.5,),
        fractions=(0.25,),
        workloads=("localization",),
        codes=("GCC", "replication"),
        modes=("random",),
        orders=("given", "pca"),
        fills=("mean",),
        num_trials=3,
        num_batches=2,
        num_cv_batches=2,
        lam_enc_grid=(0.0,),
        lam_dec_grid=(0.0, 1e-3),
        epochs=1,
        cache_dir=tmp_path,
        progress=False,
    )
    loc = result.results["models"]["localizer"]
    assert loc["num_train"] == 6000 and 0.0 <= loc["mean_iou"] <= 1.0 and loc["test_mse"] > 0
    (cell,) = result.results["cells"]
    assert set(cell["codes"]) == {"GCC·given", "GCC·pca", "replication·mean"}
    for row in cell["codes"].values():
        np.testing.assert_allclose(row["rmse"]["mean"], np.sqrt(row["mse"]["mean"]), rtol=1e-12)
        assert row["accuracy"] is None  # a regression workload
    assert "localizer (" in regimes.format_regimes(result)
