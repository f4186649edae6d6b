"""The `experiments` extra (matplotlib, scikit-learn, tqdm): the library runs without it, and
asks for it by name where it is needed."""

import sys

import pytest

from gcc_jax._core import progress
from gcc_jax.experiments import cli


def test_a_disabled_bar_needs_no_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # `from tqdm.auto import ...` fails
    with progress.tqdm(total=3, disable=True) as bar:
        bar.update()
        bar.set_postfix({"loss": 1.0})
    assert list(progress.tqdm(range(3), disable=True)) == [0, 1, 2]
    progress.tqdm.write("a message")
    assert capsys.readouterr().out == "a message\n"
    with pytest.raises(ImportError, match=r"pip install 'gcc_jax\[experiments\]'"):
        progress.tqdm(range(3))


def test_bars_are_tqdm_when_installed():
    from tqdm.auto import tqdm

    bar = progress.tqdm(range(2), disable=True)
    assert isinstance(bar, tqdm) and list(bar) == [0, 1]


def test_digits_without_scikit_learn_names_the_extra(monkeypatch):
    from gcc_jax.nn.data import load_digits

    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"scikit-learn.*gcc_jax\[experiments\]"):
        load_digits()


def test_cli_without_the_extra_exits_2_naming_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(cli.EXTRA_MODULES, "gcc_jax_no_such_module", "no-such-package")
    monkeypatch.setattr(cli, "_run_command", lambda *a: pytest.fail("computed without extra"))
    with pytest.raises(SystemExit) as stop:
        cli.main(["demo", "--toy", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "no-such-package" in err and "pip install 'gcc_jax[experiments]'" in err
