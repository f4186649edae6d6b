"""Codes are plain pytrees to JAX's transforms: ``jax.grad``, ``jax.tree.map`` and
``optax.apply_updates`` over a whole code object, while user construction still validates.

Gradients are checked against central finite differences in float64 for every leaf of
``SplineCode``, ``BerrutCode`` and ``RobustSplineCode``; the tree round trips run over every code
of the contract list (``tests/helpers.py``).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import ALL_CODES, CodeCase, random_mask

import gcc_jax as gcc
from gcc_jax.codes import AbstractCode, jit_method, pytree_dataclass

H = 1e-6  # central differences: truncation O(H²) ≈ 1e-12, round-off O(eps/H) ≈ 1e-10
RTOL, ATOL = 1e-6, 1e-8


def _f(v):
    return jnp.stack([jnp.sin(2.0 * v[0]) + v[1] ** 2, jnp.cos(v[0] * v[1])])


_X = np.random.default_rng(0).uniform(-0.9, 0.9, size=(4, 2))
_W = np.random.default_rng(1).normal(size=(4, 2))  # weights of the scalar loss


def _grad_codes():
    spline = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=10, lam_enc=1e-4, lam_dec=1e-3)
    return {
        "spline": spline,
        "berrut": gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=10),
        "robust-huber": gcc.RobustSplineCode.from_spline(spline, loss="huber", iterations=3),
    }


def _central_differences(loss, code):
    """``∂ loss / ∂ leaf`` by central differences, per element of every inexact leaf (the
    perturbed codes are rebuilt by JAX's unflatten, as a transform would)."""
    leaves, treedef = jax.tree.flatten(code)
    out = []
    for i, leaf in enumerate(leaves):
        leaf = np.asarray(leaf)
        if not np.issubdtype(leaf.dtype, np.inexact):
            out.append(None)
            continue
        grad = np.zeros(leaf.shape)
        for j in np.ndindex(leaf.shape):
            values = []
            for sign in (1.0, -1.0):
                moved = leaf.copy()
                moved[j] += sign * H
                new = [*leaves[:i], jnp.asarray(moved), *leaves[i + 1 :]]
                values.append(float(loss(jax.tree.unflatten(treedef, new))))
            grad[j] = (values[0] - values[1]) / (2 * H)
        out.append(grad)
    return out


@pytest.mark.parametrize(
    "name", ["spline", "berrut", pytest.param("robust-huber", marks=pytest.mark.slow)]
)
def test_grad_over_a_whole_code_matches_finite_differences(name):
    code = _grad_codes()[name]
    mask = jnp.asarray(random_mask(np.random.default_rng(2), code.num_workers, 2))

    @jax.jit
    def loss(c):
        return jnp.sum(gcc.coded_apply(c, _f, jnp.asarray(_X), mask) * _W)

    grad = jax.grad(loss, allow_int=True)(code)  # RobustSplineCode's loss index is an int leaf
    assert type(grad) is type(code)
    reference = _central_differences(loss, code)
    checked = 0
    for g, ref in zip(jax.tree.leaves(grad), reference, strict=True):
        if ref is None:
            continue
        g = np.asarray(g)
        assert g.shape == ref.shape and np.all(np.isfinite(g))
        np.testing.assert_allclose(g, ref, rtol=RTOL, atol=ATOL)
        checked += g.size
    # every node and every λ (and Huber's constant) was differentiated
    lams = {"spline": 2, "berrut": 0, "robust-huber": 3}[name]  # λ_enc, λ_dec (, tuning)
    assert checked == code.num_inputs + code.num_workers + lams


def test_grad_of_a_code_is_a_code_whose_leaves_break_the_constructors_rules():
    """A gradient has descending or negative "nodes" and "λs": JAX builds it all the same."""
    code = _grad_codes()["spline"]
    mask = jnp.ones(code.num_workers, bool)
    grad = jax.grad(lambda c: jnp.sum(gcc.coded_apply(c, _f, jnp.asarray(_X), mask)))(code)
    assert isinstance(grad, gcc.SplineCode) and grad.solver == code.solver
    with pytest.raises((ValueError, gcc.GCCValueError)):  # built by a user, the same leaves fail
        gcc.SplineCode(grad.alpha, grad.beta, grad.lam_enc, -abs(grad.lam_dec) - 1.0)


@pytest.fixture(params=ALL_CODES, ids=lambda c: c.name)
def case(request) -> CodeCase:
    return request.param


def _inexact(a) -> bool:
    return jnp.issubdtype(jnp.asarray(a).dtype, jnp.inexact)


def test_tree_map_round_trips_every_code(case):
    code = case.build()
    same = jax.tree.map(lambda a: a, code)
    assert type(same) is type(code)
    assert jax.tree.structure(same) == jax.tree.structure(code)
    for a, b in zip(jax.tree.leaves(same), jax.tree.leaves(code), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # anything in the leaves: JAX's placeholders and values no user may pass (negated nodes)
    placeholders = jax.tree.map(lambda _: object(), code)
    assert type(placeholders) is type(code)
    negated = jax.tree.map(lambda a: -a if _inexact(a) else a, code)
    back = jax.tree.map(lambda a: -a if _inexact(a) else a, negated)
    y = code.worker_outputs(case.f, case.x)
    mask = random_mask(np.random.default_rng(3), code.num_workers, case.max_stragglers)
    ref = code.decode_with_status(y, mask)
    out = back.decode_with_status(y, mask)
    assert int(out.status) == int(ref.status) == 0
    np.testing.assert_array_equal(np.asarray(out.value), np.asarray(ref.value))


def test_optax_apply_updates_round_trips_every_code(case):
    code = case.build()
    zeros = jax.tree.map(jnp.zeros_like, code)
    same = optax.apply_updates(code, zeros)
    assert type(same) is type(code)
    for a, b in zip(jax.tree.leaves(same), jax.tree.leaves(code), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # one step and its opposite come back to the code (to round-off)
    step = jax.tree.map(lambda a: 1e-3 * jnp.ones_like(a) if _inexact(a) else 0 * a, code)
    there = optax.apply_updates(code, step)
    back = optax.apply_updates(there, jax.tree.map(lambda u: -u, step))
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(code), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-15)


def test_an_optax_step_on_a_whole_code_lowers_its_loss():
    code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=10, lam_enc=1e-3, lam_dec=1e-3)
    masks = gcc.sample_masks(jax.random.key(4), 10, num=16, stragglers=3)
    x = jnp.asarray(_X)

    fx = jax.vmap(_f)(x)

    @jax.jit
    def loss(c):
        return jnp.mean(gcc.mask_losses(c, c.worker_outputs(_f, x), fx, masks)[0])

    opt = optax.sgd(1e-6)  # small enough that λs stay positive
    state = opt.init(code)
    updates, state = opt.update(jax.grad(loss)(code), state)
    new = optax.apply_updates(code, updates)
    assert isinstance(new, gcc.SplineCode) and float(loss(new)) < float(loss(code))


@pytest.mark.usefixtures("without_jaxtyping")  # gcc_jax's own messages
def test_user_construction_still_validates():
    alpha, beta = gcc.SplineCode.chebyshev_nodes(4, 10)
    with pytest.raises((ValueError, gcc.GCCValueError), match="alpha"):
        gcc.SplineCode(alpha[::-1], beta, 0.0, 0.0)
    with pytest.raises((ValueError, gcc.GCCValueError), match="beta"):
        gcc.BerrutCode(alpha, beta.at[3].set(beta[2]))
    with pytest.raises(gcc.GCCValueError, match="lam_dec"):
        gcc.SplineCode(alpha, beta, 0.0, -1e-3)
    with pytest.raises(gcc.GCCValueError, match="lam_enc"):
        gcc.SplineCode(alpha, beta, jnp.asarray(-1.0), 0.0)
    code = gcc.SplineCode(alpha, beta, 0.0, 1e-3)
    with pytest.raises(gcc.GCCValueError, match="lam_dec"):
        dataclasses.replace(code, lam_dec=-1.0)
    with pytest.raises(gcc.GCCValueError, match="lam_dec"):
        gcc.RobustSplineCode.from_spline(dataclasses.replace(code, lam_dec=jnp.asarray(-2.0)))
    with pytest.raises(ValueError, match="tuning"):
        gcc.RobustSplineCode.from_spline(code, loss="huber", tuning=-1.0)


def test_abstract_attributes_are_checked_when_a_code_is_defined():
    with pytest.raises(TypeError, match="`min_live`"):

        @pytree_dataclass
        class NoMinLive(AbstractCode):
            num_inputs: int = dataclasses.field(metadata=dict(static=True))
            num_workers: int = dataclasses.field(metadata=dict(static=True))

            def encode_with_status(self, x): ...

            def decode_with_status(self, y, mask): ...


def test_jit_method_compiles_once_per_code_structure_and_is_explicit():
    @pytree_dataclass
    class Scale(AbstractCode):
        factor: jax.Array
        num_inputs: int = dataclasses.field(default=2, metadata=dict(static=True))
        min_live = 0

        @property
        def num_workers(self) -> int:
            return self.num_inputs

        @jit_method
        def encode_with_status(self, x):
            return gcc.Encoded(self.factor * jnp.asarray(x), jnp.int32(0))

        def decode_with_status(self, y, mask):  # not decorated: runs op by op
            return gcc.Decoded(jnp.asarray(y) / self.factor, jnp.int32(0))

    cache = Scale.encode_with_status.jitted
    assert not hasattr(Scale.decode_with_status, "jitted")
    before = cache._cache_size()
    for factor in (2.0, 3.0, 4.0):  # new leaf values: no new compilation
        out = Scale(jnp.asarray(factor)).encode(np.ones((2, 3)))
        np.testing.assert_array_equal(out, factor * np.ones((2, 3)))
    assert cache._cache_size() == before + 1
