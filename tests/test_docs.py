"""The documentation site builds strictly (no broken links, anchors or references), documents
every public name and every subcommand, and its code examples run."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API_PAGES = {
    "gcc_jax": "api/gcc_jax",
    "gcc_jax.codes": "api/codes",
    "gcc_jax.tuning": "api/tuning",
    "gcc_jax.distributed": "api/distributed",
    "gcc_jax.nn.models": "api/models",
    "gcc_jax.nn.data": "api/data",
    "gcc_jax.nn.training": "api/training",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_every_public_name_has_an_api_entry(site):
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        hooks = importlib.import_module("hooks")
    finally:
        sys.path.pop(0)
    for module, page in API_PAGES.items():
        html = (site / page / "index.html").read_text()
        names = hooks.public_names(module)
        assert names, module
        missing = [n for n in names if f'id="{module}.{n}"' not in html]
        assert not missing, f"{page}: no entry for {missing}"
    # the top-level page is not just a list: docstrings (with their maths) are rendered
    html = (site / "api/gcc_jax/index.html").read_text()
    assert "∫ s''(t)²" in html


def test_every_subcommand_is_documented_with_its_help(site):
    from gcc_jax.experiments import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    html = (site / "cli/index.html").read_text()
    for name in sub.choices:
        assert f'id="{name}"' in html, f"cli page has no section for `{name}`"
        assert f"usage: gcc-jax {name}" in html, f"cli page lacks `gcc-jax {name} --help`"


@pytest.mark.parametrize("page", ["getting-started.md", "numerics.md"])
def test_code_examples_run(page):
    text = (ROOT / "docs" / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block.replace("num=2000", "num=64"), page, "exec"), namespace)


def test_documented_json_schema_matches_a_real_record(tmp_path):
    """The keys in docs/outputs.md are exactly the keys save_result writes."""
    import json

    from gcc_jax.experiments import ExperimentResult, save_result

    text = (ROOT / "docs" / "outputs.md").read_text()
    example = json.loads(re.search(r"```json\n(.*?)```", text, flags=re.S).group(1))
    table = set(re.findall(r"^\| `(\w+)`", text, flags=re.M))
    table |= {
        k.strip("` ")
        for row in re.findall(r"^\| (`\w+`(?:, `\w+`)+) \|", text, flags=re.M)
        for k in row.split(",")
    }
    result = ExperimentResult("demo", {"n": 1}, {"seed": 0}, {"loss": "a loss"}, {"rows": []})
    saved = json.loads(save_result(result, tmp_path)["json"].read_text())
    assert set(example) == set(saved)
    assert set(saved) <= table, set(saved) - table
    assert example["schema_version"] == saved["schema_version"]
