"""The localizer's pieces (gcc_jax/experiments/_localizer.py) against hand values and NumPy.

Training itself is exercised by the toy runs (tests/test_dnn.py, tests/test_regimes.py); here
the loss, the box metrics and the split rule, on images made without training anything.
"""

import types

import jax.numpy as jnp
import numpy as np
import pytest

from gcc_jax.experiments._localizer import Localizer, LocalizerSettings, box_loss, box_metrics
from gcc_jax.nn.data import make_localization


def test_box_metrics_hand_values():
    pred = np.array([[0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.3, 0.3]])
    box = np.array([[0.0, 0.0, 0.5, 1.0], [0.5, 0.5, 0.9, 0.9]])
    m = box_metrics(pred, box)
    np.testing.assert_allclose(m["mean_iou"], (0.5 + 0.0) / 2, rtol=1e-12)  # half; disjoint
    np.testing.assert_allclose(m["test_mse"], (0.25 + 2 * 0.16 + 2 * 0.36) / 2, rtol=1e-12)
    inverted = np.array([[0.4, 0.4, 0.1, 0.1]])  # x1 < x0: area 0, IoU 0
    assert box_metrics(inverted, box[:1])["mean_iou"] == 0.0


def test_box_loss_is_the_mean_squared_box_error():
    rng = np.random.default_rng(0)
    x, y, w = rng.normal(size=(5, 3)), rng.normal(size=(5, 4)), rng.normal(size=(3, 4))
    batch = types.SimpleNamespace(x=jnp.asarray(x), y=jnp.asarray(y))
    loss = box_loss(lambda p, v: v @ p, jnp.asarray(w), batch)
    expected = np.mean([np.sum((x[i] @ w - y[i]) ** 2) for i in range(5)])
    np.testing.assert_allclose(float(loss), expected, rtol=1e-12)


def test_split_draws_cv_from_the_held_out_images_and_eval_from_the_test_split():
    settings = LocalizerSettings(num_train=12, num_held_out=8, num_test=10)
    data = make_localization(20, 10, seed=0)
    loc = Localizer(None, None, data, settings, {})
    np.testing.assert_array_equal(loc.held_out(), np.arange(12, 20))
    sp = loc.split(num_inputs=3, num_batches=3, num_cv_batches=2, seed=5)
    # the rule of gcc_jax.experiments.split_images, written out
    ev = np.random.default_rng((5, 0xD1A)).permutation(10)[:9].reshape(3, 3)
    cv = np.random.default_rng((5, 0xC5)).permutation(np.arange(12, 20))[:6].reshape(2, 3)
    np.testing.assert_array_equal(sp.eval, ev)
    np.testing.assert_array_equal(sp.cv, cv)
    assert sp.record()["cv_pool"] == "validation"
    with pytest.raises(ValueError, match="held-out training images"):
        loc.split(num_inputs=3, num_batches=1, num_cv_batches=3, seed=0)
    with pytest.raises(ValueError, match="test images"):
        loc.split(num_inputs=3, num_batches=4, num_cv_batches=1, seed=0)
