"""Shared fixtures of the suite (session set-up, x64 included: ../conftest.py).

``make test`` runs the tests marked ``ray`` (one local Ray cluster, one process) beside the rest,
which run on pytest-xdist workers with work stealing; see the Makefile and docs/testing.md.
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
