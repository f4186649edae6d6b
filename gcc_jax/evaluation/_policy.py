"""How the mask evaluator runs on one backend: chunk sizes, XLA options, precomputation.

A code says what it computes; how to run it fast on a CPU, a GPU or a TPU is the caller's
choice. :class:`BackendPolicy` holds that choice for one platform and :func:`policy_for` looks
it up by ``jax.Device.platform``. :class:`gcc_jax.MaskEvaluator` consults it for every call of
the default per-pattern loss: whether to ask the code for its
:meth:`~gcc_jax.AbstractCode.decode_init` state, how many masks a chunk holds, and which XLA
options compile the block. The policy decides from device-neutral facts the code exposes (the
type of its ``decode_init`` state, its number of workers and output size), never from the
code's class; none of it changes a value.

An accelerator's entry is sized by the memory of the devices it runs on: its chunk and block
budgets are a share of ``Device.memory_stats()["bytes_limit"]`` (:func:`device_policy`), or of
:data:`ASSUMED_MEMORY` where a device does not report it. Masks that are already JAX arrays stay
on the devices there (each block is sliced and padded where the masks live); the CPU reads the
batch onto the host once, where slicing is free.

A platform without an entry gets :data:`DEFAULT`. Adding a backend is one entry in
:data:`POLICIES`.
"""

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax

from .._core.checks import as_int
from .._core.xla_flags import FLAG as CLASSIC_EMITTERS
from .._core.xla_flags import compiler_options
from ..spline import DowndatePlan

__all__ = [
    "ACCELERATOR",
    "ACCELERATOR_SHARE",
    "ASSUMED_MEMORY",
    "DEFAULT",
    "POLICIES",
    "BackendPolicy",
    "DeviceLike",
    "auto_chunk_size",
    "device_memory",
    "device_policy",
    "policy_for",
]


@runtime_checkable
class DeviceLike(Protocol):
    """What a policy reads of a device (a ``jax.Device`` has both)."""

    platform: str

    def memory_stats(self) -> dict[str, Any] | None: ...


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
        max_groups: most chunks per block (one compiled call, ``lax.map`` over its chunks).
        block_bytes: memory budget of one block's masks on a device (``groups × chunk × N``
            booleans, see :meth:`groups`); ``None``: no bound beyond ``max_groups``.
        memory_share: when set, ``chunk_bytes`` and ``block_bytes`` are this share of the
            device's memory once it is known (:meth:`for_memory`); the values given are those
            for :data:`ASSUMED_MEMORY`.
        host_masks: read a batch of masks onto the host once and place each block from there
            (``False``: masks that are JAX arrays stay where they are; only each block's first
            row comes to the host, for the code's ``decode_init`` state).
    """

    max_chunk: int = 256
    chunk_bytes: int = 512 << 20
    precompute: bool = True
    downdate_chunk: int | None = None
    downdate_flags: tuple[str, ...] = ()
    max_groups: int = 64
    block_bytes: int | None = None
    memory_share: float | None = None
    host_masks: bool = True

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

    def groups(self, num_chunks: int, chunk_masks: int, num_workers: int) -> int:
        """Chunks per block for ``num_chunks`` chunks of ``chunk_masks`` masks (per device) over
        ``num_workers`` workers: the smallest power of two ``≥ num_chunks`` (so batches of
        nearby sizes share a compiled shape), at most ``max_groups``, and at most the largest
        power of two whose block of masks fits ``block_bytes``.

        Example:
            >>> import gcc_jax as gcc
            >>> cpu = gcc.evaluation.policy_for("cpu")
            >>> cpu.groups(3, 256, 100), cpu.groups(1000, 256, 100)
            (4, 64)
        """
        groups = min(self.max_groups, 1 << max(num_chunks - 1, 0).bit_length())
        if self.block_bytes is not None:
            fit = max(1, self.block_bytes // max(1, chunk_masks * num_workers))
            groups = min(groups, 1 << (fit.bit_length() - 1))
        return int(max(groups, 1))

    def for_memory(self, memory: int | None) -> "BackendPolicy":
        """This policy for devices of ``memory`` bytes each: with a ``memory_share``,
        ``chunk_bytes`` and ``block_bytes`` become that share of ``memory`` (of
        :data:`ASSUMED_MEMORY` when ``memory`` is ``None``); without one, unchanged.

        Example:
            >>> import gcc_jax as gcc
            >>> gpu = gcc.evaluation.policy_for("gpu")
            >>> gpu.for_memory(64 << 30).chunk_bytes == (64 << 30) * gpu.memory_share
            True
            >>> gcc.evaluation.policy_for("cpu").for_memory(1 << 30).chunk_bytes == 512 << 20
            True
        """
        if self.memory_share is None:
            return self
        budget = int((ASSUMED_MEMORY if memory is None else memory) * self.memory_share)
        budget = max(budget, 1)
        return self._replace(chunk_bytes=budget, block_bytes=budget)

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

#: device memory assumed for an accelerator that does not report ``bytes_limit`` in
#: ``Device.memory_stats()`` (the smallest current GPUs and TPU cores hold at least this much)
ASSUMED_MEMORY = 16 << 30

#: an accelerator's share of its device's memory for one chunk's decoder arrays and for one
#: block's masks; the rest stays free for the code, the outputs and XLA's own buffers
ACCELERATOR_SHARE = 1 / 16

#: GPUs and TPUs: chunks of up to 65,536 masks (a chunk is one ``vmap``, so a wide one keeps the
#: device busy where the CPU's 256 leaves it waiting on each step's dispatch), bounded by
#: :data:`ACCELERATOR_SHARE` of the device's memory for large ``N`` and ``m``; the downdate's
#: state is precomputed and its chunks are as wide as any other's; device-resident masks stay
#: on the device. Throughput against the chunk size: ``bench/monte_carlo.py``, figures in
#: ``bench/README.md``.
ACCELERATOR = BackendPolicy(
    max_chunk=1 << 16,
    memory_share=ACCELERATOR_SHARE,
    host_masks=False,
).for_memory(None)

#: by ``jax.Device.platform``. The CPU: 64-mask chunks and XLA's classic CPU emitters where the
#: downdate decodes (both faster there, and the classic emitters compile faster with less
#: memory; ``bench/monte_carlo.py``, figures in ``bench/README.md``). NVIDIA GPUs report
#: ``"gpu"`` (``"cuda"`` names the plugin), AMD GPUs ``"gpu"`` or ``"rocm"``, TPUs ``"tpu"``.
POLICIES: dict[str, BackendPolicy] = {
    "cpu": BackendPolicy(downdate_chunk=64, downdate_flags=(CLASSIC_EMITTERS,)),
    "gpu": ACCELERATOR,
    "cuda": ACCELERATOR,
    "rocm": ACCELERATOR,
    "tpu": ACCELERATOR,
}


def policy_for(platform: str | None = None, *, memory: int | None = None) -> BackendPolicy:
    """The policy for ``platform`` (``"cpu"``, ``"gpu"``, ``"cuda"``, ``"tpu"``, …; default
    JAX's default backend) on devices of ``memory`` bytes each (default: unknown, see
    :meth:`BackendPolicy.for_memory`): its :data:`POLICIES` entry, else :data:`DEFAULT`.

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.evaluation.policy_for("cpu").downdate_chunk
        64
        >>> gcc.evaluation.policy_for("no-such-backend") == gcc.evaluation.BackendPolicy()
        True
        >>> gcc.evaluation.policy_for("cuda").chunk_size(100, 10)
        65536
    """
    if platform is None:
        platform = jax.default_backend()
    return POLICIES.get(platform, DEFAULT).for_memory(memory)


def device_memory(device: DeviceLike) -> int | None:
    """The bytes ``device`` lets JAX allocate (``memory_stats()["bytes_limit"]``), or ``None``
    where the device does not say (the CPU, some plugins).

    Example:
        >>> import jax, gcc_jax as gcc
        >>> memory = gcc.evaluation.device_memory(jax.devices()[0])
        >>> memory is None or memory > 0
        True
    """
    try:
        stats = device.memory_stats()
    except Exception:  # plugins raise their own "not implemented" errors
        return None
    limit = stats.get("bytes_limit") if isinstance(stats, dict) else None
    return int(limit) if isinstance(limit, int) and limit > 0 else None


def device_policy(devices: Sequence[DeviceLike] | None = None) -> BackendPolicy:
    """The policy for ``devices`` (default: all devices of JAX's default backend): that of
    their platform (the first device's), sized by the smallest memory among them
    (:func:`device_memory`; unknown if any does not report it). What
    :class:`gcc_jax.MaskEvaluator` runs with.

    Example:
        >>> import jax, gcc_jax as gcc
        >>> devices = jax.devices()
        >>> memory = gcc.evaluation.device_memory(devices[0])
        >>> policy = gcc.evaluation.policy_for(devices[0].platform, memory=memory)
        >>> gcc.evaluation.device_policy(devices) == policy
        True
    """
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("`devices` must name at least one device")
    memories = [device_memory(d) for d in devices]
    memory = None if None in memories else min(memories)
    return policy_for(devices[0].platform, memory=memory)


def auto_chunk_size(
    num_workers: int,
    out_size: int,
    platform: str | None = None,
    *,
    devices: Sequence[DeviceLike] | None = None,
) -> int:
    """Masks per chunk (and device) for ``num_workers`` workers and ``out_size`` outputs:
    :meth:`BackendPolicy.chunk_size` of :func:`policy_for` ``(platform)`` when a platform is
    named, else of :func:`device_policy` ``(devices)`` (default JAX's default backend's
    devices: the chunk :class:`gcc_jax.MaskEvaluator` cuts there when the code has no
    ``decode_init`` state).

    On the CPU a power of two in ``[1, 256]``, smaller only when a chunk's grid arrays would
    exceed 512 MiB (``N ≳ 10⁵``); on a GPU or TPU one in ``[1, 65536]``, smaller only when they
    would exceed :data:`ACCELERATOR_SHARE` of the device's memory.

    Example:
        >>> import gcc_jax as gcc
        >>> gcc.auto_chunk_size(100, 10, platform="cpu")
        256
        >>> gcc.auto_chunk_size(100, 10, platform="tpu")
        65536
    """
    if platform is not None:
        return policy_for(platform).chunk_size(num_workers, out_size)
    return device_policy(devices).chunk_size(num_workers, out_size)
