"""How the mask evaluator runs on one backend: chunk sizes, XLA options, precomputation.

A code says what it computes; how to run it fast on a CPU, a GPU or a TPU is the caller's
choice. :class:`BackendPolicy` holds that choice for one platform and :func:`policy_for` looks
it up by ``jax.Device.platform``. :class:`gcc_jax.MaskEvaluator` consults it for every call of
the default per-pattern loss: whether to ask the code for its
:meth:`~gcc_jax.AbstractCode.decode_init` state, how many masks a chunk holds, and which XLA
options compile the block. The policy decides from device-neutral facts the code exposes (the
type of its ``decode_init`` state, its number of workers and output size), never from the
code's class; none of it changes a value.

A platform without an entry gets :data:`DEFAULT`. Adding a backend is one entry in
:data:`POLICIES`.
"""

import math
from typing import Any, NamedTuple

import jax

from .._core.checks import as_int
from ..spline import DowndatePlan
from .._core.xla_flags import FLAG as CLASSIC_EMITTERS
from .._core.xla_flags import compiler_options

__all__ = ["DEFAULT", "POLICIES", "BackendPolicy", "auto_chunk_size", "policy_for"]


class BackendPolicy(NamedTuple):
    """The mask evaluator's settings for one backend.

    Attributes:
        max_chunk: most masks per chunk (and device) when the caller leaves the chunk size to
            the evaluator.
        chunk_bytes: memory budget of one chunk's per-mask grid arrays (see
            :meth:`chunk_size`).
        precompute: whether to ask the code for its ``decode_init`` state once per call and
            straggler count (the state never changes values; skipping it moves that work into
            every compiled block).
        downdate_chunk: masks per chunk when the state is a
            :class:`gcc_jax.spline.DowndatePlan` (each mask's work is small on the downdate,
            and a narrow chunk keeps it in cache); ``None``: as any other state.
        downdate_flags: XLA flags (``--name=value``) compiling the blocks whose state is a
            :class:`gcc_jax.spline.DowndatePlan`; ``XLA_FLAGS`` naming one wins.
    """

    max_chunk: int = 256
    chunk_bytes: int = 512 << 20
    precompute: bool = True
    downdate_chunk: int | None = None
    downdate_flags: tuple[str, ...] = ()

    def chunk_size(self, num_workers: int, out_size: int, state: Any = None) -> int:
        """Masks per chunk: a power of two in ``[1, max_chunk]``, then at most
        ``downdate_chunk`` when ``state`` is a downdate plan.

        The batch-native O(N) decoder (masks as the vectorised axis) keeps per mask a few arrays
        over the merged grid (about ``16 N`` bytes; the masks themselves stay booleans) and,
        beyond 4 MiB of per-step quantities, checkpoints its state every ``√N`` steps
        (``~ 16 (4m + 13) √N`` bytes). Wider chunks amortise the per-step loop overhead, so the
        chunk is ``max_chunk`` unless that would exceed ``chunk_bytes``.

        Example:
            >>> import gcc_jax as gcc
            >>> cpu = gcc.evaluation.policy_for("cpu")
            >>> cpu.chunk_size(100, 10), cpu.chunk_size(10**6, 10)
            (256, 16)
        """
        num_workers = as_int(num_workers, "num_workers", 1)
        out_size = as_int(out_size, "out_size", 1)
        per_mask = 16 * num_workers + 16 * (4 * out_size + 13) * (math.isqrt(num_workers) + 1)
        chunk = max(1, min(self.chunk_bytes // per_mask, self.max_chunk))
        chunk = 1 << (chunk.bit_length() - 1)
        if self.downdate_chunk is not None and isinstance(state, DowndatePlan):
            chunk = min(chunk, self.downdate_chunk)
        return int(chunk)

    def compiler_options(self, state: Any = None) -> dict[str, Any]:
        """XLA options for a block decoded with ``state`` (``jax.jit``'s ``compiler_options``).

        Example:
            >>> import gcc_jax as gcc
            >>> gcc.evaluation.policy_for("cpu").compiler_options(None)
            {}
        """
        if self.downdate_flags and isinstance(state, DowndatePlan):
            return compiler_options(*self.downdate_flags)
        return {}


#: any platform without its own entry
DEFAULT = BackendPolicy()

#: by ``jax.Device.platform``. The CPU: 64-mask chunks and XLA's classic CPU emitters where the
#: downdate decodes (both faster there, and the classic emitters compile faster with less
#: memory; ``bench/monte_carlo.py``, figures in ``bench/README.md``).
POLICIES: dict[str, BackendPolicy] = {
    "cpu": BackendPolicy(downdate_chunk=64, downdate_flags=(CLASSIC_EMITTERS,)),
}


def policy_for(platform: str | None = None) -> BackendPolicy:
    """The policy for ``platform`` (``"cpu"``, ``"gpu"``, ``"cuda"``, ``"tpu"``, …; default
    JAX's default backend): its :data:`POLICIES` entry, else :data:`DEFAULT`.

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.evaluation.policy_for("cpu").downdate_chunk
        64
        >>> gcc.evaluation.policy_for("no-such-backend") == gcc.evaluation.BackendPolicy()
        True
    """
    if platform is None:
        platform = jax.default_backend()
    return POLICIES.get(platform, DEFAULT)


def auto_chunk_size(num_workers: int, out_size: int, platform: str | None = None) -> int:
    """Masks per chunk for ``num_workers`` workers and ``out_size`` outputs on ``platform``
    (default JAX's default backend): :meth:`BackendPolicy.chunk_size` of :func:`policy_for`.

    On the CPU a power of two in ``[1, 256]``, smaller only when a chunk's grid arrays would
    exceed 512 MiB (``N ≳ 10⁵``).

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.auto_chunk_size(100, 10, platform="cpu")
        256
    """
    return policy_for(platform).chunk_size(num_workers, out_size)
