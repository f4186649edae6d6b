"""XLA compiler settings of the ``gcc-jax`` command line, the test suite and the CPU evaluator
policy (process flags set before JAX starts, or one compilation's options).

XLA's CPU backend generates each fusion's code with its MLIR fusion emitters by default. On
this library's graphs (decoders differentiated through the encoder and the worker function,
vmapped λ rules) they cost far more compilation time and memory than the classic LLVM emitters
without faster code, and the experiments are compilation-bound, so the command line turns them
off (:data:`FLAG`; figures in ``bench/README.md``). The CPU evaluator policy asks for the same
option for the downdate decoder's programs (:mod:`gcc_jax.evaluation._policy`).

The test suite (``conftest.py``) adds :data:`SERIAL_CODEGEN` as well. An unknown flag in
``XLA_FLAGS`` aborts the process, so flags are added only for the jaxlib versions they were
tested with, and never when ``XLA_FLAGS`` already mentions them (the user's choice wins).
"""

import os

__all__ = [
    "FLAG",
    "SERIAL_CODEGEN",
    "TESTED_JAXLIB",
    "add_xla_flags",
    "compiler_options",
    "jaxlib_is_tested",
    "use_classic_cpu_emitters",
]

FLAG = "--xla_cpu_use_fusion_emitters=false"
#: one LLVM code-generation thread per compilation (the test suite's setting, not the command
#: line's): on a machine whose cores are already busy with other compilations, splitting each
#: module for parallel code generation only adds work; on an idle many-core machine it
#: shortens a compile.
SERIAL_CODEGEN = "--xla_cpu_parallel_codegen_split_count=1"
#: jaxlib versions (major, minor) the flags are tested with
TESTED_JAXLIB = ((0, 10),)


def jaxlib_is_tested() -> bool:
    """Whether the installed jaxlib is one of :data:`TESTED_JAXLIB`."""
    import jaxlib

    try:
        major, minor = (int(v) for v in jaxlib.__version__.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) in TESTED_JAXLIB


def add_xla_flags(*flags: str, environ=os.environ) -> tuple[str, ...]:
    """Append ``flags`` (``--name=value``) to ``XLA_FLAGS``, each unless the user set that name.

    Nothing is added for a jaxlib outside :data:`TESTED_JAXLIB` (an unknown flag aborts the
    process). Call before the first JAX computation (XLA reads ``XLA_FLAGS`` once, when its
    backend starts); later calls change nothing in this process.

    Returns:
        The flags added.

    Example:
        >>> env = {"XLA_FLAGS": "--xla_cpu_parallel_codegen_split_count=4"}
        >>> add_xla_flags(SERIAL_CODEGEN, environ=env)  # the user's setting wins
        ()
        >>> env["XLA_FLAGS"]
        '--xla_cpu_parallel_codegen_split_count=4'
    """
    if not jaxlib_is_tested():
        return ()
    current = environ.get("XLA_FLAGS", "")
    added = tuple(f for f in flags if f.split("=", 1)[0].lstrip("-") not in current)
    if added:
        environ["XLA_FLAGS"] = " ".join([current, *added]).strip()
    return added


def use_classic_cpu_emitters(environ=os.environ) -> bool:
    """Add :data:`FLAG` to ``XLA_FLAGS`` unless the user set it or jaxlib is untested.

    Returns:
        True when the flag was added.

    Example:
        >>> env = {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=true"}
        >>> use_classic_cpu_emitters(env), env["XLA_FLAGS"]  # the user's setting wins
        (False, '--xla_cpu_use_fusion_emitters=true')
    """
    return bool(add_xla_flags(FLAG, environ=environ))


def compiler_options(*flags: str, environ=os.environ) -> dict[str, bool | int | str]:
    """``flags`` (``--name=value``) as one compilation's XLA options (``jax.jit``'s
    ``compiler_options``), each unless ``XLA_FLAGS`` names it (the user's choice wins).

    Unlike :func:`add_xla_flags` this changes one program, not the process, and works after JAX
    has started. Nothing is returned for a jaxlib outside :data:`TESTED_JAXLIB` (an option it does
    not know would fail the compilation).

    Example:
        >>> options = compiler_options(FLAG, environ={})
        >>> options == ({"xla_cpu_use_fusion_emitters": False} if jaxlib_is_tested() else {})
        True
        >>> compiler_options(FLAG, environ={"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=true"})
        {}
    """
    if not jaxlib_is_tested():
        return {}
    current = environ.get("XLA_FLAGS", "")
    out: dict[str, bool | int | str] = {}
    for flag in flags:
        name, _, value = flag.lstrip("-").partition("=")
        if name in current:
            continue
        if value.lower() in ("true", "false"):
            out[name] = value.lower() == "true"
        elif value.lstrip("-").isdigit():
            out[name] = int(value)
        else:
            out[name] = value
    return out
