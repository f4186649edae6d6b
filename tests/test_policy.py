"""The evaluator's per-backend policy (evaluation/_policy.py): the accelerator entries sized by
the devices' memory (fake devices here), the CPU entry unchanged, and MaskEvaluator reading the
policy of its devices' platform and keeping device-resident masks on the device."""

import math

import jax
import numpy as np
import pytest

import gcc_jax as gcc

policy_module = gcc.evaluation._policy
ACCELERATORS = ("gpu", "cuda", "rocm", "tpu")
H200_LIMIT = 105_000_000_000  # about 75 % of an H200's 141 GB, JAX's default allocator limit


class FakeDevice:
    """What the policy reads of a ``jax.Device``: its platform and its memory statistics."""

    def __init__(self, platform, stats=None, error=None):
        self.platform, self._stats, self._error = platform, stats, error

    def memory_stats(self):
        if self._error is not None:
            raise self._error
        return self._stats


def _per_mask(n, m):
    """The policy's bytes per mask of a chunk (BackendPolicy.chunk_size's docstring)."""
    return 16 * n + 16 * (4 * m + 13) * (math.isqrt(n) + 1)


@pytest.mark.parametrize("platform", ACCELERATORS)
def test_accelerator_chunks_are_wide_and_bounded_by_the_devices_memory(platform):
    """N = 100, m = 10 on an H200: 65,536 masks a chunk; for large N and m the chunk's arrays
    stay within the policy's share of the device's memory (a power of two, at least 1)."""
    policy = gcc.evaluation.policy_for(platform, memory=H200_LIMIT)
    share = policy_module.ACCELERATOR_SHARE
    assert policy.chunk_size(100, 10) == 65536
    assert policy.chunk_bytes == policy.block_bytes == int(H200_LIMIT * share)
    assert not policy.host_masks and policy.precompute
    for n, m in [(100, 10), (1000, 10), (10**5, 10), (10**6, 100), (10**7, 10), (100, 10**5)]:
        chunk = policy.chunk_size(n, m)
        assert chunk & (chunk - 1) == 0 and 1 <= chunk <= 65536
        assert chunk == 1 or chunk * _per_mask(n, m) <= H200_LIMIT * share
        assert chunk == 65536 or 2 * chunk * _per_mask(n, m) > H200_LIMIT * share
    # less memory, narrower chunks; unknown memory: the documented assumption
    small = gcc.evaluation.policy_for(platform, memory=1 << 30)
    assert small.chunk_size(10**5, 10) < policy.chunk_size(10**5, 10)
    assumed = gcc.evaluation.policy_for(platform)
    assert assumed == gcc.evaluation.policy_for(platform, memory=policy_module.ASSUMED_MEMORY)
    assert assumed.chunk_size(100, 10) == 65536
    assert gcc.auto_chunk_size(100, 10, platform=platform) == 65536
    # a downdate plan does not narrow an accelerator's chunk (no downdate_chunk)
    code = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=100)
    plan = code.decode_init(np.arange(100)[None, :] >= 10)
    assert isinstance(plan, gcc.spline.DowndatePlan)
    assert policy.chunk_size(100, 10, plan) == 65536 and policy.compiler_options(plan) == {}


def test_cpu_and_unknown_entries_do_not_depend_on_memory():
    """The CPU entry is today's (256-mask chunks, 64 for a downdate plan, up to 64 chunks a
    block, masks through the host) whatever memory the devices report."""
    cpu = gcc.evaluation.policy_for("cpu")
    assert gcc.evaluation.policy_for("cpu", memory=1 << 40) == cpu
    assert gcc.evaluation.policy_for("cpu", memory=1 << 20) == cpu
    assert (cpu.max_chunk, cpu.chunk_bytes, cpu.downdate_chunk) == (256, 512 << 20, 64)
    assert cpu.host_masks and cpu.block_bytes is None and cpu.max_groups == 64
    other = gcc.evaluation.policy_for("no-such-backend", memory=1 << 40)
    assert other == gcc.evaluation.BackendPolicy()
    # groups: the smallest power of two covering the chunks, at most 64 (as before the policy
    # held it)
    for num_chunks in range(0, 300):
        old = min(64, 1 << max(num_chunks - 1, 0).bit_length())
        assert cpu.groups(num_chunks, 256, 10**6) == old


def test_groups_are_bounded_by_the_blocks_memory():
    """An accelerator's block holds at most its share of memory in masks: a power of two of
    chunks, at least one."""
    gpu = gcc.evaluation.policy_for("gpu", memory=1 << 30)  # 64 MiB of masks a block
    budget = gpu.block_bytes
    assert gpu.groups(16, 65536, 100) == 8  # 6.5 MB a chunk
    assert gpu.groups(3, 65536, 100) == 4
    for chunk, n in [(65536, 100), (1024, 10**5), (256, 10**6), (65536, 10**4)]:
        groups = gpu.groups(10**6, chunk, n)
        assert groups & (groups - 1) == 0 and 1 <= groups <= 64
        assert groups == 1 or groups * chunk * n <= budget


def test_device_memory_reads_bytes_limit_where_a_device_reports_it():
    """``bytes_limit`` of ``memory_stats()``; ``None`` where there are no statistics, no limit,
    or the call is not implemented."""
    memory = gcc.evaluation.device_memory
    assert memory(FakeDevice("gpu", {"bytes_limit": 8 << 30, "bytes_in_use": 1})) == 8 << 30
    assert memory(FakeDevice("gpu", {"bytes_in_use": 1})) is None
    assert memory(FakeDevice("gpu", {"bytes_limit": 0})) is None
    assert memory(FakeDevice("cpu", None)) is None
    assert memory(FakeDevice("tpu", error=NotImplementedError("no stats"))) is None
    assert memory(FakeDevice("gpu", error=RuntimeError("UNIMPLEMENTED"))) is None


def test_device_policy_follows_the_platform_and_the_smallest_memory():
    """The first device's platform; the smallest memory among the devices, or the assumed
    one as soon as one device does not report it."""
    big, small = 80 << 30, 16 << 30
    gpus = [FakeDevice("gpu", {"bytes_limit": big}), FakeDevice("gpu", {"bytes_limit": small})]
    share = policy_module.ACCELERATOR_SHARE
    assert gcc.evaluation.device_policy(gpus).chunk_bytes == int(small * share)
    assert gcc.evaluation.device_policy(gpus[:1]).chunk_bytes == int(big * share)
    unknown = [gpus[0], FakeDevice("gpu", None)]
    assert gcc.evaluation.device_policy(unknown) == gcc.evaluation.policy_for("gpu")
    tpu = [FakeDevice("tpu", {"bytes_limit": big})]
    assert gcc.evaluation.device_policy(tpu) == gcc.evaluation.policy_for("tpu", memory=big)
    cpu = [FakeDevice("cpu", None)]
    assert gcc.evaluation.device_policy(cpu) == gcc.evaluation.policy_for("cpu")
    assert gcc.auto_chunk_size(10**5, 10, devices=gpus) == (
        gcc.evaluation.policy_for("gpu", memory=small).chunk_size(10**5, 10)
    )
    with pytest.raises(ValueError, match="devices"):
        gcc.evaluation.device_policy([])


def _setup(n=64, k=6):
    code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=n, lam_dec=1e-6)
    x = jax.numpy.asarray(np.random.default_rng(0).uniform(-2, 2, size=(k, 3)))
    return code, code.worker_outputs(jax.numpy.sin, x), jax.numpy.sin(x)


@pytest.mark.cpu_only("patches the CPU entry of the policy table: the suite's devices are CPUs")
def test_evaluator_reads_the_policy_of_its_devices(monkeypatch):
    """MaskEvaluator runs with device_policy(its devices): the entry of their platform, sized
    by the memory they report."""
    code, yt, fx = _setup()
    cpu = jax.devices("cpu")
    assert gcc.MaskEvaluator(code, yt, fx, devices=cpu).policy == gcc.evaluation.policy_for("cpu")
    monkeypatch.setitem(policy_module.POLICIES, "cpu", policy_module.ACCELERATOR)
    monkeypatch.setattr(policy_module, "device_memory", lambda device: 2 << 30)
    ev = gcc.MaskEvaluator(code, yt, fx, devices=cpu)
    assert ev.policy == gcc.evaluation.policy_for("gpu", memory=2 << 30)
    assert ev.policy.chunk_bytes == int((2 << 30) * policy_module.ACCELERATOR_SHARE)
    assert ev.chunk == ev.policy.chunk_size(64, 3)


@pytest.mark.cpu_only("patches the CPU entry of the policy table: the suite's devices are CPUs")
@pytest.mark.parametrize("host_masks", [True, False])
def test_device_resident_masks_stay_on_the_device_unless_the_policy_reads_them(
    monkeypatch, host_masks
):
    """With ``host_masks=False`` a batch of JAX masks is sliced and padded on its device (every
    block placed is a JAX array) and only each block's first row reaches decode_init; with the
    CPU's ``True`` the blocks come from one host copy. The values are the same either way, and
    those of NumPy masks."""
    code, yt, fx = _setup()
    cpu = policy_module.POLICIES["cpu"]
    # 8-mask chunks, 2 chunks a block: 100 masks make 7 blocks, the last one padded
    policy = cpu._replace(host_masks=host_masks, downdate_chunk=8, block_bytes=2 * 8 * 64)
    monkeypatch.setitem(policy_module.POLICIES, "cpu", policy)
    stragglers = [6] * 40 + [9] * 60  # two straggler counts: blocks of each
    keys = jax.random.split(jax.random.key(1), 2)
    masks = jax.numpy.concatenate(
        [
            gcc.sample_masks(keys[0], 64, num=40, stragglers=6),
            gcc.sample_masks(keys[1], 64, num=60, stragglers=9),
        ]
    )
    ref, ref_status = gcc.MaskEvaluator(code, yt, fx)(np.asarray(masks))

    rows = []
    decode_init = gcc.SplineCode.decode_init

    def spy_init(self, first):
        rows.append(np.array(first))
        return decode_init(self, first)

    monkeypatch.setattr(gcc.SplineCode, "decode_init", spy_init)
    ev = gcc.MaskEvaluator(code, yt, fx, devices=jax.devices("cpu")[:1])
    placed = []
    place = ev._place_masks
    ev._place_masks = lambda block: placed.append(type(block)) or place(block)
    loss, status = ev(masks)

    assert len(placed) == 7
    expected = np.ndarray if host_masks else jax.Array
    assert all(issubclass(kind, expected) for kind in placed), placed
    assert all(row.shape == (1, 64) for row in rows)
    # each block's state is made from that block's first mask (its straggler count)
    starts = range(0, 100, 16)
    assert [int((~row).sum()) for row in rows[-7:]] == [stragglers[s] for s in starts]
    assert not status.any() and not ref_status.any()
    np.testing.assert_allclose(loss, ref, rtol=1e-12, atol=1e-15)
    single = np.asarray(masks)[[0, 50]]
    for mask, got in zip(single, loss[[0, 50]], strict=True):
        dec = code.decode_with_status(yt, mask)
        np.testing.assert_allclose(got, np.sum((dec.value - fx) ** 2) / fx.shape[0], rtol=1e-9)
