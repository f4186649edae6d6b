"""The README's quick start runs and its assertions hold."""

import re
from pathlib import Path


def test_readme_quick_start_runs():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python quick start"
    code = blocks[0]
    assert len(code.strip().splitlines()) <= 15
    exec(compile(code, "README.md", "exec"), {})
