"""`gcc-jax compare-learned` (`gcc_jax.experiments.learned`) against loops and hand values.

One toy run (GCC_JAX_TOY=1 sizes) through the CLI is shared by the module; its ParM, GCC and
natural-point BACC rows are recomputed here with eager decodes, one group and one pattern at a
time, from the documented protocol (cached models reloaded by their training calls).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gcc_jax as gcc
from gcc_jax.experiments import learned as exp
from gcc_jax.experiments.cli import main
from gcc_jax.nn.data import load_digits
from gcc_jax.nn.models import make_model
from gcc_jax.nn.training import TrainSettings, train_classifier


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cl-cache")
    out = tmp_path_factory.mktemp("cl-out")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GCC_JAX_CACHE", str(cache))
        assert main(["compare-learned", "--out", str(out), "--no-progress"]) == 0
    rec = json.loads((out / "compare_learned.json").read_text())
    assert rec["schema_version"] == 1 and rec["experiment"] == "compare_learned"
    result = {"config": {**rec["config"], **rec["seeds"]}, **rec["results"]}
    return cache, out, result


@pytest.fixture(scope="module")
def setup(toy):
    """The base model, evaluation images and outputs the toy run used (from the cache)."""
    cache, _, result = toy
    cfg = result["config"]
    ds = load_digits()
    tm = train_classifier(
        "mlp",
        ds,
        epochs=cfg["base_epochs"],
        batch_size=cfg["batch_size"],
        seed=cfg["seed"],
        cache_dir=cache,
        progress=False,
    )
    assert tm.from_cache
    ev = exp.eval_indices(ds.x_test.shape[0], cfg["eval_images"], cfg["seed"])
    x = ds.x_test[ev]  # float32: the experiment's workers run the model in its precision
    # one compiled forward pass (eagerly, every layer's operations would compile one by one)
    logits = np.asarray(jax.jit(jax.vmap(lambda v: tm.apply(tm.params, v)))(jnp.asarray(x)))
    return ds, tm, x, ds.y_test[ev], logits


def _row(result, method, k=2, model="mlp"):
    rows = [
        r for r in result["rows"] if r["method"] == method and r["k"] == k and r["model"] == model
    ]
    assert len(rows) == 1, method
    return rows[0]


def test_outputs_and_structure(toy):
    _, out, result = toy
    for name in ("compare_learned.json", "compare_learned.txt", "compare_learned.png"):
        assert (out / name).stat().st_size > 0
    assert result["config"]["dataset"] == "digits"  # the toy config (GCC_JAX_TOY=1)
    assert [r["method"] for r in result["rows"]] == list(exp.METHODS)
    parm = _row(result, "ParM-sum")
    assert (parm["num_inputs"], parm["num_workers"], parm["stragglers"]) == (2, 3, 1)
    nat = _row(result, "GCC-natural")
    g = result["config"]["gcc_groups"]
    assert (nat["num_inputs"], nat["num_workers"], nat["stragglers"]) == (2 * g, 3 * g, g)
    assert nat["extra_workers_per_input"] == parm["extra_workers_per_input"] == 0.5
    for r in result["rows"]:  # the gap is the base accuracy minus the degraded accuracy
        base = result["models"]["mlp"]["eval_accuracy"]
        assert r["gap_points"] == pytest.approx(100 * (base - r["overall"]["mean"]), abs=1e-9)
        assert r["num_failed"] == 0
        mlp = result["models"]["mlp"]  # every row states its base model, accuracy and epochs
        assert (r["base_model"], r["base_epochs"]) == ("mlp", mlp["epochs"])
        assert r["base_test_accuracy"] == mlp["test_accuracy"]
        learned = r["method"].startswith(("ParM", "learned"))
        assert (r["train_time_s"] > 0) == learned and r["output"] == (
            "logits" if learned else "probs"
        )
    assert result["published"]["parm_gap_points"] == 1.79
    assert [c["method"] for c in result["comparison"]] == ["ParM-sum", "ParM-concat"]
    assert not any(c["like_for_like"] for c in result["comparison"])  # MLP vs a ResNet-18
    text = (out / "compare_learned.txt").read_text()
    assert "1.79 points" in text and "ParM-concat" in text and "NOT like for like" in text


def test_parm_row_matches_eager_loop(toy, setup):
    cache, _, result = toy
    cfg = result["config"]
    ds, tm, x, labels, logits = setup
    _, init = make_model("mlp", input_shape=ds.input_shape, num_classes=10, key=cfg["seed"] + 1)
    idx = exp.code_train_indices(ds.num_train, cfg["code_train_size"], cfg["seed"])
    trained = gcc.train_parity_model(
        tm.apply,
        tm.params,
        ds.x_train[idx],
        num_inputs=2,
        init_params=init,
        settings=TrainSettings(
            epochs=cfg["code_epochs"], seed=cfg["seed"], cache_dir=cache, progress=False
        ),
    )
    assert trained.from_cache
    code = trained.code
    f = lambda v: tm.apply(tm.params, v)  # noqa: E731
    workers = jax.jit(lambda xs: code.worker_outputs(f, xs).astype(float))
    recon = overall = total = everything = 0
    for g in range(len(x) // 2):
        xs, ys = jnp.asarray(x[2 * g : 2 * g + 2]), labels[2 * g : 2 * g + 2]
        y = workers(xs)
        for j in range(3):
            mask = np.ones(3, bool)
            mask[j] = False
            out = np.asarray(code.decode(y, jnp.asarray(mask)))
            everything += int(np.sum(out.argmax(1) == ys))
            if j < 2:
                recon += int(out[j].argmax() == logits[2 * g + j].argmax())
                overall += int(out[j].argmax() == ys[j])
                total += 1
    row = _row(result, "ParM-sum")
    assert row["num_degraded"] == total
    assert row["recon"]["mean"] == pytest.approx(recon / total, abs=1e-12)
    assert row["overall"]["mean"] == pytest.approx(overall / total, abs=1e-12)
    assert row["all_overall"]["mean"] == pytest.approx(everything / (3 * total), abs=1e-12)


def test_gcc_and_natural_bacc_rows_match_eager_loop(toy, setup):
    _, _, result = toy
    cfg = result["config"]
    _, tm, x, labels, logits = setup
    f = lambda v: jax.nn.softmax(tm.apply(tm.params, v))  # noqa: E731
    g, trials = cfg["gcc_groups"], cfg["gcc_trials"]
    cases = [("GCC", 2, 3, None), ("BACC-natural", 2 * g, 3 * g, g)]
    for method, kk, n, s in cases:
        row = _row(result, method)
        if method == "GCC":
            code = gcc.SplineCode.chebyshev(num_inputs=kk, num_workers=n, lam_dec=row["lam_dec"])
        else:
            code = gcc.BerrutCode.chebyshev(num_inputs=kk, num_workers=n)
        _, k_ev = jax.random.split(jax.random.fold_in(jax.random.key(cfg["seed"]), n))
        workers = jax.jit(
            lambda xs, code=code: jax.vmap(f)(code.encode(xs).astype(xs.dtype)).astype(float)
        )
        recon = overall = total = 0
        for b in range(len(x) // kk):
            xs, ys = jnp.asarray(x[b * kk : (b + 1) * kk]), labels[b * kk : (b + 1) * kk]
            y = workers(xs)
            if s is None:
                masks = ~np.eye(n, dtype=bool)
            else:
                key = jax.random.fold_in(jax.random.fold_in(k_ev, kk), b)
                masks = np.asarray(gcc.sample_masks(key, n, num=trials, stragglers=s))
            for mask in masks:
                pred = np.asarray(code.decode(y, jnp.asarray(mask))).argmax(1)
                recon += int(np.sum(pred == logits[b * kk : (b + 1) * kk].argmax(1)))
                overall += int(np.sum(pred == ys))
                total += kk
        assert row["num_degraded"] == total, method
        assert row["recon"]["mean"] == pytest.approx(recon / total, abs=1e-12), method
        assert row["overall"]["mean"] == pytest.approx(overall / total, abs=1e-12), method


def test_score_by_hand():
    # Two groups, two patterns, k = 2, three classes; slot (p, j) degraded when p == j.
    values = np.zeros((2, 2, 2, 3))
    values[0, 0, 0, 1] = values[0, 1, 1, 2] = values[1, 0, 0, 0] = values[1, 1, 1, 0] = 1.0
    values[:, :, :, :][values.sum(-1) == 0] = [0, 0, 1]  # non-degraded slots predict class 2
    status = np.array([[0, 0], [0, 1]])  # group 1, pattern 1 failed: counts as wrong
    degraded = np.array([[True, False], [False, True]])
    base = np.array([[1, 2], [0, 2]])
    labels = np.array([[1, 0], [2, 2]])
    out = exp.score(values, status, degraded, base, labels)
    # degraded slots: g0 (p0,j0) pred 1, (p1,j1) pred 2; g1 (p0,j0) pred 0, (p1,j1) failed
    assert out["recon"]["mean"] == pytest.approx((1.0 + 0.5) / 2)
    assert out["overall"]["mean"] == pytest.approx((0.5 + 0.0) / 2)
    # all slots: g0 preds [[1,2],[2,2]] vs labels [1,0] -> 1/4; g1 [[0,2],[fail]] vs [2,2] -> 1/4
    assert out["all_overall"]["mean"] == pytest.approx(0.25)
    assert (out["num_degraded"], out["num_failed"]) == (4, 1)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="k"):
        exp.run_compare_learned(ks=(1,), progress=False)
    with pytest.raises(ValueError, match="learned_encoder"):
        exp.run_compare_learned(learned_encoder="rnn", progress=False)
    with pytest.raises(ValueError, match="lam_dec_grid"):
        exp.run_compare_learned(lam_dec_grid=(-1.0,), progress=False)


def test_only_the_unnamed_default_falls_back_to_digits(tmp_path):
    ds, requested, note = exp._load(None, tmp_path)  # no --dataset, an empty directory
    assert ds.name == "digits" and requested == "fashion_mnist"
    assert "Fashion-MNIST not found" in note and str(tmp_path) in note
    for name in ("fashion_mnist", "mnist"):  # a named data set is never replaced
        with pytest.raises(gcc.nn.data.DatasetNotFoundError):
            exp._load(name, tmp_path)
