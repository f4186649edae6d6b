"""A toy run says so in everything it writes: the JSON record (``"toy": true``), the first line
of every ``.txt`` summary and the title of every PNG (drawn, and in the PNG's ``Title``
metadata). End to end through the command line's save path, for two experiments with different
save functions (``demo``: its own ``save_result`` call; ``poly``: ``save_report``)."""

import json

import pytest
from PIL import Image

from gcc_jax.experiments import cli
from gcc_jax.experiments._io import TOY_NOTE


@pytest.mark.parametrize("name", ["demo", "poly"])
def test_a_toy_run_is_marked_in_json_summary_and_figures(name, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GCC_JAX_TOY", raising=False)  # --toy alone must mark it
    assert cli.main([name, "--toy", "--no-progress", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == TOY_NOTE
    records = list(tmp_path.glob("*.json"))
    summaries = list(tmp_path.glob("*.txt"))
    figures = list(tmp_path.glob("*.png"))
    assert records and summaries and figures
    for path in records:
        assert json.loads(path.read_text())["toy"] is True
    for path in summaries:
        assert path.read_text().splitlines()[0] == TOY_NOTE
    for path in figures:
        assert TOY_NOTE in Image.open(path).text["Title"]


def test_a_full_size_record_is_not_marked(tmp_path, monkeypatch):
    """The same save path without --toy (and GCC_JAX_TOY unset) writes "toy": false and no
    note: demo at sizes smaller than its toy ones, given as explicit flags."""
    monkeypatch.delenv("GCC_JAX_TOY", raising=False)
    argv = ["demo", "-K", "3", "-N", "8", "-S", "0,2", "-M", "4", "--dim", "1"]
    assert cli.main([*argv, "--no-progress", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "demo.json").read_text())["toy"] is False
    assert TOY_NOTE not in (tmp_path / "demo.txt").read_text()
    assert "Title" not in Image.open(tmp_path / "demo.png").text
