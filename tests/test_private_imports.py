"""No gcc_jax module imports another module's private names (``from .x import _name``).

Ruff's PLC2701 (enabled in pyproject.toml) catches private imports across packages; inside one
package it allows them, so this test parses every module and checks that every ``_name`` a
module imports from another gcc_jax module is a private *module* (``from . import _spline`` and
``from ._spline import fit`` are fine; ``from ._spline import _helper`` is not: make the helper
public within its private module instead).
"""

import ast
import pathlib

import gcc_jax

ROOT = pathlib.Path(gcc_jax.__file__).parent

# Known violations in modules owned by others, to be fixed there: (module, imported name).
KNOWN: set[tuple[str, str]] = set()


def _target(path: pathlib.Path, node: ast.ImportFrom) -> pathlib.Path | None:
    """The directory-or-module path an ImportFrom refers to, if it is inside gcc_jax."""
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        return base.joinpath(*node.module.split(".")) if node.module else base
    if node.module and node.module.split(".")[0] == "gcc_jax":
        return ROOT.parent.joinpath(*node.module.split("."))
    return None


def _private_name_imports() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _target(path, node)
            if target is None:
                continue
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__"):
                    continue
                if (target / name).is_dir() or (target / f"{name}.py").exists():
                    continue  # a private module, not a private name
                found.add((path.relative_to(ROOT).as_posix(), name))
    return found


def test_no_module_imports_another_modules_private_names():
    new = _private_name_imports() - KNOWN
    assert not new, (
        "private names imported across modules (make them public within their private module): "
        + ", ".join(f"{mod}: {name}" for mod, name in sorted(new))
    )


def test_the_check_sees_a_violation(tmp_path, monkeypatch):
    pkg = tmp_path / "gcc_jax"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_a.py").write_text("def _hidden(): pass\n")
    (pkg / "sub" / "b.py").write_text("from .._a import _hidden\nfrom .. import _a\n")
    monkeypatch.setitem(globals(), "ROOT", pkg)
    assert _private_name_imports() == {("sub/b.py", "_hidden")}
