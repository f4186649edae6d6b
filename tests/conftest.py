"""Shared fixtures and the parallel layout of the suite (session set-up, x64 included: ../conftest.py).

``make test`` runs the suite on every core with pytest-xdist (``-n auto --dist loadgroup``). Each
test module is one group, so its module-scoped compiled fixtures are built once, on one worker;
every test marked ``ray`` shares the group "ray", so at most one local Ray cluster runs at a time.
"""

import jax
import jaxtyping
import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        group = "ray" if item.get_closest_marker("ray") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True, scope="module")
def _fresh_compile_cache():
    """Drop JAX's compiled executables after each module: a worker's memory stays bounded.

    Every module compiles its own shapes anyway; without this a worker process that has run a
    few hundred tests holds several GB of executables nobody calls again.
    """
    yield
    jax.clear_caches()


@pytest.fixture
def without_jaxtyping():
    """Turn jaxtyping's runtime shape checks off for one test.

    ``make test`` checks every gcc_jax annotation at call time (``--jaxtyping-packages``). Tests
    of gcc_jax's *own* validation (the messages users see, which name the argument) request
    this fixture, since jaxtyping would otherwise reject the bad input first.
    """
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", False)
