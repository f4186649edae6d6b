"""The house rules that hold the package together, checked on its source.

- the layers: ``_core`` imports no other part of gcc_jax; packages import each other one way
  only (no cycle), ``experiments`` is imported by nothing in the library;
- ``import gcc_jax`` and the core names load none of the optional, heavy dependencies;
- comments and docstrings say what the code is: no development history, no benchmark logs,
  no references to documents the repository does not contain.
"""

import ast
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gcc_jax"


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _package(module: str) -> str:
    """The top-level part of gcc_jax a module belongs to (``gcc_jax.spline._fit`` -> spline)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def _imports(module: str, path: pathlib.Path, *, top_level_only: bool) -> set[str]:
    """The gcc_jax modules ``module`` imports (absolute names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.If) and top_level_only:  # `if TYPE_CHECKING:` blocks
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "gcc_jax":
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "gcc_jax")
    modules = _modules()
    return {m for m in found if m in modules}


def _package_graph(*, top_level_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in _modules().items():
        src = _package(module)
        if src == "<root>":
            continue
        for target in _imports(module, path, top_level_only=top_level_only):
            dst = _package(target)
            if dst not in (src, "<root>"):
                graph.setdefault(src, set()).add(dst)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_core_imports_nothing_else_from_gcc_jax():
    for module, path in _modules().items():
        if _package(module) == "_core":
            others = {
                t
                for t in _imports(module, path, top_level_only=False)
                if _package(t) not in ("_core", "<root>")  # the root holds only __version__
            }
            assert not others, f"{module} imports {sorted(others)}"


def test_packages_import_each_other_one_way():
    cycle = _cycle(_package_graph(top_level_only=True))
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


def test_the_library_never_imports_the_experiments():
    for module, path in _modules().items():
        if _package(module) in ("experiments", "cli", "<root>"):
            continue
        targets = _imports(module, path, top_level_only=False)
        assert not {t for t in targets if _package(t) in ("experiments", "cli")}, module


def test_no_private_module_of_another_package_is_imported():
    """Packages meet at their public names; ``_core`` is the one shared private part."""
    bad = []
    for module, path in _modules().items():
        src = _package(module)
        for target in _imports(module, path, top_level_only=False):
            dst = _package(target)
            private = any(p.startswith("_") for p in target.split(".")[2:])
            if dst not in (src, "_core", "<root>") and private:
                bad.append(f"{module} -> {target}")
    assert not bad, "private modules imported across packages: " + ", ".join(sorted(bad))


def test_the_cycle_check_sees_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


HEAVY = ("flax", "optax", "matplotlib", "sklearn", "tqdm", "ray")


@pytest.mark.parametrize(
    "statement",
    [
        "import gcc_jax",
        "import gcc_jax as g; g.SplineCode; g.BerrutCode; g.monte_carlo_loss; g.codes",
        "import gcc_jax as g; g.worst_case_mask; g.attack; g.RobustSplineCode",
        "import gcc_jax as g; g.fit_smoothing_spline; g.sample_masks; g.evaluation; g.spline",
    ],
)
def test_import_loads_no_optional_dependency(statement):
    code = f"{statement}\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_import_gcc_jax_alone_imports_no_jax():
    code = "import gcc_jax, sys\nprint('jax' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"


# What comments and docstrings must not say: references to documents outside the repository,
# development history, working notes.
FORBIDDEN = [
    (r"DESIGN(\.md)? ?§", "cites DESIGN.md, which the repository does not contain"),
    (r"method-notes", "cites method-notes, which the repository does not contain"),
    (r"STYLE(\.md)? ?§", "cites STYLE.md, which the repository does not contain"),
    (r"\[DERIVED\]", "a working-note marker"),
    (r"\bissue \d+", "narrates development (an issue number)"),
    (r"\bsession[- ]\d+", "narrates development (a session number)"),
    (r"\bformer(ly)? (name|form|default|path)", "narrates history"),
    (r"\bas before\b", "narrates history"),
    (r"\bused (to be|before)\b|\bthe form used before\b", "narrates history"),
    (r"\bno longer\b", "narrates history"),
    (r"→ [0-9.,]+ ?(ms|µs|us|s)\b", "a before/after timing (benchmark figures: bench/README.md)"),
    (r"\bmeasured (with|on) jaxlib\b", "a benchmark log (bench/README.md)"),
    (r"\b\d[\d,]* masks/s\b", "a benchmark figure (bench/README.md)"),
]


def _comment_and_docstring_lines(path: pathlib.Path):
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    keep = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant):
            if isinstance(node.value.value, str):
                keep.update(range(node.lineno, node.end_lineno + 1))
    for i, line in enumerate(lines, 1):
        if "#" in line:
            keep.add(i)
    return [(i, lines[i - 1]) for i in sorted(keep)]


def test_comments_say_what_the_code_is():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        for lineno, line in _comment_and_docstring_lines(path):
            for pattern, why in FORBIDDEN:
                if re.search(pattern, line, flags=re.IGNORECASE):
                    bad.append(f"{path.relative_to(ROOT)}:{lineno}: {why}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_the_comment_check_sees_a_reference(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('"""The solve (DESIGN §1)."""\n\nx = 1  # the former name of y\n')
    found = [line for _, line in _comment_and_docstring_lines(path)]
    hits = [p for line in found for p, _ in FORBIDDEN if re.search(p, line, re.IGNORECASE)]
    assert len(hits) == 2
