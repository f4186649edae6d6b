"""Tests for gcc_jax.training: the jitted step, determinism, accuracy on digits, the cache."""

import json
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gcc_jax.data import load_digits
from gcc_jax.models import make_model
from gcc_jax.training import (
    CACHE_ENV_VAR,
    Batch,
    CacheWarning,
    accuracy,
    default_cache_dir,
    fit,
    make_train_step,
    train_classifier,
)

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
    x, y = digits.x_train[:512], digits.y_train[:512]
    a = fit(apply, params, x, y, seed=1, **kw)
    b = fit(apply, params, x, y, seed=1, **kw)
    c = fit(apply, params, x, y, seed=2, **kw)
    assert tree_equal(a.params, b.params) and a.train_losses == b.train_losses
    assert not tree_equal(a.params, c.params)
    assert a.num_steps == 512 // 64 and a.val_accuracies == ()


def test_accuracy_matches_numpy_with_ragged_last_chunk(digits):
    apply, params = make_model("mlp", input_shape=(8, 8, 1), num_classes=10, key=3)
    x, y = digits.x_test, digits.y_test
    pred = np.argmax(np.asarray(jax.jit(apply)(params, x)), axis=-1)
    assert accuracy(apply, params, x, y, batch_size=7) == pytest.approx(np.mean(pred == y))
    assert accuracy(apply, params, x, y) == pytest.approx(np.mean(pred == y))


@pytest.mark.parametrize("name, min_acc", [("mlp", 0.9), ("lenet5", 0.9)])
def test_train_on_digits_beats_chance(digits, mlp_run, name, min_acc):
    tm = mlp_run[1] if name == "mlp" else train_classifier(name, digits, use_cache=False, **HYPER)
    assert not tm.from_cache and tm.num_steps == 10 * (1293 // 32)
    assert len(tm.train_losses) == 10 and tm.train_losses[-1] < 0.3 * tm.train_losses[0]
    assert tm.test_accuracy > min_acc and tm.val_accuracy > min_acc
    assert len(tm.val_accuracies) == 10
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
    assert "test accuracy" in captured.out
    assert "train mlp on digits" in captured.err  # tqdm writes the bar to stderr


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
