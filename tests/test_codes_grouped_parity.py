"""GroupedParityCode (gcc_jax/codes/grouped_parity.py) against a NumPy loop over its groups."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from refs import fill_reference

import gcc_jax as gcc
from gcc_jax.codes import GroupedParityCode


def _lin_parity(params, x):
    return params @ x


def _grouped_reference(y, mask, k, groups, fill="zero"):
    """Subtraction decoding per group; ≥ 2 missing → live base outputs, the fill rule for the
    missing ones over all inputs."""
    out, have = [], []
    for g in range(groups):
        yg, mg = y[g * (k + 1) : (g + 1) * (k + 1)], mask[g * (k + 1) : (g + 1) * (k + 1)]
        missing = np.flatnonzero(~mg)
        if missing.size <= 1:
            for j in range(k):
                if mg[j]:
                    out.append(yg[j])
                else:
                    out.append(yg[k] - sum(yg[i] for i in range(k) if i != j))
            have += [True] * k
        else:
            out += [yg[j] if mg[j] else np.zeros_like(yg[j]) for j in range(k)]
            have += [bool(mg[j]) for j in range(k)]
    out = np.stack(out)
    return fill_reference(out, np.array(have), fill).reshape(out.shape)


@pytest.mark.parametrize("fill", ["zero", "mean", "interpolate"])
@pytest.mark.parametrize("k,groups", [(2, 3), (4, 2)])
def test_grouped_parity_matches_loop(k, groups, fill):
    rng = np.random.default_rng(k)
    w = rng.normal(size=(3, 2))
    parity_w = w + 0.1 * rng.normal(size=(3, 2))  # an imperfect parity model
    code = GroupedParityCode(
        gcc.ParityModelCode(jnp.asarray(parity_w), _lin_parity, num_inputs=k),
        groups=groups,
        fill=fill,
    )
    kk, n = k * groups, (k + 1) * groups
    assert (code.num_inputs, code.num_workers) == (kk, n)
    x = rng.normal(size=(kk, 2))
    y = np.asarray(code.worker_outputs(lambda v: jnp.asarray(w) @ v, jnp.asarray(x)))
    # worker layout: group g = inputs g*k.., its parity last, the parity model on the sum
    for g in range(groups):
        xs = x[g * k : (g + 1) * k]
        np.testing.assert_allclose(y[g * (k + 1) : g * (k + 1) + k], xs @ w.T, rtol=1e-12)
        np.testing.assert_allclose(y[g * (k + 1) + k], parity_w @ xs.sum(0), rtol=1e-12)
    masks = np.asarray(gcc.sample_masks(jax.random.key(1), n, num=40, p=0.3))
    for mask in masks:
        dec = code.decode_with_status(jnp.asarray(y), jnp.asarray(mask))
        assert int(dec.status) == 0
        np.testing.assert_allclose(
            dec.value, _grouped_reference(y, mask, k, groups, fill), rtol=1e-12, atol=1e-12
        )
        avail = np.asarray(code.available(jnp.asarray(mask)))
        for g in range(groups):
            mg = mask[g * (k + 1) : (g + 1) * (k + 1)]
            expect = np.ones(k, bool) if (~mg).sum() <= 1 else mg[:k]
            np.testing.assert_array_equal(avail[g * k : (g + 1) * k], expect)


def test_grouped_parity_nan_from_straggler_is_ignored_and_live_nan_flagged():
    code = GroupedParityCode(gcc.ParityModelCode(jnp.eye(2), _lin_parity, num_inputs=2), groups=2)
    y = jnp.arange(12.0).reshape(6, 2).at[4].set(jnp.nan)
    mask = jnp.array([True, True, True, True, False, False])  # NaN worker straggled
    dec = code.decode_with_status(y, mask)
    assert int(dec.status) == 0 and bool(jnp.all(jnp.isfinite(dec.value)))
    dec = code.decode_with_status(y, jnp.ones(6, bool))
    assert int(dec.status) & int(gcc.Status.NONFINITE_DATA)


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages
def test_bad_arguments_raise_naming_them():
    parity = gcc.ParityModelCode(jnp.eye(2), _lin_parity, num_inputs=2)
    with pytest.raises(TypeError, match="`parity`"):
        GroupedParityCode(gcc.UncodedCode(num_inputs=2), groups=2)
    with pytest.raises(ValueError, match="`groups`"):
        GroupedParityCode(parity, groups=0)
    with pytest.raises(ValueError, match="`fill_value`"):
        GroupedParityCode(parity, groups=2, fill_value=float("nan"))
