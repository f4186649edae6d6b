"""Shared fixtures and the layout of the suite (session set-up, x64 included: ../conftest.py).

``make test`` runs the suite on every core with pytest-xdist (``-n auto --dist loadgroup``). Each
test module is one group, so its module-scoped compiled fixtures are built once, on one worker.
The tests marked ``ray`` form one group that runs *last*: a process that has hosted a Ray driver
(``ray.init`` ... ``ray.shutdown``) was seen to crash later inside libgcc's unwinder during
unrelated XLA work (three times, always in a module collected after the Ray one), so no other
test runs in that process after them.
"""

import jaxtyping
import pytest


def pytest_collection_modifyitems(config, items):
    ray_items = [item for item in items if item.get_closest_marker("ray")]
    others = [item for item in items if not item.get_closest_marker("ray")]
    items[:] = others + ray_items
    for item in items:
        group = "ray" if item.get_closest_marker("ray") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


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
