"""The ``gcc-jax`` command line: a registry of the experiments' subcommands.

Each experiment has a :class:`gcc_jax.experiments.Command` (its flags, toy sizes, argument rules,
and its run and report functions, imported when called); this module lists them and adds the
common flags (``--toy``, ``--seed``, ``--out``, ``--no-progress``). Arguments are parsed and
checked before JAX is imported: ``gcc-jax --version`` and every argument error return at once.
"""

import argparse
import dataclasses
import importlib.util
import os
import sys

from .. import __version__
from . import COMMANDS, Command
from ._checks import ConfigError, check_config, check_out, effective_config
from ._command import Interrupted

#: what the experiments import beyond the core dependencies (module -> distribution)
EXTRA_MODULES = {"matplotlib": "matplotlib", "sklearn": "scikit-learn", "tqdm": "tqdm"}

EXTRAS = {"experiments": EXTRA_MODULES, "ray": {"ray": "ray"}}
"""Each optional extra of ``pyproject.toml`` that a command can declare
(:attr:`gcc_jax.experiments.Command.extras`): the modules it installs -> their distributions."""


def _toy(args: argparse.Namespace) -> bool:
    return bool(args.toy) or os.environ.get("GCC_JAX_TOY", "") not in ("", "0")


def missing_extras(command: Command) -> dict[str, list[str]]:
    """``command``'s extras that are not installed -> their missing distributions."""
    out = {}
    for extra in command.extras:
        missing = [d for m, d in EXTRAS[extra].items() if importlib.util.find_spec(m) is None]
        if missing:
            out[extra] = missing
    return out


def _add(subparsers, command: Command) -> None:
    p = subparsers.add_parser(command.name, help=command.help, description=command.description)
    command.add_arguments(p)
    if command.float32_flag:
        p.add_argument("--float32", action="store_true", help="run in float32 (default float64)")
    p.add_argument("--toy", action="store_true", help="tiny sizes (seconds; also GCC_JAX_TOY=1)")
    p.add_argument("--seed", type=int, default=0, help="seeds everything (default 0)")
    p.add_argument("--out", default="gcc-results", help="output folder (default ./gcc-results)")
    p.add_argument("--no-progress", action="store_true", help="hide progress output")
    p.set_defaults(command=command, parser=p)


def _checked_config(command: Command, args: argparse.Namespace) -> dict:
    """The run's settings, after every check that needs no compute: the optional dependencies
    the command declares, its rules (data sets asked for included), then ``--out`` (last, and
    left as it was: a rejected command leaves no folder behind)."""
    missing = missing_extras(command)
    if missing:
        needs = "; ".join(
            f"{', '.join(d)}: pip install 'gcc_jax[{extra}]'" for extra, d in missing.items()
        )
        args.parser.error(f"gcc-jax {command.name} needs {needs}")
    try:
        config = command.config(args, _toy(args))
        check_config(command, effective_config(command, config), args.seed)
        check_out(args.out)
    except ConfigError as err:
        args.parser.error(str(err))  # the subcommand's usage, "error: ...", exit code 2
    return config


def _run_command(command: Command, config: dict, args: argparse.Namespace):
    return command.run(**config, seed=args.seed, progress=not args.no_progress)


def _fast_toy_compile(command: Command, args: argparse.Namespace) -> bool:
    """Whether this run compiles with XLA's optimisations mostly off: toy runs (compilation-bound)
    of commands that allow it, unless ``JAX_DISABLE_MOST_OPTIMIZATIONS`` is set (the user's
    choice wins)."""
    return (
        _toy(args)
        and command.fast_toy_compile
        and "JAX_DISABLE_MOST_OPTIMIZATIONS" not in os.environ
    )


def _execute(command: Command, config: dict, args: argparse.Namespace) -> int:
    import jax

    from ._io import summary_text

    if command.x64 is not None:
        x64 = command.x64 and not (command.float32_flag and args.float32)
        jax.config.update("jax_enable_x64", x64)
    fast = _fast_toy_compile(command, args)
    before = jax.config.read("jax_disable_most_optimizations")
    if fast:  # toy runs are compilation-bound: a third less compile time, results to round-off
        jax.config.update("jax_disable_most_optimizations", True)
    try:
        result = _run_command(command, config, args)
    except Interrupted as stop:  # Ctrl-C: save what finished, say so, exit 130
        paths = _save_partial(command, _marked(stop.partial, args), args.out)
        print(
            f"gcc-jax {command.name}: interrupted; partial results written to "
            + ", ".join(str(v) for v in paths.values()),
            file=sys.stderr,
        )
        return 130
    except KeyboardInterrupt:
        print(
            f"gcc-jax {command.name}: interrupted before any result was complete; nothing written",
            file=sys.stderr,
        )
        return 130
    finally:
        if fast:
            jax.config.update("jax_disable_most_optimizations", before)
    result = _marked(result, args)
    print(summary_text(result, command.report(result)))
    paths = command.save(result, args.out)
    print("wrote " + ", ".join(str(v) for v in paths.values()))
    return 0


def _marked(result, args: argparse.Namespace):
    """``result``, marked as a toy run's (:attr:`ExperimentResult.toy`) when ``--toy``."""
    from ._io import ExperimentResult

    if _toy(args) and isinstance(result, ExperimentResult) and not result.toy:
        return dataclasses.replace(result, toy=True)
    return result


def _save_partial(command: Command, partial, out) -> dict:
    """Save an interrupted run's result: as usual, else (tables or plots of a partial result can
    fail) at least its JSON record."""
    from ._io import save_result

    try:
        return dict(command.save(partial, out))
    except Exception as err:  # noqa: BLE001 - the JSON record must still be written
        print(f"gcc-jax {command.name}: could not write the summary ({err})", file=sys.stderr)
        return dict(save_result(partial, out))


def build_parser() -> argparse.ArgumentParser:
    """The ``gcc-jax`` argument parser: one subcommand per registered experiment."""
    parser = argparse.ArgumentParser(
        prog="gcc-jax", description="General coded computing in JAX (GCC and its rivals)."
    )
    parser.add_argument("--version", action="version", version=f"gcc-jax {__version__}")
    subparsers = parser.add_subparsers(dest="name", required=True, metavar="COMMAND")
    for command in COMMANDS:
        _add(subparsers, command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``gcc-jax`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    args, extra = build_parser().parse_known_args(argv)
    if extra:  # report an unknown flag under the subcommand's usage, not the top level's
        args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    command = args.command
    config = _checked_config(command, args)  # before JAX is imported: errors return at once
    from .._core.xla_flags import use_classic_cpu_emitters
    from ..nn.data import DatasetError

    use_classic_cpu_emitters()  # compilation-bound experiments: half the compile time and memory
    try:
        return _execute(command, config, args)
    except (*command.errors, DatasetError) as err:  # bad input: a clear message, no traceback
        print(f"gcc-jax {command.name}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
