"""The test harness's own rules (conftest.py, tests/conftest.py): the Ray file, the fast exit."""

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _item(nodeid, ray):
    marker = object() if ray else None
    return types.SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: marker)


def test_a_ray_test_outside_the_ray_file_is_refused():
    from conftest import RAY_TESTS, pytest_collection_modifyitems

    ok = [_item(f"tests/{RAY_TESTS}::test_a", True), _item("tests/test_x.py::test_b", False)]
    pytest_collection_modifyitems(None, ok)  # nothing raised
    with pytest.raises(pytest.UsageError, match=r"test_y\.py::test_c"):
        pytest_collection_modifyitems(None, [*ok, _item("tests/test_y.py::test_c", True)])


def test_workers_fast_exit_keeps_failures_and_counts(tmp_path):
    """xdist workers skip the interpreter's teardown (conftest.py): a failure still fails."""
    (tmp_path / "test_tiny.py").write_text(
        "def test_passes():\n    assert True\n\n\ndef test_fails():\n    assert 1 == 2\n"
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "conftest",
            "-n",
            "2",
            "-o",
            "addopts=",
            str(tmp_path / "test_tiny.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed" in run.stdout, run.stdout
