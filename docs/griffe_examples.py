"""Griffe extension: read gcc_jax's ``Example:`` docstring sections as doctest examples.

gcc_jax's docstrings follow Google style with a singular ``Example:`` heading; griffe's Google
parser only treats the plural ``Examples:`` as code (``>>>`` lines and their output), and would
otherwise render the doctest as Markdown prose.
"""

import re

import griffe

_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Rename ``Example:`` to ``Examples:`` in every docstring before it is parsed."""

    def on_instance(self, *, node, obj, agent, **kwargs) -> None:  # noqa: ARG002 (griffe API)
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
