"""Griffe extension: gcc_jax's docstrings as mkdocstrings renders them.

* ``Example:`` sections become ``Examples:``: griffe's Google parser only treats the plural
  heading as code (``>>>`` lines and their output), and would otherwise render the doctest as
  Markdown prose.
* Sphinx roles (``:class:`SplineCode```, ``:func:`~gcc_jax.monte_carlo_loss```, ``:meth:``,
  ``:attr:``, ``:data:``, ``:mod:``, ``:exc:``, ``:obj:``) become cross-references that link:
  the name is resolved in the docstring's own scope (its object, then the enclosing class and
  module, as Python would), and written as an optional autorefs reference, so a name with an
  API entry links there and any other is shown as code. ``~`` shows the last component only.
  No library file changes for this: the conversion happens when the site is built.
"""

import html
import re

import griffe

_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)
ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):`(~?)([\w.]+)(?:\(\))?`")
"""A Sphinx cross-reference role and its target."""


_RAISES_AS = re.compile(r"^(\s*)Raises:[ \t]*\n\1[ \t]+as (.*)$", re.MULTILINE)
"""``Raises:`` followed by ``as f.`` (the errors of another function), which is no
``Exception: description`` pair: written as a sentence."""


def _member_path(scope, head: str) -> str | None:
    """The path of ``head`` as a member of ``scope``, inherited members of a class included."""
    members = scope.all_members if scope.is_class else scope.members
    if head not in members:
        return None
    member = members[head]
    return member.target_path if member.is_alias else member.path


def _in_module_classes(module, head: str) -> str | None:
    """``head`` as a method or attribute of the first class of ``module`` that has it (a
    module's docstring naming its classes' methods)."""
    for cls in module.classes.values():
        try:
            path = _member_path(cls, head)
        except (griffe.AliasResolutionError, griffe.CyclicAliasError, KeyError):
            continue
        if path is not None:
            return path
    return None


def resolve(obj, name: str) -> str:
    """The full path of ``name`` as seen from ``obj``'s docstring, or ``name`` itself."""
    head, _, rest = name.lstrip(".").partition(".")
    path, scope = None, obj
    while scope is not None and path is None:  # the object, its class, its module, ...
        try:
            path = _member_path(scope, head)
        except (griffe.AliasResolutionError, griffe.CyclicAliasError, KeyError):
            path = None
        scope = scope.parent
    if path is None:
        try:
            path = obj.resolve(head)  # imported names
        except (griffe.NameResolutionError, griffe.AliasResolutionError, KeyError):
            path = _in_module_classes(obj.module, head)
    if path is None:
        return name.lstrip(".")
    return f"{path}.{rest}" if rest else path


def crossref(obj, match: re.Match) -> str:
    """The autorefs reference (``<autoref ... optional>``) of one role."""
    tilde, name = match.group(1), match.group(2)
    shown = name.rsplit(".", 1)[-1] if tilde else name.lstrip(".")
    identifier = html.escape(resolve(obj, name), quote=True)
    code = f"<code>{html.escape(shown)}</code>"
    return f'<autoref identifier="{identifier}" optional>{code}</autoref>'


def convert(obj, text: str) -> str:
    """``text`` (a docstring of ``obj``) with ``Example:`` headings and Sphinx roles converted."""
    text = _HEADING.sub(r"\1Examples:", text)
    text = _RAISES_AS.sub(r"\1Raises the same errors as \2", text)
    return ROLE.sub(lambda m: crossref(obj, m), text)


class ExampleSections(griffe.Extension):
    """Convert every docstring before it is parsed (see the module docstring)."""

    def on_instance(self, *, node, obj, agent, **kwargs) -> None:  # noqa: ARG002 (griffe API)
        if obj.docstring is not None:
            obj.docstring.value = convert(obj, obj.docstring.value)
