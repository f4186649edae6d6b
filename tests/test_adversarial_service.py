"""The coded inference service with a robust decoder: garbage workers give 0 wrong answers.

No user ``validate``: the executor passes the garbage (finite numbers of size ~1e3) to the
decoder as an ordinary result (``tests.helpers.garbage_wrong_answers`` counts the wrong
answers). The same runs on the ``RayExecutor`` are in ``tests/test_distributed_ray.py``.
One code object per decoder for every run, so each decoder compiles once.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import garbage_wrong_answers, robust_service_codes

import gcc_jax as gcc
from gcc_jax.distributed import DelayModel, Fault, LocalExecutor

N, K, S, GAMMA = 12, 3, 0, 2  # γ = 2 = ⌈N^(1/4)⌉; S = 0: every result reaches the decoder
_W = np.random.default_rng(0).normal(size=(4, 3))  # the same model as the Ray test's


def model(v):
    """A smooth 4-class classifier on R³ (softmax probabilities)."""
    return jax.nn.softmax(jnp.asarray(_W) @ v)


def _local(garbage):
    dm = DelayModel(num_workers=N, shift=0.01, seed=0)  # equal latencies: arrival by index
    faults = [Fault(w, "garbage") for w in garbage]
    return LocalExecutor(model, num_workers=N, delays=dm, faults=faults)


def _wrong(code, garbage):
    return garbage_wrong_answers(_local(garbage), code, model, stragglers=S)


def test_plain_gcc_is_fooled_by_one_garbage_worker():
    code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N)
    assert _wrong(code, []) == 0  # the clean service is right
    assert _wrong(code, [3]) > 0


@pytest.mark.parametrize("loss", ["tukey", "trim"])
def test_robust_decoder_gives_zero_wrong_answers(loss):
    code = robust_service_codes(K, N, GAMMA)[loss]
    for garbage in ([], [3], [3, 8]):  # none, one, and γ = 2 garbage workers
        assert _wrong(code, garbage) == 0, garbage
