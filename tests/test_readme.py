"""The README's quick start runs and its assertions hold."""

import re
from pathlib import Path

import pytest


@pytest.mark.slow  # like the documentation's examples (tests/test_docs.py)
def test_readme_quick_start_runs():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python quick start"
    code = blocks[0]
    assert len(code.strip().splitlines()) <= 15
    exec(compile(code, "README.md", "exec"), {})


def test_readme_links_exist():
    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local, "README links no documentation"
    missing = [link for link in local if not (root / link).exists()]
    assert not missing, f"README links to missing files: {missing}"
    assert "../shared" not in text  # the design lives in the repository (docs/design.md)
