"""MkDocs hooks: keep the generated parts of the docs in step with the code.

* ``::: gcc_jax.MODULE`` on a line of its own becomes the module's docstring, a table of its
  public names (``__all__`` when it has one, else every re-exported name that does not start
  with ``_``) with the first line of each docstring, and one mkdocstrings block per name, each
  a second-level heading (so the page's table of contents lists every object): each page
  documents exactly what ``import`` gives, :data:`FIRST` first, then in ``__all__`` order.
* ``<!-- include: PATH -->`` becomes the text of ``PATH`` (relative to the repository root),
  e.g. the changelog.
* ``<!-- gcc-jax-help: SUBCOMMAND -->`` becomes the output of ``gcc-jax SUBCOMMAND --help``
  (``<!-- gcc-jax-help: -->`` for the top-level help), so the command-line pages cannot drift.
* ``<!-- gcc-jax-settings -->`` becomes the table of the settings that several subcommands
  share (``gcc_jax.experiments._commands._flags.SETTINGS``): flag, short form, old names.
* ``notebooks/*.ipynb`` (outside ``docs/``) are added to the site's files, for mkdocs-jupyter to
  render with their stored outputs.
* Maths written ``$...$`` / ``$$...$$`` (pymdownx.arithmatex's generic output) is typeset as
  MathML at build time (latex2mathml): browsers draw it natively, no script, no CDN.
* No page loads anything from another host: ``<script src=http...>`` and external stylesheets
  (a notebook template's MathJax and Mermaid loaders) are dropped, so the site works offline.
"""

import contextlib
import functools
import html
import importlib
import inspect
import io
import os
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

_API = re.compile(r"^::: (gcc_jax[\w.]*)[ \t]*$", re.MULTILINE)
_INCLUDE = re.compile(r"^<!-- include: ([\w./-]+) -->[ \t]*$", re.MULTILINE)
_HELP = re.compile(r"^<!-- gcc-jax-help: ?([\w-]*) -->[ \t]*$", re.MULTILINE)
_SETTINGS = re.compile(r"^<!-- gcc-jax-settings -->[ \t]*$", re.MULTILINE)


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


FIRST = ("SplineCode", "coded_apply", "monte_carlo_loss")
"""The objects a reader looks for first: at the top of their API page."""

_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):`~?(?:[\w]+\.)*?([\w.]+)`")


def ordered_names(module_name: str) -> list[str]:
    """The public names of ``module_name`` in page order: :data:`FIRST`, then the others."""
    names = public_names(module_name)
    return [n for n in FIRST if n in names] + [n for n in names if n not in FIRST]


def _summary(module_name: str, name: str) -> str:
    """The first line of ``name``'s docstring, Sphinx roles shown as code, for a table."""
    doc = inspect.getdoc(getattr(importlib.import_module(module_name), name)) or ""
    line = doc.strip().split("\n\n")[0].replace("\n", " ")
    return _ROLE.sub(r"`\1`", line).replace("|", "\\|")


@functools.cache
def _griffe_package():
    import griffe

    return griffe.load("gcc_jax", search_paths=[str(Path(__file__).resolve().parents[1])])


def documentable(module_name: str, name: str) -> bool:
    """Whether mkdocstrings can render ``module_name.name`` (griffe resolves it statically; a
    constant assigned by tuple unpacking, say, it cannot)."""
    import griffe

    path = f"{module_name}.{name}".removeprefix("gcc_jax").lstrip(".")
    try:
        obj = _griffe_package()[path]
        if obj.is_alias:
            obj.final_target  # noqa: B018 (resolves the alias, or raises)
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return False
    return True


def _api_block(match: re.Match) -> str:
    module_name = match.group(1)
    names = ordered_names(module_name)
    shown = {n: documentable(module_name, n) for n in names}
    rows = "\n".join(
        (f"| [`{n}`][{module_name}.{n}] |" if shown[n] else f"| `{n}` |")
        + f" {_summary(module_name, n)} |"
        for n in names
    )
    blocks = [
        f"::: {module_name}\n    options:\n      members: false\n      show_root_heading: false\n"
        "      show_root_toc_entry: false\n",
        f"| Name | What it is |\n| --- | --- |\n{rows}\n",
    ]
    blocks += [
        f"::: {module_name}.{n}\n    options:\n      heading_level: 2\n"
        "      show_root_full_path: false\n"
        for n in names
        if shown[n]
    ]
    return "\n".join(blocks)


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
    markdown = _SETTINGS.sub(lambda m: settings_table(), markdown)
    return _HELP.sub(lambda m: cli_help(m.group(1)), markdown)


def settings_table() -> str:
    """The shared settings as a Markdown table: flag, short form, old names, what it sets, and
    the subcommands that take it."""
    from gcc_jax.experiments import COMMANDS, cli
    from gcc_jax.experiments._commands._flags import SETTINGS  # noqa: PLC2701 (the CLI table)

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    rows = ["| flag | short | old names (aliases) | sets | subcommands |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        users = [
            c.name
            for c in COMMANDS
            if any(s.flag in a.option_strings for a in sub.choices[c.name]._actions)
        ]
        old = ", ".join(f"`{a}`" for a in s.aliases) or "—"
        short = f"`{s.short}`" if s.short else "—"
        names = ", ".join(f"`{u}`" for u in users) or "—"
        rows.append(f"| `{s.flag}` | {short} | {old} | {s.help} | {names} |")
    return "\n".join(rows) + "\n"


@event_priority(100)  # before mkdocs-jupyter's on_files, which turns .ipynb files into pages
def on_files(files, config):
    root = Path(config["config_file_path"]).parent
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        files.append(
            File(
                f"notebooks/{path.name}",
                src_dir=str(root),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


_MATH = re.compile(
    r'<(span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])\s*</\1>',
    re.S,
)


def mathml(match: re.Match) -> str:
    """One arithmatex span (``\\(...\\)``) or div (``\\[...\\]``) as MathML."""
    from latex2mathml.converter import convert

    block = match.group("block")
    latex = html.unescape(block if block is not None else match.group("inline"))
    return convert(latex, display="block" if block is not None else "inline")


def on_page_content(html_text, page, config, files):  # noqa: ARG001 (MkDocs hook signature)
    return _MATH.sub(mathml, html_text)


_EXTERNAL = re.compile(
    r'<script[^>]*\ssrc="https?://[^"]*"[^>]*>\s*</script>|<link[^>]*\shref="https?://[^"]*\.css[^"]*"[^>]*>',
)


def on_post_page(output, page, config):  # noqa: ARG001 (MkDocs hook signature)
    return _EXTERNAL.sub("", output)
