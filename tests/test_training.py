"""Tests for gcc_jax.nn.training: the jitted step, determinism, accuracy on digits, the cache, and
the training of ParM parity models and learned codes (losses against NumPy, checkpoints)."""

import contextlib
import json
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gcc_jax as gcc
from gcc_jax.codes._coder import mlp_apply
from gcc_jax.nn.data import load_digits
from gcc_jax.nn.models import make_model
from gcc_jax.nn.training import (
    CACHE_ENV_VAR,
    Batch,
    CacheWarning,
    TrainSettings,
    accuracy,
    default_cache_dir,
    fit,
    make_train_step,
    train_classifier,
)
from gcc_jax.nn.training import _learned as learned_training
from gcc_jax.nn.training import _parity as parity_training

HYPER = dict(epochs=10, batch_size=32, lr=3e-3, seed=0, progress=False)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Never touch the user's real cache, even if a test forgets `cache_dir`."""
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "env-cache"))


@pytest.fixture(scope="module")
def digits():
    return load_digits()


@pytest.fixture(scope="module")
def mlp_run(digits, tmp_path_factory):
    """One cached MLP training on digits, shared by the cache tests."""
    cache = tmp_path_factory.mktemp("cache")
    return cache, train_classifier("mlp", digits, cache_dir=cache, **HYPER)


@contextlib.contextmanager
def optimised_compile():
    """Compile with XLA's optimisations on inside (the suite turns most off: ../conftest.py).

    Four epochs of a LeNet-5 are the one place in this file where the convolutions' run time,
    not compiling, dominates: optimised they cost about a quarter of the CPU time (measured in
    this file: 6.5 -> 1.5 s); everything else here is cheaper compiled unoptimised.
    """
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


def tree_equal(a, b) -> bool:
    same_structure = jax.tree.structure(a) == jax.tree.structure(b)
    return same_structure and all(
        np.array_equal(x, y) and np.asarray(x).dtype == np.asarray(y).dtype
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def test_step_is_pure_and_descends(digits):
    apply, params = make_model("mlp", input_shape=(8, 8, 1), num_classes=10, key=0)
    opt = optax.adam(1e-2)
    step = make_train_step(apply, opt)
    batch = Batch(digits.x_train[:64], digits.y_train[:64])
    state = opt.init(params)
    p1, s1, loss1 = step(params, state, batch)
    p1b, _, loss1b = step(params, state, batch)  # same inputs, same outputs: no hidden state
    assert tree_equal(p1, p1b) and float(loss1) == float(loss1b)
    assert loss1.shape == () and loss1.dtype == jnp.float32
    losses = [float(loss1)]
    p, s = p1, s1
    for _ in range(20):
        p, s, loss = step(p, s, batch)
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]
    assert jax.tree.structure(p) == jax.tree.structure(params)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(p))


def test_fit_is_deterministic_by_seed(digits):
    apply, params = make_model("lenet5", input_shape=(8, 8, 1), num_classes=10, key=0)
    kw = dict(optimizer=optax.adam(1e-3), epochs=1, batch_size=64, progress=False)
    x, y = digits.x_train[:256], digits.y_train[:256]  # 4 steps: LeNet-5's run time dominates
    a = fit(apply, params, x, y, seed=1, **kw)
    b = fit(apply, params, x, y, seed=1, **kw)
    c = fit(apply, params, x, y, seed=2, **kw)
    if jax.default_backend() == "cpu":
        assert tree_equal(a.params, b.params) and a.train_losses == b.train_losses
    else:  # a GPU's atomic reductions reorder float32 sums from run to run: equal to round-off
        jax.tree.map(
            lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-6), a.params, b.params
        )
        np.testing.assert_allclose(a.train_losses, b.train_losses, rtol=1e-5)
    assert not tree_equal(a.params, c.params)
    assert a.num_steps == 256 // 64 and a.val_accuracies == ()


def test_accuracy_matches_numpy_with_ragged_last_chunk(digits):
    apply, params = make_model("mlp", input_shape=(8, 8, 1), num_classes=10, key=3)
    x, y = digits.x_test, digits.y_test
    pred = np.argmax(np.asarray(jax.jit(apply)(params, x)), axis=-1)
    assert accuracy(apply, params, x, y, batch_size=7) == pytest.approx(np.mean(pred == y))
    assert accuracy(apply, params, x, y) == pytest.approx(np.mean(pred == y))


@pytest.mark.parametrize("name, epochs, min_acc", [("mlp", 10, 0.9), ("lenet5", 4, 0.9)])
def test_train_on_digits_beats_chance(digits, mlp_run, name, epochs, min_acc):
    # the LeNet-5 (all of it: the accuracies compared below come from one compiled model)
    # trains and predicts compiled optimised: its convolutions' run time dominates
    with optimised_compile() if name == "lenet5" else contextlib.nullcontext():
        _train_on_digits_beats_chance(digits, mlp_run, name, epochs, min_acc)


def _train_on_digits_beats_chance(digits, mlp_run, name, epochs, min_acc):
    if name == "mlp":
        tm = mlp_run[1]
    else:  # 4 epochs: the LeNet-5's steps cost ~10x the MLP's (0.95 test accuracy at seed 0)
        tm = train_classifier(name, digits, use_cache=False, **(HYPER | dict(epochs=epochs)))
    assert not tm.from_cache and tm.num_steps == epochs * (1293 // 32)
    assert len(tm.train_losses) == epochs and tm.train_losses[-1] < 0.3 * tm.train_losses[0]
    assert tm.test_accuracy > min_acc and tm.val_accuracy > min_acc
    assert len(tm.val_accuracies) == epochs
    # the reported accuracy is the model's accuracy on the test split
    probs = jax.jit(tm.predict_proba)(digits.x_test)
    assert np.mean(np.argmax(probs, -1) == digits.y_test) == pytest.approx(tm.test_accuracy)
    if name == "mlp":
        f = tm.worker_fn()
        np.testing.assert_allclose(f(digits.x_test[0]), probs[0], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "name, kwargs", [("cnn", {}), ("vit", dict(dim=32, depth=1, num_heads=2, mlp_dim=64))]
)
def test_other_models_learn(digits, name, kwargs):
    tm = train_classifier(
        name,
        digits,
        epochs=3,
        batch_size=64,
        lr=3e-3,
        model_kwargs=kwargs,
        use_cache=False,
        progress=False,
    )
    assert tm.train_losses[-1] < 0.7 * tm.train_losses[0]
    assert tm.test_accuracy > 0.3  # chance is 0.1


def test_same_seed_gives_bit_identical_params(digits, tmp_path):
    kw = dict(epochs=2, batch_size=64, lr=1e-3, progress=False, use_cache=False)
    a = train_classifier("mlp", digits, seed=5, **kw)
    b = train_classifier("mlp", digits, seed=5, **kw)
    c = train_classifier("mlp", digits, seed=6, **kw)
    assert tree_equal(a.params, b.params) and a.test_accuracy == b.test_accuracy
    assert not tree_equal(a.params, c.params)
    assert not any(Path(tmp_path).rglob("*.npz"))  # use_cache=False writes nothing


def test_second_call_loads_from_cache(digits, mlp_run):
    cache, first = mlp_run
    assert first.cache_path.with_suffix(".npz").is_file()
    assert first.cache_path.with_suffix(".json").is_file()
    assert first.cache_path.parent == cache / "models"
    second = train_classifier("mlp", digits, cache_dir=cache, **HYPER)
    assert second.from_cache and second.num_steps == 0
    assert tree_equal(second.params, first.params)
    assert second.test_accuracy == first.test_accuracy
    assert second.train_losses == first.train_losses
    assert second.cache_path == first.cache_path
    meta = json.loads(first.cache_path.with_suffix(".json").read_text())
    assert meta["config"]["model"] == "mlp" and meta["config"]["dataset"] == "digits"
    assert meta["config"]["lr"] == HYPER["lr"]


def test_cache_key_depends_on_hyperparameters_and_data(digits, mlp_run):
    cache, first = mlp_run
    other_lr = train_classifier(
        "mlp", digits, cache_dir=cache, **{**HYPER, "lr": 1e-3, "epochs": 1}
    )
    assert not other_lr.from_cache and other_lr.cache_path != first.cache_path
    other_split = load_digits(seed=1)
    other_data = train_classifier("mlp", other_split, cache_dir=cache, **{**HYPER, "epochs": 1})
    assert not other_data.from_cache and other_data.cache_path != other_lr.cache_path


@pytest.mark.parametrize("damage", ["npz-garbage", "npz-truncated", "json-garbage", "json-gone"])
def test_corrupt_cache_retrains_with_a_warning(digits, mlp_run, tmp_path, damage):
    cache, first = mlp_run
    own = tmp_path / "cache"
    (own / "models").mkdir(parents=True)
    for suffix in (".npz", ".json"):
        src = first.cache_path.with_suffix(suffix)
        (own / "models" / src.name).write_bytes(src.read_bytes())
    stem = own / "models" / first.cache_path.name
    npz, meta = stem.with_suffix(".npz"), stem.with_suffix(".json")
    if damage == "npz-garbage":
        npz.write_bytes(b"not a zip file at all")
    elif damage == "npz-truncated":
        npz.write_bytes(npz.read_bytes()[:100])
    elif damage == "json-garbage":
        meta.write_text("{ this is not json")
    else:
        meta.unlink()
    with pytest.warns(CacheWarning, match="retraining"):
        again = train_classifier("mlp", digits, cache_dir=own, **HYPER)
    assert not again.from_cache and again.num_steps > 0
    assert tree_equal(again.params, first.params)  # deterministic retraining
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = train_classifier("mlp", digits, cache_dir=own, **HYPER)  # repaired
    assert third.from_cache and tree_equal(third.params, first.params)


def test_tampered_parameters_are_rejected(digits, mlp_run, tmp_path):
    """A checkpoint whose arrays no longer match the model (shape) is retrained, not used."""
    cache, first = mlp_run
    own = tmp_path / "cache"
    (own / "models").mkdir(parents=True)
    stem = own / "models" / first.cache_path.name
    with np.load(first.cache_path.with_suffix(".npz")) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["layers/0/kernel"] = arrays["layers/0/kernel"][:-1]
    np.savez(stem.with_suffix(".npz"), **arrays)
    meta = json.loads(first.cache_path.with_suffix(".json").read_text())
    import hashlib

    meta["npz_sha256"] = hashlib.sha256(stem.with_suffix(".npz").read_bytes()).hexdigest()
    stem.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.warns(CacheWarning, match="layers/0/kernel"):
        again = train_classifier("mlp", digits, cache_dir=own, **HYPER)
    assert not again.from_cache and tree_equal(again.params, first.params)


def test_default_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv(CACHE_ENV_VAR)
    assert default_cache_dir() == tmp_path / "xdg" / "gcc_jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "gcc_jax"


def test_env_var_cache_is_used_without_cache_dir(digits, monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "via-env"))
    tm = train_classifier("mlp", digits, epochs=1, batch_size=256, progress=False)
    assert tm.cache_path.parent == tmp_path / "via-env" / "models"
    assert train_classifier("mlp", digits, epochs=1, batch_size=256, progress=False).from_cache


def test_progress_bar_and_summary(digits, capsys):
    train_classifier("mlp", digits, epochs=1, batch_size=256, use_cache=False, progress=True)
    captured = capsys.readouterr()
    # the bar (tqdm) and the summary line both go to stderr: stdout stays for results
    assert "test accuracy" in captured.err and "test accuracy" not in captured.out
    assert "train mlp on digits" in captured.err


def test_bad_arguments(digits):
    with pytest.raises(ValueError, match="val_fraction"):
        train_classifier("mlp", digits, val_fraction=1.0, use_cache=False, progress=False)
    with pytest.raises(ValueError, match="must be one of"):
        train_classifier("resnet", digits, use_cache=False, progress=False)
    apply, params = make_model("mlp", input_shape=(8, 8, 1), num_classes=10)
    with pytest.raises(ValueError, match="epochs"):
        fit(
            apply,
            params,
            digits.x_train,
            digits.y_train,
            optimizer=optax.adam(1e-3),
            epochs=0,
            batch_size=8,
            seed=0,
        )


# -- ParM parity models and learned codes -------------------------------------------------------


def linear_base(params, x):
    """A bias-free linear base model on one input: ``F(x) = W vec(x)``; F(Σx) = Σ F(x)."""
    return params["w"] @ jnp.ravel(x).astype(params["w"].dtype)


def mlp_np(layers, h):
    h = np.asarray(h, np.float64)
    for i, layer in enumerate(layers):
        h = h @ np.asarray(layer["w"], np.float64) + np.asarray(layer["b"], np.float64)
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def test_coder_mlp_matches_numpy():
    rng = np.random.default_rng(1)
    layers = [
        {"w": jnp.asarray(rng.normal(size=(5, 4))), "b": jnp.asarray(rng.normal(size=4))},
        {"w": jnp.asarray(rng.normal(size=(4, 3))), "b": jnp.asarray(rng.normal(size=3))},
    ]
    h = rng.normal(size=(2, 5))
    np.testing.assert_allclose(mlp_apply(layers, jnp.asarray(h)), mlp_np(layers, h), rtol=1e-12)


def test_parity_loss_matches_numpy():
    rng = np.random.default_rng(4)
    k, b = 3, 5
    x = rng.random((k * b, 2, 2, 1))
    y = rng.normal(size=(k * b, 3))
    params = {"w": jnp.asarray(rng.normal(size=(3, 4)))}
    task = parity_training._ParityTask(linear_base, k, "sum")
    loss = parity_training._parity_loss(task, params, Batch(jnp.asarray(x), jnp.asarray(y)))
    w = np.asarray(params["w"])
    expect = np.mean(
        [
            (w @ x[g * k : (g + 1) * k].sum(axis=0).ravel() - y[g * k : (g + 1) * k].sum(0)) ** 2
            for g in range(b)
        ]
    )
    np.testing.assert_allclose(float(loss), expect, rtol=1e-12)


@pytest.fixture(scope="module")
def tiny():
    """Digits with a bias-free linear base model: the optimal parity model is the base itself."""
    ds = load_digits()
    rng = np.random.default_rng(0)
    base = {"w": jnp.asarray(rng.normal(size=(10, 64)) * 0.1, jnp.float32)}
    init = {"w": jnp.asarray(rng.normal(size=(10, 64)) * 0.1, jnp.float32)}
    return ds.x_train[:600], base, init


def _train_parity(tiny, cache_dir, **kw):
    x, base, init = tiny
    settings = dict(epochs=15, batch_size=16, lr=1e-2, progress=False, cache_dir=cache_dir)
    settings = TrainSettings(**(settings | kw))
    return gcc.train_parity_model(
        linear_base, base, x, num_inputs=2, init_params=init, settings=settings
    )


def test_parity_training_reduces_the_loss_and_checkpoint_round_trips(tiny, tmp_path):
    x, base, init = tiny
    trained = _train_parity(tiny, tmp_path)
    assert not trained.from_cache and trained.num_steps == 15 * (540 // 32)
    assert len(trained.train_losses) == len(trained.val_metrics) == 15
    # The held-out loss, recomputed in NumPy, falls by more than an order of magnitude.
    _, val = parity_training.split_groups(x.shape[0], 2, 0.1, 0)
    wb, xs = np.asarray(base["w"]), x.reshape(x.shape[0], -1).astype(np.float64)

    def held_out_loss(w):
        return np.mean([(w @ xs[g].sum(0) - wb @ xs[g].sum(0)) ** 2 for g in val])

    before = held_out_loss(np.asarray(init["w"], np.float64))
    after = held_out_loss(np.asarray(trained.code.parity_params["w"], np.float64))
    assert after < 0.05 * before
    assert trained.train_losses[-1] < 0.05 * trained.train_losses[0]
    # Degraded-mode agreement with the base argmax on the held-out groups improves too.
    assert trained.val_metrics[-1] > trained.val_metrics[0] + 0.2
    # Round trip: the second call loads bit-identical parameters and the same history.
    again = _train_parity(tiny, tmp_path)
    assert again.from_cache and again.cache_path == trained.cache_path
    np.testing.assert_array_equal(again.code.parity_params["w"], trained.code.parity_params["w"])
    assert again.code.parity_params["w"].dtype == jnp.float32
    assert again.train_losses == trained.train_losses
    assert again.val_metrics == trained.val_metrics
    assert again.train_time_s == pytest.approx(trained.train_time_s)
    meta = json.loads(trained.cache_path.with_suffix(".json").read_text())
    assert meta["config"]["encoder"] == "sum" and meta["config"]["weight_decay"] == 1e-5
    # Another hyper-parameter is another checkpoint; a corrupt one is retrained with a warning.
    other = _train_parity(tiny, tmp_path, epochs=1)
    assert not other.from_cache and other.cache_path != trained.cache_path
    trained.cache_path.with_suffix(".npz").write_bytes(b"garbage")
    with pytest.warns(CacheWarning, match="checksum"):
        redo = _train_parity(tiny, tmp_path)
    assert not redo.from_cache
    np.testing.assert_array_equal(redo.code.parity_params["w"], trained.code.parity_params["w"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _train_parity(tiny, tmp_path).from_cache


def test_parity_training_rejects_bad_arguments(tiny, tmp_path):
    with pytest.raises(ValueError, match="epochs"):
        _train_parity(tiny, tmp_path, epochs=0)
    with pytest.raises(ValueError, match="val_fraction"):
        _train_parity(tiny, tmp_path, val_fraction=0.0)
    with pytest.raises(ValueError, match="even H and W"):
        x, base, init = tiny
        gcc.train_parity_model(
            linear_base, base, x[:, :7], num_inputs=2, init_params=init, encoder="concat"
        )


def test_learned_loss_matches_numpy():
    rng = np.random.default_rng(4)
    k, r, b, m = 2, 2, 3, 3
    base = {"w": jnp.asarray(rng.normal(size=(m, 4)))}
    code = gcc.LearnedCode.init(
        key=4, num_inputs=k, num_parities=r, input_shape=(4,), output_size=m, dtype=jnp.float64
    )
    params = {"encoder": code.encoder_params, "decoder": code.decoder_params}
    pats = gcc.codes.erasure_patterns(k, r)
    task = learned_training._LearnedTask(
        linear_base, base, k, r, "mlp", tuple(tuple(bool(v) for v in p) for p in pats)
    )
    x = rng.normal(size=(b * k, 4))
    y = rng.normal(size=(b * k, m))  # any targets: the loss compares the decoder with them
    loss = learned_training._learned_loss(task, params, Batch(jnp.asarray(x), jnp.asarray(y)))
    wb = np.asarray(base["w"])
    per_pattern = []
    for mask in pats:
        errs = []
        for g in range(b):
            xg, yg = x[g * k : (g + 1) * k], y[g * k : (g + 1) * k]
            parities = mlp_np(code.encoder_params, xg.reshape(-1)).reshape(r, 4)
            y_all = np.concatenate([yg, parities @ wb.T])
            recon = mlp_np(code.decoder_params, np.where(mask[:, None], y_all, 0.0).ravel())
            recon = recon.reshape(k, m)
            errs += [np.mean((recon[j] - yg[j]) ** 2) for j in range(k) if not mask[j]]
        per_pattern.append(np.mean(errs))
    np.testing.assert_allclose(float(loss), np.mean(per_pattern), rtol=1e-10)


def test_learned_code_training_reduces_the_loss_and_checkpoint_round_trips(tmp_path):
    ds = load_digits()
    rng = np.random.default_rng(0)
    base = {"w": jnp.asarray(rng.normal(size=(10, 64)) * 0.2, jnp.float32)}
    x = ds.x_train[:600]
    args = dict(num_inputs=2, encoder_hidden=(64,), decoder_hidden=(64,))
    quick = TrainSettings(epochs=10, batch_size=16, lr=3e-3, cache_dir=tmp_path, progress=False)
    trained = gcc.train_learned_code(linear_base, base, x, **args, settings=quick)
    assert not trained.from_cache and trained.num_steps == 10 * (540 // 32)
    losses = trained.train_losses
    assert losses[-1] < 0.5 * losses[0]
    # Degraded-mode agreement with the base argmax on the held-out groups improves too.
    assert trained.val_metrics[-1] > trained.val_metrics[0] + 0.2
    again = gcc.train_learned_code(linear_base, base, x, **args, settings=quick)
    assert again.from_cache and again.train_losses == losses
    for a, b in zip(jax.tree.leaves(again.code), jax.tree.leaves(trained.code), strict=True):
        np.testing.assert_array_equal(a, b)
    assert (again.code.num_inputs, again.code.num_parities, again.code.encoder) == (2, 1, "mlp")
    other = gcc.train_learned_code(linear_base, base, x, **args, settings=quick._replace(lr=1e-3))
    assert not other.from_cache and other.cache_path != trained.cache_path
