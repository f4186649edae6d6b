"""The coded inference service with a robust decoder: garbage workers give 0 wrong answers.

No user ``validate``: the executor passes the garbage (finite numbers of size ~1e3) to the
decoder as an ordinary result. A wrong answer is a query whose predicted class (argmax of the
answer) differs from the model's own prediction on that query, or no answer at all. Queries are
drawn with a top-2 probability margin of at least 0.1: a near-tie flips under any approximation,
coded or not, and says nothing about adversaries.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gcc_jax as gcc
from gcc_jax.distributed import CodedInferenceService, DelayModel, Fault, LocalExecutor

N, K, S = 20, 4, 2
_W = np.random.default_rng(0).normal(size=(4, 3))


def model(v):
    """A smooth 4-class classifier on R³ (softmax probabilities)."""
    return jax.nn.softmax(jnp.asarray(_W) @ v)


def _wrong_answers(code, garbage_workers, *, queries=24):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size=(8 * queries, 3))
    probs = np.sort(np.asarray(jax.vmap(model)(jnp.asarray(x))), axis=1)
    x = x[probs[:, -1] - probs[:, -2] >= 0.1][:queries]
    truth = np.argmax(np.asarray(jax.vmap(model)(jnp.asarray(x))), axis=1)
    dm = DelayModel(num_workers=N, shift=0.01, seed=0)  # equal latencies: arrival by index
    faults = [Fault(w, "garbage") for w in garbage_workers]
    ex = LocalExecutor(model, num_workers=N, delays=dm, faults=faults)
    with CodedInferenceService(ex, code, stragglers=S, timeout_s=30.0) as svc:
        answers = svc.serve(x)
    pred = np.array([a.prediction if a.ok else -1 for a in answers])
    return int(np.sum(pred != truth))


def _robust(loss, gamma):
    # bound M = 1 (probabilities); residuals below 1e-2 do not matter for a class decision
    lam = gcc.adversarial_lam_dec(N, max(gamma, 1), 1.0, constant=1e-3)
    return gcc.RobustSplineCode.chebyshev(
        num_inputs=K, num_workers=N, lam_dec=lam, loss=loss, trim=max(gamma, 1), min_scale=1e-2
    )


def test_plain_gcc_is_fooled_by_one_garbage_worker():
    code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N)
    assert _wrong_answers(code, []) == 0  # the clean service is right
    assert _wrong_answers(code, [3]) > 0


@pytest.mark.parametrize("loss", ["tukey", "trim"])
@pytest.mark.parametrize("garbage", [[3], [3, 11]])  # one, and γ = 2 garbage workers
def test_robust_decoder_gives_zero_wrong_answers(loss, garbage):
    assert _wrong_answers(_robust(loss, len(garbage)), garbage) == 0
