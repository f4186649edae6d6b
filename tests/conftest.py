"""Shared fixtures of the suite (session set-up, x64 included: ../conftest.py).

``make test`` runs the tests on pytest-xdist workers with work stealing, except those marked
``slow`` or ``ray`` and the experiment files; ``make test-integration`` runs those, the tests
marked ``ray`` last, in one process with one local Ray cluster (see the Makefile and
docs/testing.md).
"""

import jaxtyping
import pytest


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


#: the one file of tests marked ``ray``: ``make test-integration`` runs it alone, in its own process
RAY_TESTS = "test_distributed_ray.py"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Refuse a test marked ``ray`` outside :data:`RAY_TESTS` (``make test`` would never run it);
    on an accelerator backend (``make test-gpu``) skip the tests marked ``cpu_only`` or ``ray``,
    each with its reason. On a CPU nothing is skipped here."""
    stray = [item.nodeid for item in items if item.get_closest_marker("ray")]
    stray = [nodeid for nodeid in stray if nodeid.split("::")[0].rsplit("/", 1)[-1] != RAY_TESTS]
    if stray:
        raise pytest.UsageError(
            f"tests marked `ray` belong in tests/{RAY_TESTS}, which `make test` runs in its own "
            f"process beside the rest; move {stray}"
        )
    import jax

    backend = jax.default_backend()
    if backend == "cpu":
        return
    for item in items:
        if (marker := item.get_closest_marker("cpu_only")) is not None:
            reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
            if not reason:
                raise pytest.UsageError(f"{item.nodeid}: cpu_only needs a reason")
            item.add_marker(pytest.mark.skip(reason=f"CPU only ({backend} run): {reason}"))
        elif item.get_closest_marker("ray"):
            reason = "Ray: a local cluster of CPU actor processes, the same on any backend"
            item.add_marker(pytest.mark.skip(reason=f"CPU only ({backend} run): {reason}"))
