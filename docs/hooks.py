"""MkDocs hooks: keep the generated parts of the docs in step with the code.

* ``::: gcc_jax.MODULE`` on a line of its own becomes a mkdocstrings block that lists the
  module's public names explicitly (``__all__`` when it has one, else every re-exported name
  that does not start with ``_``), so each page documents exactly what ``import`` gives.
* ``<!-- include: PATH -->`` becomes the text of ``PATH`` (relative to the repository root),
  e.g. the changelog.
* ``<!-- gcc-jax-help: SUBCOMMAND -->`` becomes the output of ``gcc-jax SUBCOMMAND --help``
  (``<!-- gcc-jax-help: -->`` for the top-level help), so the command-line pages cannot drift.
"""

import contextlib
import importlib
import inspect
import io
import os
import re
from pathlib import Path

_API = re.compile(r"^::: (gcc_jax[\w.]*)[ \t]*$", re.MULTILINE)
_INCLUDE = re.compile(r"^<!-- include: ([\w./-]+) -->[ \t]*$", re.MULTILINE)
_HELP = re.compile(r"^<!-- gcc-jax-help: ?([\w-]*) -->[ \t]*$", re.MULTILINE)


def public_names(module_name: str) -> list[str]:
    """The names ``module_name`` exports, minus submodules that have pages of their own."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    out = []
    for name in names:
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            continue
        owner = getattr(obj, "__module__", module_name) or module_name
        if not isinstance(owner, str) or owner.split(".")[0] != "gcc_jax":
            continue  # e.g. a re-exported typing alias
        out.append(name)
    return out


def _api_block(match: re.Match) -> str:
    module_name = match.group(1)
    members = "\n".join(f"        - {n}" for n in public_names(module_name))
    return f"::: {module_name}\n    options:\n      members:\n{members}\n"


def cli_help(subcommand: str) -> str:
    """``gcc-jax [SUBCOMMAND] --help`` as printed on an 100-column terminal."""
    from gcc_jax.experiments import cli

    argv = [subcommand, "--help"] if subcommand else ["--help"]
    buf = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
            cli.main(argv)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    text = buf.getvalue().rstrip()
    if not text:
        raise RuntimeError(f"`gcc-jax {subcommand} --help` printed nothing")
    return "```text\n" + text + "\n```"


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (MkDocs hook signature)
    root = Path(config["config_file_path"]).parent
    markdown = _INCLUDE.sub(lambda m: (root / m.group(1)).read_text(), markdown)
    markdown = _API.sub(_api_block, markdown)
    return _HELP.sub(lambda m: cli_help(m.group(1)), markdown)
