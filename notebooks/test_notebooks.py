"""Execute every notebooks/*.ipynb at toy sizes (GCC_JAX_TOY=1) in a kernel on this Python.

``make notebooks`` (run by CI after ``make test``). The notebooks are documentation that
re-runs the experiments the test suite already checks against loops; each starts a fresh
kernel and compiles everything anew (about 5 minutes of CPU together), so they are executed
beside the suite rather than inside the 6-minute ``make test``.
"""

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted(Path(__file__).resolve().parent.glob("*.ipynb"))

# Prepended to each notebook: fails unless the "python3" kernel runs this very interpreter
# (the project's .venv), so the notebooks are tested against the installed gcc_jax.
CHECK_KERNEL = f"""
import os, sys
assert os.path.realpath(sys.executable) == {os.path.realpath(sys.executable)!r}, sys.executable
assert os.environ.get("GCC_JAX_TOY") == "1"
"""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("GCC_JAX_TOY", "1")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")  # toy sizes: compiling dominates
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    nb.cells.insert(0, nbformat.v4.new_code_cell(CHECK_KERNEL))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=600,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors


def test_notebooks_exist():
    assert any(p.name == "01_rates.ipynb" for p in NOTEBOOKS)
    assert sys.executable  # the kernel check above compares against this interpreter
