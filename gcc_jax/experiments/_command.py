"""The shape of a ``gcc-jax`` subcommand: what an experiment registers with the command line.

Each experiment has a command module in :mod:`gcc_jax.experiments._commands` that defines one
:class:`Command`: its flags, toy sizes, defaults and rules, none of which imports JAX, and the
path of its experiment module, whose conventional entry points ``run`` (config → records),
``report`` (records → text) and ``save`` (records → files) are imported when called. So the command
line parses and checks its arguments before it imports JAX. Every subcommand gets the common
flags ``--toy`` (also ``GCC_JAX_TOY=1``), ``--seed``, ``--out`` and ``--no-progress``; the
command's :attr:`Command.flags` (:class:`gcc_jax.experiments._commands._flags.Flags`) adds its
own (defaults ``None`` so an explicit flag can be told apart) and turns them into the keyword
arguments of its run function: the full-size defaults, then the toy sizes when ``--toy``, then
every flag given explicitly (explicit flags always win).
"""

import argparse
import dataclasses
import importlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .._core.scalars import as_int

if TYPE_CHECKING:
    from ._commands._flags import Flags

R = TypeVar("R")

__all__ = [
    "Batches",
    "Command",
    "Interrupted",
    "Lazy",
    "StopOnInterrupt",
    "check_batches",
    "float_list",
    "from_arguments",
    "int_list",
    "json_dict",
    "merge_config",
    "release_compiled_programs",
    "str_list",
]


class Lazy:
    """A function named ``"module:attribute"``, imported at its first call.

    Example:
        >>> join = Lazy("os.path:join")
        >>> join("a", "b") == __import__("os").path.join("a", "b")
        True
    """

    def __init__(self, path: str):
        self.path = path

    @property
    def target(self) -> Callable:
        """The function itself (imports its module)."""
        module, name = self.path.split(":")
        return getattr(importlib.import_module(module), name)

    def __call__(self, *args, **kwargs):
        return self.target(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Lazy({self.path!r})"


@dataclasses.dataclass(frozen=True)
class Command:
    """One ``gcc-jax`` subcommand.

    Attributes:
        name: the subcommand (``"rates"``).
        help: one line for ``gcc-jax --help``.
        description: the paragraph of ``gcc-jax NAME --help``.
        module: the experiment module (``"gcc_jax.experiments.rates"``), which defines
            ``run(**kwargs, seed=, progress=) -> result``, ``report(result) -> str`` (the
            plain-text summary printed and saved) and ``save(result, out) -> {name: path}``
            (writes JSON, text and figures to ``out``); :attr:`run`, :attr:`report` and
            :attr:`save` are :class:`Lazy` references to them.
        flags: the command's flags, its run function's keyword defaults (which the rules
            read; a test holds them equal to the run function's signature), its toy sizes
            and the rules of its settings.
        x64: enable float64 before running (``None``: leave JAX's setting alone); with
            ``float32_flag`` the command also gets ``--float32`` which turns it off.
        float32_flag: add a ``--float32`` flag.
        errors: exception types reported as ``error: <message>`` with exit code 2.
        extras: the optional dependencies (``pyproject.toml`` extras) the run needs, checked
            before any compute (:data:`gcc_jax.experiments.cli.EXTRAS`): a missing one exits
            with status 2 naming the extra to install.
        fast_toy_compile: with ``--toy``, compile with XLA's optimisations mostly off
            (``jax_disable_most_optimizations``): toy runs are compilation-bound, and this
            changes code generation only (results equal to round-off). ``False`` for a command
            whose toy run measures speed.
    """

    name: str
    help: str
    description: str
    module: str
    flags: "Flags"
    x64: bool | None = True
    float32_flag: bool = False
    errors: tuple[type[BaseException], ...] = (ValueError, TypeError)
    fast_toy_compile: bool = True
    extras: tuple[str, ...] = ("experiments",)

    @property
    def defaults(self) -> Mapping[str, Any]:
        """The run function's keyword defaults (those of :attr:`flags`)."""
        return self.flags.defaults

    @property
    def rules(self) -> tuple[Callable[[Mapping[str, Any]], None], ...]:
        """The checks of the effective settings (:mod:`gcc_jax.experiments._checks`)."""
        return self.flags.checks()

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's flags to ``parser``."""
        self.flags.add_arguments(parser)

    def config(self, args: argparse.Namespace, toy: bool) -> dict[str, Any]:
        """The keyword arguments of ``run`` (without ``seed``/``progress``) from the flags."""
        return self.flags.config(args, toy)

    @property
    def run(self) -> Callable[..., Any]:
        """The experiment's ``run`` (imported at its first call)."""
        return Lazy(f"{self.module}:run")

    @property
    def report(self) -> Callable[[Any], str]:
        """The experiment's ``report`` (imported at its first call)."""
        return Lazy(f"{self.module}:report")

    @property
    def save(self) -> Callable[[Any, Path], Mapping[str, Path]]:
        """The experiment's ``save`` (imported at its first call)."""
        return Lazy(f"{self.module}:save")


class Interrupted(KeyboardInterrupt):
    """Raised by a ``run_*`` function stopped by the user (Ctrl-C) with what it had finished.

    ``partial`` is a complete result of the finished part (its ``config["interrupted"]`` is
    true); the command line saves it like a full result and exits with status 130.
    """

    def __init__(self, partial: Any):
        super().__init__("interrupted")
        self.partial = partial


class StopOnInterrupt:
    """The one way an experiment keeps what it finished when the user presses Ctrl-C.

    Wrap the measurement loop in ``with StopOnInterrupt() as stop:``; a ``KeyboardInterrupt``
    inside it ends the loop (the rows appended so far are kept) and sets ``stop.interrupted``.
    Build the result from what finished, with ``config["interrupted"] = stop.interrupted``,
    and return ``stop.finish(result)``: the result itself, or :class:`Interrupted` raised
    with it, which the command line saves (flagged partial) before exiting with status 130.

    Example:
        >>> rows = []
        >>> with StopOnInterrupt() as stop:
        ...     for i in range(3):
        ...         if i == 2:
        ...             raise KeyboardInterrupt
        ...         rows.append(i)
        >>> stop.interrupted, rows
        (True, [0, 1])
        >>> try:
        ...     stop.finish({"rows": rows})
        ... except Interrupted as err:
        ...     print(err.partial)
        {'rows': [0, 1]}
    """

    def __init__(self):
        self.interrupted = False

    def __enter__(self) -> "StopOnInterrupt":
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            if isinstance(value, Interrupted):  # a nested experiment already saved its part
                return False
            self.interrupted = True
            return True  # swallowed: the caller builds the partial result
        return False

    def finish(self, result: Any) -> Any:
        """``result``, or :class:`Interrupted` carrying it when the loop was interrupted."""
        if self.interrupted:
            raise Interrupted(result)
        return result


def release_compiled_programs() -> None:
    """Free every program JAX has compiled in this process (:func:`jax.clear_caches`).

    XLA's CPU backend maps each program it compiles into memory, about 20 mappings per program,
    and a Linux process may hold at most ``vm.max_map_count`` mappings (65,530 by default). A
    process that keeps some 3,000 compiled programs alive fails with "LLVM compilation error:
    Cannot allocate memory" and then crashes. An experiment that compiles programs for many
    sizes calls this between groups of cells that share no shapes, so that only one group's
    programs are alive at a time; a program needed again is compiled again.
    """
    import jax

    jax.clear_caches()


def merge_config(
    defaults: Mapping[str, Any],
    toy: Mapping[str, Any] | None,
    explicit: Mapping[str, Any],
) -> dict[str, Any]:
    """``defaults``, overridden by ``toy`` (when given), overridden by the non-``None`` flags.

    Example:
        >>> merge_config({"n": 40, "k": 20}, {"n": 10, "k": 4}, {"n": 12, "k": None})
        {'n': 12, 'k': 4}
    """
    out = dict(defaults)
    out.update(toy or {})
    out.update({k: v for k, v in explicit.items() if v is not None})
    return out


def from_arguments(record: type[R], arguments: Mapping[str, Any]) -> R:
    """The NamedTuple ``record`` with each field taken by name from ``arguments``.

    The one way a run function turns its keyword arguments into a settings record: pass
    ``locals()`` (the arguments, and whatever the run has rebound them to so far); names that
    are not fields are ignored, and a field absent from ``arguments`` keeps its default.

    Example:
        >>> from typing import NamedTuple
        >>> class Sizes(NamedTuple):
        ...     n: int
        ...     k: int
        ...     fill: str = "mean"
        >>> from_arguments(Sizes, {"n": 12, "k": 4, "seed": 0})
        Sizes(n=12, k=4, fill='mean')
    """
    return record(**{name: arguments[name] for name in record._fields if name in arguments})


class Batches(NamedTuple):
    """How many straggler patterns a pattern experiment samples, in batches of jobs (the sizes
    that ``gcc-jax run`` and ``gcc-jax regimes`` share, with their flags).

    Attributes:
        trials: random patterns per batch (``--masks``).
        evaluation: batches the codes are measured on (``--batches``).
        cv: held-out batches that choose GCC's λ (``--cv-batches``).
        worst_case: batches whose worst pattern is searched (``--worst-case-batches``).
    """

    trials: int
    evaluation: int
    cv: int
    worst_case: int


def check_batches(
    num_trials, num_batches, num_cv_batches, worst_case_batches, *, min_cv: int
) -> Batches:
    """The :class:`Batches` of a run's arguments: integers, each ``>= 1`` but the held-out
    batches, ``>= min_cv``; a ``TypeError`` or ``ValueError`` names the bad argument.

    Example:
        >>> check_batches(8, 4, 0, 2, min_cv=0)
        Batches(trials=8, evaluation=4, cv=0, worst_case=2)
    """
    return Batches(
        trials=as_int(num_trials, "num_trials", 1),
        evaluation=as_int(num_batches, "num_batches", 1),
        cv=as_int(num_cv_batches, "num_cv_batches", min_cv),
        worst_case=as_int(worst_case_batches, "worst_case_batches", 1),
    )


def _items(text: str, what: str) -> list[str]:
    """The comma-separated items of ``text``; an empty item (``"1,,2"``, ``"1,"``) or none
    at all is an error."""
    items = [v.strip() for v in text.split(",")]
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected at least one {what}")
    if "" in items:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated {what}s with no empty item; got {text!r}"
        )
    return items


def int_list(text: str) -> tuple[int, ...]:
    """Parse ``"0,2,4"`` (argparse type).

    Example:
        >>> int_list("0, 2,4")
        (0, 2, 4)
        >>> int_list("1,,2")
        Traceback (most recent call last):
        argparse.ArgumentTypeError: expected comma-separated integers with no empty item; got '1,,2'
    """
    items = _items(text, "integer")
    try:
        return tuple(int(v) for v in items)
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers; got {text!r}"
        ) from err


def str_list(text: str) -> tuple[str, ...]:
    """Parse ``"gcc,bacc"`` (argparse type)."""
    return tuple(_items(text, "name"))


def float_list(text: str) -> tuple[float, ...]:
    """Parse ``"0,1e-6"`` (argparse type)."""
    items = _items(text, "number")
    try:
        return tuple(float(v) for v in items)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers; got {text!r}") from err


def json_dict(text: str) -> dict:
    """Parse a JSON object (argparse type)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object; got {text!r}") from err
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object; got {text!r}")
    return value
