"""Shared fixtures for the tests (the session set-up, x64 included, is in ../conftest.py)."""

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
