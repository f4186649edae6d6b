"""The mask batch sharded over 4 (forced host) devices gives the single-device result.

N = 64 and 32-mask chunks (8 per device) put the chunks whose masks share the first chunk's
straggler count on the downdate decoder (``gcc_jax/spline/_downdate.py``) and the others on the
Kalman pass, so both paths run sharded; a caller's per-pattern function with a pytree of extra
operands runs sharded too (the vmapped path)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_disable_most_optimizations", True)  # as the suite (conftest.py)
    import jax.numpy as jnp, numpy as np
    import gcc_jax as gcc
    from gcc_jax.evaluation._evaluator import _placement

    devs = jax.devices()
    code = gcc.SplineCode.chebyshev(num_inputs=6, num_workers=64, lam_dec=1e-5)
    x = jnp.linspace(-1.0, 1.0, 6)[:, None] * jnp.ones((6, 2))
    masks = jnp.concatenate([
        gcc.sample_masks(jax.random.key(0), 64, num=96, stragglers=6),
        gcc.sample_masks(jax.random.key(1), 64, num=107, stragglers=9),
    ])
    f = lambda v: jnp.sin(3 * v)
    sharded = gcc.monte_carlo_loss(code, f, x, masks, chunk_size=8, devices=devs)
    single = gcc.monte_carlo_loss(code, f, x, masks, chunk_size=32, devices=devs[:1])
    place, _ = _placement(devs)
    block = place(np.ones((2, 32, 64), bool))

    # a per-pattern function of the caller's, with a pytree of extra operands (vmap path)
    def per_mask(code, yt, aux, mask):
        fx, weight = aux
        dec = code.decode_with_status(yt, mask)
        return weight * jnp.sum((dec.value - fx) ** 2), jnp.max(dec.value, axis=0), dec.status

    yt, fx = code.worker_outputs(f, x), jax.vmap(f)(x)
    aux = (fx, np.float64(0.5))
    custom = [gcc.evaluate_masks(code, yt, aux, masks[:40], per_mask=per_mask, chunk_size=4,
                                 devices=d) for d in (devs, devs[:1])]
    print(json.dumps(dict(
        n_devices=len(devs),
        placed_on=len(block.sharding.device_set),
        max_diff=float(np.max(np.abs(sharded - single))),
        scale=float(np.max(single)),
        custom_diff=max(float(np.max(np.abs(a - b))) for a, b in zip(*custom)),
        custom_scale=float(np.max(np.abs(custom[1][0]))),
        custom_status=int(np.max(custom[0][2])),
    )))
    """
)


@pytest.mark.cpu_only("shards over 4 forced host CPU devices (a CPU subprocess)")
def test_sharded_monte_carlo_equals_single_device():
    # the suite's XLA flags (conftest.py: classic CPU emitters) plus four host devices
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n_devices"] == 4 and out["placed_on"] == 4
    assert out["max_diff"] <= 1e-12 * max(out["scale"], 1e-300)
    assert out["custom_status"] == 0 and out["custom_scale"] > 0
    assert out["custom_diff"] <= 1e-12 * out["custom_scale"]
