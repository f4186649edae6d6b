"""The documentation site builds strictly (no broken links, anchors or references), documents
every public name and every subcommand, and its code examples run; the built pages link their
cross-references, typeset maths, render the notebooks with their outputs and load nothing from
another host."""

import html as html_lib
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

#: builds the site (mkdocs) and runs every page's examples: `make test-integration`
pytestmark = pytest.mark.slow

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
    """The built site: ``GCC_JAX_DOCS_SITE`` (a folder ``mkdocs build`` wrote) when set, else a
    fresh strict build."""
    if os.environ.get("GCC_JAX_DOCS_SITE"):
        return Path(os.environ["GCC_JAX_DOCS_SITE"])
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


def _pages(site):
    return {p: p.read_text() for p in site.rglob("*.html")}


def test_no_sphinx_role_is_printed_raw(site):
    """Docstrings' Sphinx roles (:class:`X`, :func:`~a.b`) become links or code, never text."""
    role = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):(?:<code>|`)")
    raw = {str(p.relative_to(site)): len(role.findall(t)) for p, t in _pages(site).items()}
    assert not {p: n for p, n in raw.items() if n}, raw


def test_cross_references_in_docstrings_link_to_their_entries(site):
    """`monte_carlo_loss`'s docstring names SplineCode-like classes and functions by role:
    they link to the entries that exist on the API pages."""
    html = (site / "api/gcc_jax/index.html").read_text()
    links = re.findall(r'<a class="autorefs autorefs-internal"[^>]*href="([^"]+)"', html)
    assert len(links) > 50
    ids = set()
    for page in site.glob("api/*/index.html"):
        ids |= {(page.parent.name, i) for i in re.findall(r'id="([^"]+)"', page.read_text())}
    for href in links:
        page, _, anchor = href.rpartition("#")
        name = Path(page).name or "gcc_jax"
        assert (name, anchor) in ids, href


def test_api_pages_list_every_object_in_their_contents(site):
    """One second-level heading per public object, SplineCode, coded_apply and
    monte_carlo_loss first; the page title is not repeated as a heading."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        hooks = importlib.import_module("hooks")
    finally:
        sys.path.pop(0)
    for module, page in API_PAGES.items():
        html = (site / page / "index.html").read_text()
        toc = re.findall(r'data-bs-level="2"><a href="#([^"]+)"', html)
        expected = [f"{module}.{n}" for n in hooks.ordered_names(module)]
        expected = [e for e in expected if e in toc or f'id="{e}"' not in html]
        assert toc == [e for e in expected if e in toc] and len(toc) >= len(expected) - 2, page
        headings = re.findall(r"<h[12][^>]*>(.*?)<a class=\"headerlink\"", html)
        assert len(headings) == len(set(headings)), (page, headings)
    toc = re.findall(
        r'data-bs-level="2"><a href="#([^"]+)"', (site / "api/gcc_jax/index.html").read_text()
    )
    assert toc[:3] == ["gcc_jax.SplineCode", "gcc_jax.coded_apply", "gcc_jax.monte_carlo_loss"]


def test_nothing_is_loaded_from_another_host(site):
    external = re.compile(r'<script[^>]*src="https?://|<link[^>]*href="https?://[^"]*\.css')
    assert not [str(p) for p, t in _pages(site).items() if external.search(t)]


def test_code_is_highlighted_and_maths_typeset_at_build_time(site):
    page = (site / "getting-started/index.html").read_text()
    assert '<span class="kn">import</span>' in page  # Pygments' token classes
    assert (site / "css/pygments.css").exists()
    design = html_lib.unescape((site / "design/index.html").read_text())
    assert design.count("<math") >= 3 and "\\(" not in design and "\\[" not in design
    assert "<msup>" in design and "<mi>λ</mi>" in design  # S^3 N^-3 and the spline objective


def test_notebooks_are_rendered_with_their_outputs(site):
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        html = html_lib.unescape((site / "notebooks" / path.stem / "index.html").read_text())
        cells = json.loads(path.read_text())["cells"]
        texts = [
            "".join(o["text"]).strip().splitlines()[0]
            for c in cells
            for o in c.get("outputs", [])
            if o.get("output_type") == "stream" and "".join(o["text"]).strip()
        ]
        assert texts, path.name
        for line in texts:
            assert line.strip() in html, (path.name, line)


def test_references_page_cites_the_papers_the_modules_follow(site):
    """Every arXiv number a module docstring cites is on the References page."""
    cited = set()
    for path in (ROOT / "gcc_jax").rglob("*.py"):
        cited |= set(re.findall(r"arXiv:? ?(\d{4}\.\d{5})", path.read_text()))
    page = (site / "references/index.html").read_text()
    assert cited and not [c for c in cited if c not in page], cited
    for paper in ("2406.00300", "2608.28910", "2009.08327", "1806.01259", "SOSP 2019"):
        assert paper in page


def test_gpu_page_quotes_the_record(site):
    """The GPU page's Monte Carlo throughput is the one in the committed record."""
    record = json.loads((ROOT / "bench/results/gpu/2026-12-04-house/monte_carlo.json").read_text())
    page = (site / "gpu/index.html").read_text()
    for row in record["rows"]:
        assert f"{row['masks_per_s'] / 1e6:.1f} M masks/s" in page, row["dtype"]
