"""XLA compiler settings of the ``gcc-jax`` command line (set before JAX starts its backend).

XLA's CPU backend generates each fusion's code with its MLIR fusion emitters by default. On
this library's graphs (decoders differentiated through the encoder and the worker function,
vmapped λ rules) they cost far more compilation than the classic LLVM emitters without faster
code: measured with jaxlib 0.10.2 on 2 cores, compiling ``gcc-jax tune``'s LeNet-5 training
step took 15.4 s of CPU time and 0.75 GB of temporaries with them, 6.6 s and 0.18 GB without;
``gcc-jax tune --toy`` went from 62 s to 35 s of CPU time and from 1.17 GB to 0.73 GB peak
memory, its results equal to 2e-11 (rounding). The experiments are compilation-bound, so the
command line turns them off (``--xla_cpu_use_fusion_emitters=false``).

An unknown flag in ``XLA_FLAGS`` aborts the process, so the flag is added only for the jaxlib
versions it was measured with, and never when ``XLA_FLAGS`` already mentions it (the user's
choice wins).
"""

import os

__all__ = ["FLAG", "TESTED_JAXLIB", "use_classic_cpu_emitters"]

FLAG = "--xla_cpu_use_fusion_emitters=false"
#: jaxlib versions (major, minor) the flag was measured with
TESTED_JAXLIB = ((0, 10),)


def use_classic_cpu_emitters(environ=os.environ) -> bool:
    """Add :data:`FLAG` to ``XLA_FLAGS`` unless the user set it or jaxlib is untested.

    Call before the first JAX computation (XLA reads ``XLA_FLAGS`` once, when its backend
    starts); later calls change nothing in this process.

    Returns:
        True when the flag was added.

    Example:
        >>> env = {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=true"}
        >>> use_classic_cpu_emitters(env), env["XLA_FLAGS"]  # the user's setting wins
        (False, '--xla_cpu_use_fusion_emitters=true')
    """
    import jaxlib

    current = environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" in current:
        return False
    try:
        major, minor = (int(v) for v in jaxlib.__version__.split(".")[:2])
    except ValueError:
        return False
    if (major, minor) not in TESTED_JAXLIB:
        return False
    environ["XLA_FLAGS"] = f"{current} {FLAG}".strip()
    return True
