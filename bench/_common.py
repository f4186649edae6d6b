"""What the Monte Carlo benchmarks share: the timer, the worker function, the peers, the floor.

Imported by ``bench/monte_carlo.py`` and ``bench/sweep.py`` (run as scripts, so this folder is on
``sys.path``). Imports JAX lazily: ``sweep.py`` sets its x64 flag and platform inside each
subprocess before JAX is first imported.
"""

import datetime
import os
import platform
import time

import numpy as np
from scipy.interpolate import make_smoothing_spline


def best_of(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock and best CPU (process, all threads) seconds of ``repeat`` calls.

    On the shared, loaded machine wall time mostly measures the other users; CPU time is the
    work this process did (all its threads), so the CPU-time ratios are the steadier ones.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def worker_function(m: int):
    """The benchmarks' worker ``f``: a smooth map ``R^d -> R^m`` in the input's dtype,
    ``f(v)_j = sin(j mean(v)) + 0.1 cos(j v_0)``, ``j = 1..m``."""
    import jax.numpy as jnp

    def f(v):
        freq = jnp.arange(1, m + 1, dtype=v.dtype)
        return jnp.sin(freq * jnp.mean(v)) + 0.1 * jnp.cos(freq * v[0])

    return f


def scipy_peer(beta, alpha, yt, masks, lam):
    """The SciPy peer: ``make_smoothing_spline`` on each mask's live workers, at ``alpha``."""
    out = np.empty((masks.shape[0], alpha.size, yt.shape[1]))
    for i, m in enumerate(masks):
        out[i] = make_smoothing_spline(beta[m], yt[m], lam=m.sum() * lam, axis=0)(alpha)
    return out


def csaps_peer(beta, alpha, yt, masks, lam):
    """The csaps peer (``bench`` extra; ImportError without it): the same loop and objective,
    ``smooth = 1/(1 + λ')``."""
    from csaps import CubicSmoothingSpline

    out = np.empty((masks.shape[0], alpha.size, yt.shape[1]))
    for i, m in enumerate(masks):
        smooth = 1.0 / (1.0 + m.sum() * lam)
        out[i] = CubicSmoothingSpline(beta[m], yt[m], smooth=smooth, axis=0)(alpha)
    return out


def best_of_rounds(fns: dict, repeat: int, rounds: int = 3) -> dict:
    """:func:`best_of` of each function, in ``rounds`` rounds of ``repeat`` calls each (``a`` ×
    repeat, ``b`` × repeat, …, then again): this machine's speed drifts by 10–25% within
    minutes, so each function's best comes from the same stretch of time as the others'.
    Within a round each function runs back to back, warm, as a loop of it would. (Calling them
    in strict turn instead made the float32 floor 1.7x slower: a call after another
    function's starts from a cold state.) ``{name: (wall, cpu)}``, the best over all rounds."""
    best = {name: (float("inf"), float("inf")) for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            wall, cpu = best_of(fn, repeat)
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def floor_call(yt, num_inputs: int, num_masks: int):
    """The matmul floor: random ``K × N`` decoder matrices applied to the outputs ``yt`` in one
    batched ``einsum('pkn,nm->pkm')`` (``yt``'s dtype), on a memory-capped subset of masks.

    Returns the number of masks and a function running one call to completion (compiled).
    """
    import jax
    import jax.numpy as jnp

    n = yt.shape[0]
    num = int(max(1, min(num_masks, 2e7 // (num_inputs * n))))
    dmat = jax.random.normal(jax.random.key(1), (num, num_inputs, n), yt.dtype)
    mm = jax.jit(lambda d: jnp.einsum("pkn,nm->pkm", d, yt))
    jax.block_until_ready(mm(dmat))
    return num, lambda: jax.block_until_ready(mm(dmat))


def floor(yt, num_inputs: int, num_masks: int, repeat: int) -> tuple[int, float, float]:
    """:func:`floor_call` timed on its own: the number of masks timed and the best wall and CPU
    seconds (:func:`best_of`)."""
    num, call = floor_call(yt, num_inputs, num_masks)
    return num, *best_of(call, repeat)


def use_cpu_devices(count: int | None) -> None:
    """Split the CPU into ``count`` JAX devices (``jax_num_cpu_devices``); call before JAX starts.

    ``gcc_jax.monte_carlo_loss`` shards its mask batch over every device of the default backend,
    so with one CPU device per core each core decodes its own share of every chunk. With JAX's
    default (one CPU device for all cores) XLA runs each chunk's small operations on a thread
    pool, and on 2 cores that was measured slower than one pinned core (``bench/README.md``).
    ``None`` or 1 leaves JAX's default.
    """
    if count is not None and count < 1:
        raise SystemExit(f"--cpu-devices must be at least 1; got {count}")
    if count is not None and count > 1:
        import jax

        jax.config.update("jax_num_cpu_devices", count)


def platform_name(device: str | None) -> str | None:
    """The JAX platform for a ``--device`` value: ``gpu`` is the GPU platform this JAX has a
    plugin installed for (``cuda``, else ``rocm``); any other value is passed on as it is.

    JAX takes ``gpu`` in ``jax_platforms`` to mean every GPU platform, and fails unless all of
    them start (jax 0.11 on an NVIDIA machine: "Unable to initialize backend 'rocm'").
    """
    if device is None or device.strip().lower() != "gpu":
        return device
    from importlib import metadata

    names = {(d.metadata["Name"] or "").lower().replace("_", "-") for d in metadata.distributions()}
    if any(n.startswith("jax-rocm") for n in names) and not any(
        n.startswith("jax-cuda") for n in names
    ):
        return "rocm"
    return "cuda"


def use_device(device: str | None) -> str | None:
    """Run JAX on the platform of ``--device`` (:func:`platform_name`; ``None``: JAX's default);
    call before JAX starts. Returns the platform name."""
    platform_ = platform_name(device)
    if platform_:
        import jax

        jax.config.update("jax_platforms", platform_)
    return platform_


def environment(device: str | None = None) -> dict:
    """Versions, device (default: this process's first JAX device), device count, machine and
    date for a results JSON."""
    import jax

    return dict(
        jax_version=jax.__version__,
        device=str(jax.devices()[0]) if device is None else device,
        num_devices=jax.device_count(),
        platform=platform.platform(),
        cpus=os.cpu_count(),
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
