"""The coded-inference experiment (`gcc_jax.experiments.dnn`) against loops and hand values.

One tiny LeNet-5 is trained once per session (1 epoch on digits, cached in a tmp dir) and one
toy run of `run_dnn` is shared by the module; every number it reports is recomputed here from
the documented protocol with eager decodes and NumPy. The localization (regression) run has its
own tiny localizer (1 epoch on 300 images, same cache) and toy run.
"""

import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gcc_jax as gcc
from gcc_jax.experiments import dnn
from gcc_jax.experiments._localizer import LocalizerSettings, train_localizer
from gcc_jax.nn.data import load_digits
from gcc_jax.nn.training import train_classifier, tree_fingerprint


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """The module's model cache: `gcc-jax run --toy` below loads the model trained here."""
    return tmp_path_factory.mktemp("gcc-cache")


@pytest.fixture(scope="module")
def trained(cache_dir):
    return train_classifier("lenet5", "digits", epochs=1, cache_dir=cache_dir, progress=False)


@pytest.fixture(scope="module")
def toy_result(trained):
    return dnn.run_dnn(
        **dnn.toy_config(), codes=dnn.CODES, fill="zero", trained=trained, progress=False
    )


@pytest.fixture(scope="module")
def toy(toy_result):
    """The toy configuration and the result as one dict (config with its seed, and results)."""
    r = toy_result
    return dnn.toy_config(), {"config": {**r.config, **r.seeds}, **r.results}


def _softmax_np(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


_REFERENCE_CACHE = {}
_PREDICT = {}


def _predict(trained, x):
    """`trained.predict_proba`, compiled once per shape (eagerly, every layer's operations would
    compile one by one)."""
    if id(trained) not in _PREDICT:
        _PREDICT[id(trained)] = (trained, jax.jit(trained.predict_proba))
    return _PREDICT[id(trained)][1](x)


@jax.jit
def _decode(code, y, mask):
    """One pattern per call (the reference loops over patterns; compiled once per code type)."""
    return code.decode_with_status(y, mask)


def _reference_trials(trained, result, code, name, s, key_index=1):
    """Per-trial rmse, mse, correct, agree for every evaluation batch, by loops (B, T)."""
    lams = (float(code.lam_enc), float(code.lam_dec)) if name == "GCC" else ()
    memo = (id(result), name, s, key_index, lams)
    if memo not in _REFERENCE_CACHE:
        _REFERENCE_CACHE[memo] = _reference_trials_uncached(
            trained, result, code, name, s, key_index
        )
    return _REFERENCE_CACHE[memo]


def _reference_trials_uncached(trained, result, code, name, s, key_index):
    cfg = result["config"]
    ds = load_digits()
    keys = jax.random.split(jax.random.key(cfg["seed"]), 3)
    out = {m: [] for m in ("mean_l2", "mse", "correct", "agree", "base")}
    images = result["images"]["eval" if key_index == 1 else "cv"]
    for b, idx in enumerate(images):
        x = ds.x_test[idx].astype(np.float64)
        labels = ds.y_test[idx]
        fx = np.asarray(_predict(trained, jnp.asarray(x)))
        yt = np.asarray(_predict(trained, code.encode(jnp.asarray(x))))
        n = cfg["num_workers"]
        masks = gcc.sample_masks(
            jax.random.fold_in(jax.random.fold_in(keys[key_index], s), b),
            n,
            num=cfg["num_trials"],
            stragglers=s,
        )
        rows = {m: [] for m in ("mean_l2", "mse", "correct", "agree")}
        for mask in np.asarray(masks):
            m = mask[: cfg["num_inputs"]] if name == "uncoded" else mask
            dec = _decode(code, jnp.asarray(yt), jnp.asarray(m))
            assert int(dec.status) == 0
            y_hat = np.asarray(dec.value)
            avail = np.asarray(code.available(m)) if hasattr(code, "available") else True
            err = np.sqrt(((y_hat - fx) ** 2).sum(axis=1))
            pred = y_hat.argmax(axis=1)
            rows["mean_l2"].append(err.mean())
            rows["mse"].append((err**2).mean())
            rows["correct"].append(np.sum((pred == labels) & avail))
            rows["agree"].append(np.sum((pred == fx.argmax(axis=1)) & avail))
        for m, v in rows.items():
            out[m].append(v)
        out["base"].append(np.sum(fx.argmax(axis=1) == labels))
    return {m: np.array(v, float) for m, v in out.items()}


def _code(result, name, s):
    cfg = result["config"]
    k, n = cfg["num_inputs"], cfg["num_workers"]
    if name == "GCC":
        row = next(r for r in result["results"]["GCC"] if r["S"] == s)
        return gcc.SplineCode.chebyshev(
            num_inputs=k, num_workers=n, lam_enc=row["lam_enc"], lam_dec=row["lam_dec"]
        )
    if name == "BACC":
        return gcc.BerrutCode.chebyshev(num_inputs=k, num_workers=n)
    if name == "uncoded":
        return gcc.UncodedCode(num_inputs=k, fill=cfg["fill"])
    return gcc.ReplicationCode(num_inputs=k, num_workers=n, fill=cfg["fill"])


@pytest.mark.parametrize("name", ["GCC", "uncoded"])
def test_run_reports_the_documented_protocol(trained, toy, name):
    cfg, result = toy
    for row in result["results"][name]:
        s = row["S"]
        ref = _reference_trials(trained, result, _code(result, name, s), name, s)
        k = cfg["num_inputs"]
        batch_means = ref["mean_l2"].mean(axis=1)
        t = stats.t.ppf(0.975, len(batch_means) - 1)
        np.testing.assert_allclose(row["mean_l2"]["mean"], ref["mean_l2"].mean(), rtol=1e-9)
        np.testing.assert_allclose(
            row["mean_l2"]["ci95"], t * stats.sem(batch_means), rtol=1e-7, atol=1e-15
        )
        np.testing.assert_allclose(row["mse"]["mean"], ref["mse"].mean(), rtol=1e-9)
        np.testing.assert_allclose(row["accuracy"]["mean"], ref["correct"].mean() / k, rtol=1e-12)
        pooled = ref["correct"].sum() / (ref["base"].sum() * cfg["num_trials"])
        np.testing.assert_allclose(row["rel_acc_labels"]["mean"], pooled, rtol=1e-12)
        np.testing.assert_allclose(row["rel_acc_base"]["mean"], ref["agree"].mean() / k)
        assert row["num_trials"] == cfg["num_batches"] * cfg["num_trials"]
    base = ref["base"].sum() / (cfg["num_batches"] * cfg["num_inputs"])
    np.testing.assert_allclose(result["base"]["accuracy"], base, rtol=1e-12)


def test_an_input_order_puts_each_batch_along_its_first_principal_component(trained, toy):
    # order="pca": each evaluation batch holds the given run's images, sorted by their
    # projection on the batch's first principal component (NumPy SVD, either direction), and
    # GCC's numbers are those of the loop reference over the batches in that order
    _, given = toy
    run = dnn.run_dnn(
        **dnn.toy_config(), codes=("GCC",), worst_case=False, order="pca", trained=trained,
        progress=False,
    )  # fmt: skip
    result = {"config": {**run.config, **run.seeds}, **run.results}
    assert result["config"]["order"] == "pca"
    ds = load_digits()
    for before, after in zip(given["images"]["eval"], result["images"]["eval"], strict=True):
        assert sorted(before) == sorted(after)
        x = ds.x_test[before].reshape(len(before), -1).astype(np.float64)
        centred = x - x.mean(axis=0)
        score = centred @ np.linalg.svd(centred, full_matrices=False)[2][0]
        expected = np.asarray(before)[np.argsort(score)]
        assert after in (expected.tolist(), expected[::-1].tolist())
    for row in result["results"]["GCC"]:
        s = row["S"]
        ref = _reference_trials(trained, result, _code(result, "GCC", s), "GCC", s)
        np.testing.assert_allclose(row["mse"]["mean"], ref["mse"].mean(), rtol=1e-9)
    with pytest.raises(ValueError, match="order='sort'"):
        dnn.run_dnn(**dnn.toy_config(), order="sort", trained=trained, progress=False)


def test_uncoded_agreement_is_the_fraction_of_results_that_arrived(toy):
    cfg, result = toy
    keys = jax.random.split(jax.random.key(cfg.get("seed", 0)), 3)
    for row in result["results"]["uncoded"]:
        s = row["S"]
        arrived = [
            np.asarray(
                gcc.sample_masks(
                    jax.random.fold_in(jax.random.fold_in(keys[1], s), b),
                    cfg["num_workers"],
                    num=cfg["num_trials"],
                    stragglers=s,
                )
            )[:, : cfg["num_inputs"]].mean()
            for b in range(cfg["num_batches"])
        ]
        np.testing.assert_allclose(row["rel_acc_base"]["mean"], np.mean(arrived), rtol=1e-12)
        if s == 0:
            for m in ("mean_l2", "mse"):
                assert row[m]["mean"] == 0.0
            assert row["rel_acc_labels"]["mean"] == 1.0


def test_cross_validation_uses_held_out_training_images_only(trained, toy):
    cfg, result = toy
    cv, images = result["cv"], result["images"]
    ds = load_digits()
    cv_idx, ev_idx = np.asarray(images["cv"]), np.asarray(images["eval"])
    assert (images["cv_split"], images["cv_pool"], images["eval_split"]) == (
        "train",
        "validation",
        "test",
    )
    assert cv_idx.shape == (cfg["num_cv_batches"], cfg["num_inputs"])
    assert ev_idx.shape == (cfg["num_batches"], cfg["num_inputs"])
    assert len(set(cv_idx.ravel())) == cv_idx.size and len(set(ev_idx.ravel())) == ev_idx.size
    # CV images: training-split images the model was not trained on (its validation split,
    # recomputed here from train_classifier's documented rule with NumPy)
    n_val = round(0.1 * ds.num_train)
    held_out = np.random.default_rng((0, 0x5EED)).permutation(ds.num_train)[:n_val]
    assert set(cv_idx.ravel()) <= set(held_out)
    # ... and no CV image is (pixel for pixel) one of the evaluation (test) images
    x_cv_flat = ds.x_train[cv_idx.ravel()].reshape(cv_idx.size, -1)
    x_ev_flat = ds.x_test[ev_idx.ravel()].reshape(ev_idx.size, -1)
    assert not (x_cv_flat[:, None, :] == x_ev_flat[None, :, :]).all(-1).any()
    x_cv = [np.asarray(ds.x_train[idx], np.float64) for idx in images["cv"]]
    fx_cv = [np.asarray(_predict(trained, jnp.asarray(x))) for x in x_cv]
    k_cv = jax.random.split(jax.random.key(cfg.get("seed", 0)), 3)[0]
    n, k = cfg["num_workers"], cfg["num_inputs"]
    for i, row in enumerate(result["results"]["GCC"]):
        table = np.asarray(cv["mse"][i])
        e, d = np.unravel_index(np.argmin(table), table.shape)
        assert (row["lam_enc"], row["lam_dec"]) == (cv["lam_enc_grid"][e], cv["lam_dec_grid"][d])
        # recompute two grid points: the CV images, grid_search's patterns, a loop over both
        k_masks = jax.random.split(jax.random.fold_in(k_cv, row["S"]))[0]
        masks = np.asarray(gcc.sample_masks(k_masks, n, num=cfg["num_trials"], stragglers=row["S"]))
        for e, d in ((0, 0), (len(cv["lam_enc_grid"]) - 1, len(cv["lam_dec_grid"]) - 1)):
            code = gcc.SplineCode.chebyshev(
                num_inputs=k,
                num_workers=n,
                lam_enc=cv["lam_enc_grid"][e],
                lam_dec=cv["lam_dec_grid"][d],
            )
            losses = []
            for x, fx in zip(x_cv, fx_cv, strict=True):
                yt = _predict(trained, code.encode(jnp.asarray(x)))
                for mask in masks:
                    y_hat = np.asarray(_decode(code, yt, jnp.asarray(mask)).value)
                    losses.append(((y_hat - fx) ** 2).sum() / k)
            np.testing.assert_allclose(table[e, d], np.mean(losses), rtol=1e-8)
    # GCC-interp is λ = 0; GCC-tuned reports its λs and the tuning record
    assert all(r["lam_enc"] == r["lam_dec"] == 0.0 for r in result["results"]["GCC-interp"])
    assert [t["S"] for t in result["tuning"]] == list(cfg["stragglers"])
    for t, r in zip(result["tuning"], result["results"]["GCC-tuned"], strict=True):
        assert (t["lam_enc"], t["lam_dec"]) == (r["lam_enc"], r["lam_dec"])
        assert t["best_val_loss"] <= t["initial_val_loss"]


def test_comparisons_cover_every_baseline(trained, toy):
    _, result = toy
    others = ["GCC-interp", "GCC-tuned", "BACC", "uncoded", "replication"]
    assert sorted({c["baseline"] for c in result["comparisons"]}) == sorted(others)
    for c in result["comparisons"]:
        if c["baseline"] not in ("uncoded", "BACC"):
            continue
        s, other = c["S"], c["baseline"]
        g = _reference_trials(trained, result, _code(result, "GCC", s), "GCC", s)
        o = _reference_trials(trained, result, _code(result, other, s), other, s)
        if o["mean_l2"].sum() == 0:  # uncoded at S = 0 is exact: the ratio is undefined
            assert c["mean_l2_ratio"]["mean"] is None
        else:
            ratio = g["mean_l2"].sum() / o["mean_l2"].sum()
            np.testing.assert_allclose(c["mean_l2_ratio"]["mean"], ratio, rtol=1e-9)
        k = result["config"]["num_inputs"]
        diff = 100 * (g["correct"] - o["correct"]).mean() / k
        np.testing.assert_allclose(c["accuracy_diff_points"]["mean"], diff, atol=1e-9)
        wg = next(r for r in result["results"]["GCC"] if r["S"] == s)["worst_case"]
        assert c["worst_case_mean_l2"]["gcc"] == wg["mean_l2"]["mean"]
    text = "\n".join(result["summary"])
    for other in others:
        assert f"GCC vs {other}: mean L2 error" in text
    assert "gcc-jax regimes" in text and "gcc-jax regimes" in result["regime_map"]


def test_worst_case_uncoded_is_the_largest_outputs(trained, toy):
    cfg, result = toy
    ds = load_digits()
    k = cfg["num_inputs"]
    nb = result["config"]["worst_case_batches"]
    assert nb == min(3, cfg["num_batches"])
    for row in result["results"]["uncoded"]:
        s = min(row["S"], k)
        worst = []
        for idx in result["images"]["eval"][:nb]:
            fx = np.asarray(_predict(trained, jnp.asarray(ds.x_test[idx], jnp.float64)))
            norms = np.linalg.norm(fx, axis=1)  # a lost input costs ‖f(x_k)‖ (fill value 0)
            worst.append(max(sum(c) for c in itertools.combinations(norms, s)) / k)
        wc = row["worst_case"]
        np.testing.assert_allclose(wc["mean_l2"]["mean"], np.mean(worst), rtol=1e-12)
        assert wc["exhaustive"]


def test_worst_case_bounds_the_random_sets(toy):
    cfg, result = toy
    # toy sizes: C(N, S) is small, so the search is exhaustive and covers every batch
    assert result["config"]["worst_case_batches"] == cfg["num_batches"]
    for name in ("GCC", "BACC", "replication"):
        for row in result["results"][name]:
            assert row["worst_case"]["exhaustive"]
            assert row["worst_case"]["mse"]["mean"] >= row["mse"]["mean"] * (1 - 1e-12)


def test_gcc_vs_bacc_is_the_paired_ratio(trained, toy):
    _, result = toy
    for g in result["gcc_vs_bacc"]:
        s = g["S"]
        gcc_r = _reference_trials(trained, result, _code(result, "GCC", s), "GCC", s)["mean_l2"]
        bacc_r = _reference_trials(trained, result, _code(result, "BACC", s), "BACC", s)["mean_l2"]
        ratio = gcc_r.sum() / bacc_r.sum()
        np.testing.assert_allclose(g["mean_l2_ratio"]["mean"], ratio, rtol=1e-9)
        np.testing.assert_allclose(g["mean_l2_gain_percent"], 100 * (1 - ratio), rtol=1e-7)


def test_save_writes_strict_json_table_and_plots(toy, toy_result, tmp_path):
    _, result = toy
    paths = dnn.save_dnn(toy_result, tmp_path)
    text = paths["json"].read_text()
    back = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert back["schema_version"] == 1 and back["experiment"] == "dnn"
    assert set(back["metrics"]) >= set(dnn.METRICS)
    assert list(back["results"]["results"]) == list(dnn.CODES)
    model = back["results"]["model"]
    assert model["epochs"] == 1 and model["seed"] == 0 and 0 < model["test_accuracy"] <= 1
    for rows in back["results"]["results"].values():
        for row in rows:
            assert set(dnn.METRICS) <= set(row)
            assert all(set(row[m]) == {"mean", "ci95"} for m in dnn.METRICS)
    for key in ("plot", "cv_plot"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = paths["table"].read_text()
    first = result["results"]["GCC"][-1]["mean_l2"]
    assert f"{first['mean']:.4f}±{first['ci95']:.4f}" in table
    for s in result["config"]["stragglers"]:
        assert f"S={s}" in table
    # accuracies are shown with their interval clipped to [0, 1], never as mean±ci
    acc = result["results"]["GCC"][-1]["accuracy"]
    lo, hi = max(0.0, acc["mean"] - acc["ci95"]), min(1.0, acc["mean"] + acc["ci95"])
    assert f"{acc['mean']:.4f} [{lo:.4f}, {hi:.4f}]" in table
    assert f"{acc['mean']:.4f}±" not in table


def test_summary_ties_only_inside_the_margin_and_clips_accuracy():
    def comp(s, ratio, ci, diff, dci):
        return {
            "baseline": "BACC",
            "S": s,
            "mean_l2_ratio": {"mean": ratio, "ci95": ci},
            "accuracy_diff_points": {"mean": diff, "ci95": dci},
            "worst_case_mean_l2": None,
        }

    payload = {
        "results": {"GCC": []},
        "comparisons": [
            comp(0, 1e15, 3e15, 0.2, 40.0),  # includes 1 but wide: not a tie
            comp(2, 1.02, 0.05, 0.1, 0.5),  # inside ±10% and ±1 point: a tie
            comp(4, 1.3, 0.4, 3.0, 1.0),
        ],
    }
    line = dnn.summarise_comparisons(payload, [0, 2, 4])[0]
    assert "mean L2 error inconclusive at S=0, tied at S=2, inconclusive at S=4" in line
    assert "accuracy inconclusive at S=0, tied at S=2, better at S=4" in line
    assert dnn._fmt({"mean": 0.625, "ci95": 1.5883}, "accuracy") == "0.6250 [0.0000, 1.0000]"
    assert dnn._fmt({"mean": 1.2, "ci95": 0.1}, "rel_acc_labels") == "1.2000 [1.1000, 1.3000]"


def test_bad_configurations_raise_clear_errors(trained):
    cfg = dnn.toy_config()
    with pytest.raises(ValueError, match=r"every S must be in \[0, N-2\]"):
        dnn.run_dnn(**{**cfg, "stragglers": (0, 9)}, trained=trained, progress=False)
    with pytest.raises(ValueError, match="test images"):
        dnn.run_dnn(**{**cfg, "num_batches": 500}, trained=trained, progress=False)
    with pytest.raises(ValueError, match="held-out training images"):
        dnn.run_dnn(**{**cfg, "num_cv_batches": 100}, trained=trained, progress=False)
    with pytest.raises(ValueError, match="unknown code"):
        dnn.run_dnn(**cfg, codes=("gcc", "lcc"), trained=trained, progress=False)
    with pytest.raises(ValueError, match="num_cv_batches"):
        dnn.run_dnn(**{**cfg, "num_cv_batches": 0}, trained=trained, progress=False)
    with pytest.raises(ValueError, match="lam_dec_grid"):
        dnn.run_dnn(**{**cfg, "lam_dec_grid": (-1.0,)}, trained=trained, progress=False)
    with pytest.raises(ValueError, match="must be >= `num_inputs`"):
        dnn.run_dnn(**{**cfg, "num_workers": 3}, trained=trained, progress=False)


def test_evaluate_patterns_hand_values():
    code = gcc.UncodedCode(num_inputs=3, fill="zero")
    x = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    labels = np.array([0, 0, 1])  # base predicts 0, 1, 0 (ties go to the first class)
    masks = np.array([[True, True, True], [True, False, True]])
    pm = dnn.evaluate_patterns(code, jax.nn.softmax, x, labels, masks)
    fx = _softmax_np(x)
    # pattern 1 loses input 1: its estimate is the fill value 0, its error ‖f(x_1)‖
    lost = np.linalg.norm(fx[1])
    np.testing.assert_allclose(pm.mean_l2, [0.0, lost / 3], rtol=1e-14)
    np.testing.assert_allclose(pm.mse, [0.0, lost**2 / 3], rtol=1e-14)
    assert pm.correct.tolist() == [1, 1]  # input 0 right; input 1 wrong anyway; input 2 wrong
    assert pm.agree.tolist() == [3, 2]  # the missing input 1 no longer agrees
    assert pm.base_correct == 1 and pm.status.tolist() == [0, 0]


def test_evaluate_patterns_matches_eager_loop():
    # the toy run's shapes (K=4, N=10, 10 classes, 4 patterns): its compiled decode is reused
    k, n = 4, 10
    code = gcc.BerrutCode.chebyshev(num_inputs=k, num_workers=n)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 10))

    def f(v):
        return jax.nn.softmax(jnp.tanh(v) @ w)

    x = rng.standard_normal((k, 3))
    labels = rng.integers(0, 10, k).astype(np.int32)
    masks = np.asarray(gcc.sample_masks(jax.random.key(1), n, num=4, stragglers=3))
    pm = dnn.evaluate_patterns(code, f, x, labels, masks)
    fx = _softmax_np(np.tanh(x) @ w)
    yt = np.asarray(jax.vmap(f)(code.encode(x)))
    for t, mask in enumerate(masks):
        y_hat = np.asarray(_decode(code, jnp.asarray(yt), jnp.asarray(mask)).value)
        err = np.linalg.norm(y_hat - fx, axis=1)
        np.testing.assert_allclose(pm.mean_l2[t], err.mean(), rtol=1e-12)
        np.testing.assert_allclose(pm.mse[t], (err**2).mean(), rtol=1e-12)
        assert pm.correct[t] == np.sum(y_hat.argmax(1) == labels)
        assert pm.agree[t] == np.sum(y_hat.argmax(1) == fx.argmax(1))


def test_summary_calls_gcc_higher_where_the_baseline_is_exact():
    # uncoded at S = 0 is exact: its RMSEs sum to 0, the paired ratio is NaN (None once saved);
    # GCC's RMSE there is positive, so the summary must say "higher", never "tied".
    def comp(s, ratio, ci):
        return {
            "baseline": "uncoded",
            "S": s,
            "mean_l2_ratio": {"mean": ratio, "ci95": ci},
            "accuracy_diff_points": {"mean": 0.0, "ci95": 1.0},
            "worst_case_mean_l2": None,
        }

    def rows(*rmse):
        return [{"S": s, "mean_l2": {"mean": v, "ci95": 0.0}} for s, v in zip((0, 2, 4), rmse)]

    payload = {
        "results": {"GCC": rows(0.15, 0.17, 0.19)},
        "comparisons": [comp(0, float("nan"), float("nan")), comp(2, 3.7, 0.3), comp(4, 0.5, 0.1)],
    }
    line = dnn.summarise_comparisons(payload, [0, 2, 4])[0]
    assert line.startswith(
        "GCC vs uncoded: mean L2 error higher at S=0-2, lower at S=4 (ratio 0.5-3.7)"
    )
    payload["comparisons"][0]["mean_l2_ratio"] = {"mean": None, "ci95": None}
    assert dnn.summarise_comparisons(payload, [0, 2, 4])[0] == line
    payload["results"]["GCC"] = rows(0.0, 0.17, 0.19)  # both exact at S = 0
    line = dnn.summarise_comparisons(payload, [0, 2, 4])[0]
    assert "mean L2 error undefined (both exact) at S=0, higher at S=2, lower at S=4" in line
    # worst case: equal values (GCC's CV chose λ = 0, so it is GCC-interp) are "equal"
    for c, (g, o) in zip(payload["comparisons"], [(0.2, 0.2), (0.5, 0.4), (0.3, 0.6)]):
        c["worst_case_mean_l2"] = {"gcc": g, "baseline": o}
    line = dnn.summarise_comparisons(payload, [0, 2, 4])[0]
    assert line.endswith("; worst-case mean L2 error equal at S=0, higher at S=2, lower at S=4.")


def test_model_record_pins_the_trained_parameters(trained, toy_result):
    # the record a rerun is checked against: seed, epochs, accuracies and a hash of the weights
    # (retraining with the same seed is bit-identical: tests/test_training.py)
    rec = toy_result.results["model"]
    assert (rec["seed"], rec["epochs"]) == (0, trained.config["epochs"])
    assert rec["test_accuracy"] == trained.test_accuracy
    assert rec["val_accuracy"] == trained.val_accuracy
    assert rec["params_fingerprint"] == tree_fingerprint(trained.params)
    leaves, treedef = jax.tree_util.tree_flatten(trained.params)
    leaves[0] = np.nextafter(np.asarray(leaves[0]), np.float32(np.inf))  # one ulp up
    assert tree_fingerprint(treedef.unflatten(leaves)) != rec["params_fingerprint"]
    head = dnn.format_dnn_table(toy_result).splitlines()[0]
    assert f"after {rec['epochs']} epochs, seed 0, parameters {rec['params_fingerprint']}" in head


def test_cli_run_writes_what_run_dnn_computes(
    trained, cache_dir, toy, tmp_path, capsys, monkeypatch
):
    """`gcc-jax run --toy` (LeNet-5 from the module's cache) writes what `run_dnn` computes.

    Here rather than in test_cli.py: the CLI loads the model this module trained (same cache
    key), and its run reuses the programs the module's toy run compiled. Its codes are a subset
    of the toy run's, at the toy run's S values: every metric must equal the toy run's.
    """
    from gcc_jax.experiments.cli import main

    cfg, result = toy
    monkeypatch.setenv("GCC_JAX_CACHE", str(cache_dir))
    argv = ["run", "--toy", "-S", "0,3", "--codes", "gcc,uncoded", "--cv-batches", "2"]
    argv += ["--fill", "zero"]  # the module's toy run's fill rule
    rc = main([*argv, "--no-worst-case", "--out", str(tmp_path / "out"), "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["config"]["stragglers"] == [0, 3] and saved["config"]["num_cv_batches"] == 2
    assert list(saved["results"]["results"]) == ["GCC", "uncoded"]
    assert not saved["config"]["worst_case"]
    for name in ("results.txt", "results.png", "cv.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    # the CLI ran the model cached by this module's training (its parameters' fingerprint) ...
    model = saved["results"]["model"]
    assert model["from_cache"] and model["params_fingerprint"] == tree_fingerprint(trained.params)
    # ... and computed what the module's toy run (`run_dnn`, the same configuration) computed
    for name, rows in saved["results"]["results"].items():
        assert len(rows) == len(result["results"][name]) == len(cfg["stragglers"])
        for row, ref in zip(rows, result["results"][name], strict=True):
            assert row["worst_case"] is None and ref["worst_case"] is not None
            assert {**row, "worst_case": ref["worst_case"]} == ref
    assert saved["results"]["cv"] == result["cv"]
    for name in ("GCC", "uncoded"):
        assert f"{result['results'][name][-1]['rmse']['mean']:.4f}" in out


# -- the localization (regression) run ---------------------------------------------------------

_LOC_CODES = ("GCC", "uncoded", "replication")


def _small(train):
    """`train_localizer` on 300 training images (the toy runs' localizer: seconds to train)."""
    return lambda settings, **kw: train(settings._replace(num_train=300), **kw)


@pytest.fixture(scope="module")
def localizer(cache_dir):
    settings = LocalizerSettings(epochs=1, num_train=300)  # the toy run's settings, 300 images
    return train_localizer(settings, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def loc_run(localizer):
    """A toy regression run, each batch in its principal-component order."""
    r = dnn.run_dnn(
        **dnn.toy_config(), dataset="localization", codes=_LOC_CODES, order="pca",
        trained=localizer, progress=False,
    )  # fmt: skip
    return r, {"config": {**r.config, **r.seeds}, **r.results}


def _loc_reference(localizer, result, name, s):
    """Per-trial mean L2 error and MSE (B, T) of code `name` at `S = s`: the localizer applied
    to the recorded images (in the recorded order) and to their encodings, every pattern
    decoded one at a time, errors by NumPy."""
    cfg = result["config"]
    code = _code(result, name, s)
    apply = jax.jit(localizer.apply)
    keys = jax.random.split(jax.random.key(cfg["seed"]), 3)
    out = {"mean_l2": [], "mse": [], "box": []}
    for b, idx in enumerate(result["images"]["eval"]):
        x = jnp.asarray(localizer.data.x_test[idx], jnp.float64)
        fx = np.asarray(apply(localizer.params, x))
        yt = apply(localizer.params, code.encode(x))
        masks = gcc.sample_masks(
            jax.random.fold_in(jax.random.fold_in(keys[1], s), b),
            cfg["num_workers"],
            num=cfg["num_trials"],
            stragglers=s,
        )
        l2, sq = [], []
        for mask in np.asarray(masks):
            m = mask[: cfg["num_inputs"]] if name == "uncoded" else mask
            dec = _decode(code, yt, jnp.asarray(m))
            assert int(dec.status) == 0
            err = np.sqrt(((np.asarray(dec.value) - fx) ** 2).sum(axis=1))
            l2.append(err.mean())
            sq.append((err**2).mean())
        out["mean_l2"].append(l2)
        out["mse"].append(sq)
        out["box"].append(((fx - localizer.data.y_test[idx]) ** 2).sum(axis=1))
    return {m: np.array(v, float) for m, v in out.items()}


def test_localization_run_is_the_loop_reference_in_the_pca_order(localizer, loc_run):
    _, result = loc_run
    cfg = result["config"]
    assert (cfg["dataset"], cfg["model"], cfg["task"], cfg["order"]) == (
        "localization", "cnn", "regression", "pca",
    )  # fmt: skip
    # the evaluation images: the split rule's test images, each batch sorted along its first
    # principal component (NumPy SVD, either direction)
    k = cfg["num_inputs"]
    drawn = np.random.default_rng((cfg["seed"], 0xD1A)).permutation(1000)[: cfg["num_batches"] * k]
    for before, after in zip(drawn.reshape(-1, k), result["images"]["eval"], strict=True):
        x = localizer.data.x_test[before].reshape(k, -1).astype(np.float64)
        centred = x - x.mean(axis=0)
        score = centred @ np.linalg.svd(centred, full_matrices=False)[2][0]
        expected = before[np.argsort(score)]
        assert after in (expected.tolist(), expected[::-1].tolist())
    assert np.all(np.asarray(result["images"]["cv"]) >= 300)  # held out from the training
    for name in _LOC_CODES:
        for row in result["results"][name]:
            ref = _loc_reference(localizer, result, name, row["S"])
            batch_means = ref["mean_l2"].mean(axis=1)
            t = stats.t.ppf(0.975, len(batch_means) - 1)
            # atol: the round-off of exact decodes (replication with a copy alive)
            np.testing.assert_allclose(row["mse"]["mean"], ref["mse"].mean(), rtol=1e-9, atol=1e-20)
            np.testing.assert_allclose(
                row["rmse"]["mean"], np.sqrt(ref["mse"].mean()), rtol=1e-9, atol=1e-10
            )
            np.testing.assert_allclose(
                row["mean_l2"]["mean"], ref["mean_l2"].mean(), rtol=1e-9, atol=1e-14
            )
            np.testing.assert_allclose(
                row["mean_l2"]["ci95"], t * stats.sem(batch_means), rtol=1e-7, atol=1e-14
            )
    np.testing.assert_allclose(result["base"]["mse"], ref["box"].mean(), rtol=1e-9)
    # GCC against uncoded: the paired ratios of the summed per-trial errors
    for c in result["comparisons"]:
        if c["baseline"] != "uncoded" or c["S"] == 0:  # uncoded is exact at S = 0
            continue
        g = _loc_reference(localizer, result, "GCC", c["S"])
        o = _loc_reference(localizer, result, "uncoded", c["S"])
        for m in ("mse", "mean_l2"):
            np.testing.assert_allclose(c[f"{m}_ratio"]["mean"], g[m].sum() / o[m].sum(), rtol=1e-9)


def test_localization_run_reports_no_accuracy(localizer, loc_run, tmp_path):
    run, result = loc_run
    assert set(run.metrics) & {"accuracy", "rel_acc_labels", "rel_acc_base"} == set()
    for rows in result["results"].values():
        for row in rows:
            assert set(dnn.METRICS) & set(row) == set(dnn.ERROR_METRICS)
            assert set(dnn.METRICS) & set(row["worst_case"]) == set(dnn.ERROR_METRICS)
    for c in result["comparisons"]:
        assert "accuracy_diff_points" not in c and c["worst_case_mse"] is not None
    assert result["model"] == localizer.record
    assert result["base"]["num_images"] == result["config"]["num_batches"] * 4
    text = dnn.format_dnn_table(run)
    summary = "\n".join(result["summary"])
    for word in ("accuracy", "RelAcc", "nan"):
        assert word not in text and word not in summary
    assert f"test box MSE {localizer.record['test_mse']:.4g}" in text
    for other in ("uncoded", "replication"):
        assert f"GCC vs {other}: MSE " in summary and "; worst-case MSE " in summary
    assert len(dnn.plot_dnn(run).axes) == 2  # mean L2 error and MSE only


def test_localization_model_is_the_regime_maps(localizer, loc_run, cache_dir, monkeypatch):
    # `gcc-jax regimes` trains its localization workload through the same helper and settings:
    # it loads the checkpoint the run used
    from gcc_jax.experiments import regimes

    monkeypatch.setattr(regimes, "train_localizer", _small(train_localizer))
    _, info = regimes._localization_workload(4, 2, 2, 0, jnp.float64, 1, cache_dir, True, False)
    assert info["from_cache"]
    assert info["params_fingerprint"] == loc_run[1]["model"]["params_fingerprint"]


def test_localization_refuses_what_does_not_apply(trained, localizer, tmp_path, capsys):
    from gcc_jax.experiments.cli import main

    cfg = {**dnn.toy_config(), "dataset": "localization", "progress": False}
    for kw, match in (
        ({"model": "lenet5"}, "`model`: the localization workload runs the small CNN"),
        ({"data_path": tmp_path}, "`data_path`: the localization images are made offline"),
        ({"model_kwargs": {"dim": 8}}, "`model_kwargs`: the localizer's architecture is fixed"),
        ({"trained": trained}, "`trained` must be a Localizer"),
    ):
        with pytest.raises(ValueError, match=match):
            dnn.run_dnn(**cfg, **kw)
    with pytest.raises(ValueError, match="`trained` must be a TrainedModel"):
        dnn.run_dnn(**dnn.toy_config(), trained=localizer, progress=False)
    for argv, flag_ in ((["--model", "vit"], "--model"), (["--data-path", "."], "--data-path")):
        with pytest.raises(SystemExit) as exit_info:
            main(["run", "--dataset", "localization", *argv, "--out", str(tmp_path / "x")])
        assert exit_info.value.code == 2
        assert f"argument {flag_}: with --dataset localization" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_cli_run_localization_writes_what_run_dnn_computes(
    loc_run, cache_dir, tmp_path, capsys, monkeypatch
):
    """`gcc-jax run --dataset localization --toy` loads the module's localizer (its checkpoint,
    trained on 300 images) and computes the toy run's numbers."""
    from gcc_jax.experiments.cli import main

    _, result = loc_run
    monkeypatch.setenv("GCC_JAX_CACHE", str(cache_dir))
    monkeypatch.setattr(dnn, "train_localizer", _small(train_localizer))
    argv = ["run", "--dataset", "localization", "--toy", "--codes", "gcc,uncoded,replication"]
    argv += ["--order", "pca", "--no-worst-case", "--out", str(tmp_path / "out"), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    for name in ("results.txt", "results.png", "cv.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert saved["results"]["model"]["from_cache"]
    assert saved["results"]["images"] == result["images"]
    for name, rows in saved["results"]["results"].items():
        for row, ref in zip(rows, result["results"][name], strict=True):
            assert row["worst_case"] is None
            assert {**row, "worst_case": ref["worst_case"]} == ref
    assert "test box MSE" in out and "accuracy" not in out
