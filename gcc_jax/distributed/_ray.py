"""`RayExecutor`: ``N`` Ray actors each holding the worker model; the master decodes after
``ray.wait(num_returns=N − S, timeout=...)``.

Ray is the optional extra ``gcc_jax[ray]``; it is imported only when used.
"""

import asyncio
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._core.checks import as_int, as_real
from ._delays import DelayModel, Fault, check_faults, faults_for_round, garbage_like
from ._executor import Executor, Outcome, RoundCounter, RoundRecord, RoundResult, RoundSpec
from ._local import as_worker_fns, check_delays

__all__ = ["RayExecutor", "init_local_ray"]

_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def _import_ray():
    try:
        import ray
    except ImportError as err:  # pragma: no cover - ray is installed by `make test`
        raise ImportError(
            "the Ray backend needs the optional dependency ray: pip install 'gcc_jax[ray]'"
        ) from err
    return ray


def init_local_ray(num_cpus: int = 2, *, loopback: bool = True, **kwargs) -> dict[str, Any]:
    """Start a local single-node Ray cluster (no dashboard), bound to the loopback interface.

    With ``loopback=True`` the node registers as ``127.0.0.1``, so every Ray service listens on
    the loopback interface only (Ray's single-machine mode, selected by the environment
    variable ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` set before Ray starts). If Ray is already
    running in this process it is reused as is.

    Args:
        num_cpus: CPUs Ray may schedule on (the actors here reserve none; see `RayExecutor`).
        loopback: bind to 127.0.0.1 only.
        **kwargs: passed to ``ray.init``.

    Returns:
        ``{"node_ip": ..., "num_cpus": ..., "started": bool}``.
    """
    if loopback:
        os.environ[_LOOPBACK_ENV] = "0"
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        if loopback:
            # ray reads the variable at import; if it was imported earlier, apply it now.
            from ray._private import ray_constants

            if getattr(ray_constants, "ENABLE_RAY_CLUSTER", False):
                ray_constants.ENABLE_RAY_CLUSTER = False
        opts = dict(include_dashboard=False, log_to_driver=False)
        opts.update(kwargs)
        with warnings.catch_warnings():
            # Ray forks and at once execs its daemons; JAX's fork warning does not apply
            warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
            ray.init(num_cpus=num_cpus, **opts)
        started = True
    node_ip = ray.util.get_node_ip_address()
    if loopback and not node_ip.startswith("127."):
        warnings.warn(
            f"the Ray node is on {node_ip}, not the loopback interface",
            RuntimeWarning,
            stacklevel=2,
        )
    cpus = ray.cluster_resources().get("CPU", 0)
    return {"node_ip": node_ip, "num_cpus": cpus, "started": started}


class _Worker:
    """The body of a worker actor: holds ``f`` jitted, compiled at start-up for one input."""

    def __init__(self, fn_blob, worker_id, input_shape, input_dtype, x64, xla_single_thread):
        t0 = time.perf_counter()
        if xla_single_thread and "xla_cpu_multi_thread_eigen" not in os.environ.get(
            "XLA_FLAGS", ""
        ):
            # read when the backend starts: one thread per actor on a shared machine
            os.environ["XLA_FLAGS"] = (
                os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
            ).strip()
        import jax
        from ray import cloudpickle

        jax.config.update("jax_enable_x64", bool(x64))
        fn = cloudpickle.loads(fn_blob)  # imports what f needs (Flax for the models)
        t1 = time.perf_counter()
        self._f = jax.jit(fn)
        self._shape = tuple(input_shape)
        np.asarray(self._f(np.zeros(self._shape, input_dtype)))  # compile now, not in round 0
        t2 = time.perf_counter()
        import ray

        self._info = dict(
            worker_id=int(worker_id),
            pid=os.getpid(),
            node_id=ray.get_runtime_context().get_node_id(),
            startup_s=t2 - t0,
            load_s=t1 - t0,
            compile_s=t2 - t1,
        )

    def info(self) -> dict:
        return self._info

    async def compute(self, round_id: int, x, delay_s: float, fault: str | None):
        """``f(x)`` after an injected delay, with an injected fault; returns ``(y, t_done)``."""
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        if fault == "hang":
            await asyncio.Event().wait()  # never set; cancelled by the master
        if fault == "crash":
            os._exit(1)
        if fault == "error":
            raise RuntimeError(f"injected error on worker {self._info['worker_id']}")
        y = np.asarray(self._f(x))
        if fault == "nan":
            y = np.full_like(y, np.nan, dtype=float)
        elif fault == "garbage":
            y = garbage_like(y.shape, round_id, self._info["worker_id"])
        elif fault == "malformed":
            y = np.zeros(y.size + 1)
        return y, time.time()


class _ActorPool:
    """The actors, their restarts and a lock; shared by a `RayExecutor` and its views."""

    def __init__(self, fns, input_shape, input_dtype, x64, actor_options, max_restarts, single):
        ray = _import_ray()
        self._ray = ray
        self._cls = ray.remote(_Worker)
        refs: dict[int, Any] = {}
        for f in fns:  # one pickled copy of each distinct function in the object store
            if id(f) not in refs:
                refs[id(f)] = ray.put(ray.cloudpickle.dumps(f))
        self._fn_refs = [refs[id(f)] for f in fns]
        self._args = (tuple(input_shape), np.dtype(input_dtype).str, bool(x64), bool(single))
        opts = dict(num_cpus=0, max_restarts=0, max_concurrency=1000)
        opts.update(actor_options or {})
        self._options = opts
        self.max_restarts = int(max_restarts)
        self._lock = threading.Lock()
        n = len(fns)
        self._actors = [self._spawn(i) for i in range(n)]
        self._generation = [0] * n
        self.restarts = [0] * n
        self._info_refs = [a.info.remote() for a in self._actors]
        self._orphans: dict[Any, tuple[int, int]] = {}  # cancelled late tasks: ref -> (i, gen)
        self._pings: list[tuple[Any, int] | None] = [None] * n  # heartbeat in flight per actor
        self._last_ping = [-np.inf] * n
        self.heartbeat_s = 0.5

    def __len__(self) -> int:
        return len(self._actors)

    def _spawn(self, i: int):
        shape, dtype, x64, single = self._args
        return self._cls.options(**self._options).remote(
            self._fn_refs[i], i, shape, dtype, x64, single
        )

    def wait_ready(self, timeout_s: float) -> list[dict]:
        """Block until every actor has loaded and compiled ``f``; their start-up reports.

        Raises:
            TimeoutError: some actors were not ready within ``timeout_s`` (naming them and
                ``startup_timeout_s``).
            RuntimeError: an actor failed to start (its error attached as the cause).
        """
        ray = self._ray
        refs = list(self._info_refs)
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        if pending:
            slow = [i for i, ref in enumerate(refs) if ref in set(pending)]
            raise TimeoutError(
                f"{len(slow)} of {len(refs)} Ray worker actors (workers {slow[:16]}) were not "
                f"ready within startup_timeout_s={timeout_s:g} s (each loads the worker "
                "function, imports JAX and compiles it; on a busy machine that takes minutes): "
                "raise `startup_timeout_s`, or check that the cluster has room for the actors "
                "(ray.cluster_resources(), `actor_options`)"
            )
        infos = []
        for i, ref in enumerate(refs):
            try:
                infos.append(ray.get(ref))
            except Exception as err:
                raise RuntimeError(
                    f"Ray worker actor {i} failed to start: {type(err).__name__}: "
                    f"{str(err).splitlines()[0] if str(err) else ''}"
                ) from err
        return infos

    def infos(self) -> list[dict | None]:
        """Each actor's start-up report, ``None`` while it is still starting (or failed)."""
        with self._lock:
            refs = list(self._info_refs)
        ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=0)
        ready = set(ready)
        out: list[dict | None] = []
        for ref in refs:
            try:
                out.append(self._ray.get(ref) if ref in ready else None)
            except Exception:
                out.append(None)
        return out

    def get(self, i: int):
        """``(actor or None if out of restarts, generation)``."""
        with self._lock:
            return self._actors[i], self._generation[i]

    def restart(self, i: int, generation: int) -> bool:
        """Replace worker ``i``'s dead actor (once per death); ``False`` if out of restarts."""
        with self._lock:
            if generation != self._generation[i] or self._actors[i] is None:
                return False  # another round restarted it already
            old = self._actors[i]
            try:
                self._ray.kill(old, no_restart=True)
            except Exception:  # already gone
                pass
            self._generation[i] += 1
            if self.restarts[i] >= self.max_restarts:
                self._actors[i] = None
                return False
            self.restarts[i] += 1
            self._actors[i] = self._spawn(i)
            self._info_refs[i] = self._actors[i].info.remote()
            return True

    def adopt(self, orphans: dict[Any, tuple[int, int]]) -> None:
        """Keep the late (cancelled) tasks of a round: how they end tells if an actor died."""
        with self._lock:
            self._orphans.update(orphans)

    def reap(self) -> list[int]:
        """Restart the actors found dead outside the rounds' waits; return their workers.

        A late task is cancelled and never waited for, so an actor that died while late, or
        that no round waits for (``N − S`` answered first), would otherwise stay dead: a
        permanent straggler. Two non-blocking checks (``ray.wait(timeout=0)``) find them: how
        the late tasks ended, and a heartbeat (``info``) sent to each actor at most every
        ``heartbeat_s`` seconds.
        """
        ray = self._ray
        now = time.monotonic()
        with self._lock:
            checks = [(ref, i, gen) for ref, (i, gen) in self._orphans.items()]
            for i, ping in enumerate(self._pings):
                due = now - self._last_ping[i] >= self.heartbeat_s
                if ping is None and due and self._actors[i] is not None:
                    self._pings[i] = (self._actors[i].info.remote(), self._generation[i])
                    self._last_ping[i] = now
            checks += [(p[0], i, p[1]) for i, p in enumerate(self._pings) if p is not None]
        if not checks:
            return []
        refs = [c[0] for c in checks]
        ready = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
        restarted = []
        for ref, i, gen in checks:
            if ref not in ready:
                continue
            with self._lock:
                self._orphans.pop(ref, None)
                if self._pings[i] is not None and self._pings[i][0] == ref:
                    self._pings[i] = None
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:
                if self.restart(i, gen):
                    restarted.append(i)
            except Exception:  # cancelled, or the task raised: the actor is alive
                pass
        return restarted

    def kill(self, i: int) -> None:
        """Kill worker ``i``'s actor without telling the executor (fault injection, tests)."""
        actor, _ = self.get(i)
        if actor is not None:
            self._ray.kill(actor, no_restart=True)

    def shutdown(self) -> None:
        with self._lock:
            for a in self._actors:
                if a is not None:
                    try:
                        self._ray.kill(a, no_restart=True)
                    except Exception:
                        pass
            self._actors = [None] * len(self._actors)


class RayExecutor(Executor):
    """``N`` Ray actors each holding the worker function; rounds wait for ``N − S`` results.

    Start-up: the worker function (e.g. a trained model's ``worker_fn()``, parameters
    included) is pickled with cloudpickle — by value for closures and ``__main__``, by
    reference for functions of importable modules — and put in the Ray object store once;
    each actor loads it, jits it and compiles it for one input of ``input_shape`` before the
    first round (the time it takes is in :attr:`startup`). Actors reserve no CPU
    (``num_cpus=0``), so ``N`` may exceed the cores of a small machine; each runs XLA
    single-threaded by default.

    A round (:meth:`run_round`) sends coded input ``x~_n`` to actor ``n`` with its injected
    delay and fault, then loops ``ray.wait(pending, num_returns=need − valid, timeout=left)``
    until the wait rule holds or the timeout passes. Each returned result is checked before it
    counts (finite, right shape, ``validate``); a bad one is a straggler and the master waits
    for another. Whatever is still pending at the cut-off is cancelled and discarded: late
    results never reach a decoder and never hold up later rounds (actors are asynchronous, so
    a late or hung task does not block the actor's next task). An actor that died is reported
    ``DEAD`` and restarted (up to ``max_restarts`` times per worker); its replacement loads
    and compiles the model again, answering late until it is ready. An actor that dies while
    its task is late is found when that cancelled task ends (checked, without blocking, at the
    start of each round) and restarted too; until then it is just a straggler.

    Per-worker latencies are measured from the master's dispatch to the actor's completion
    timestamp (one host clock on a local cluster). If Ray is not running yet, a local
    loopback-only cluster is started (:func:`init_local_ray`).

    Usage (starts processes, so not a doctest)::

        tm = gcc_jax.nn.training.train_classifier("mlp", "digits")
        with RayExecutor(tm.worker_fn(), num_workers=8, input_shape=tm.input_shape,
                         validate=probability_check()) as ex:
            code = gcc_jax.SplineCode.chebyshev(num_inputs=4, num_workers=8)
            res = ex.run_round(code.encode(x), wait_for=6, timeout_s=1.0)
            y_hat = code.decode(res.outputs, res.mask)

    Args:
        fn: the worker function (one input → one output) or one function per worker.
        num_workers: ``N``.
        input_shape: the shape of one coded input (for the start-up compilation and for
            the master's output-shape check).
        input_dtype: its dtype.
        delays: injected latency model (:class:`DelayModel`), sampled by round id.
        faults: injected :class:`Fault` s.
        validate: optional check of one output; rejected results are ``INVALID``.
        x64: run the actors with ``jax_enable_x64`` (default: as in this process).
        max_restarts: restarts per worker before it is left dead.
        startup_timeout_s: how long to wait for the actors to be ready (past it: a
            ``TimeoutError`` naming the actors not ready, and the actors are stopped).
        actor_options: extra ``.options(...)`` for the actors.
        xla_single_thread: one XLA thread per actor.
        cancel_late: cancel the tasks still pending at a round's cut-off (default). ``False``
            lets them run to the end, as a serving instance that is not interrupted does: the
            actor stays busy and its next tasks queue behind (their results are discarded).
    """

    def __init__(
        self,
        fn: Callable | Sequence[Callable],
        *,
        num_workers: int,
        input_shape: Sequence[int],
        input_dtype: Any = np.float32,
        delays: DelayModel | None = None,
        faults: Sequence[Fault] = (),
        validate: Callable[[np.ndarray], bool] | None = None,
        x64: bool | None = None,
        max_restarts: int = 3,
        startup_timeout_s: float = 300.0,
        actor_options: dict | None = None,
        xla_single_thread: bool = True,
        cancel_late: bool = True,
        _pool: _ActorPool | None = None,
    ):
        import jax

        fns = as_worker_fns(fn, num_workers)
        startup_timeout_s = as_real(startup_timeout_s, "startup_timeout_s", 0.0, lo_open=True)
        self.num_workers = num_workers
        self.delays = check_delays(delays, num_workers)
        self.faults = check_faults(faults, num_workers)
        self.validate = validate
        self.cancel_late = bool(cancel_late)
        self.input_shape = tuple(int(s) for s in input_shape)
        self.input_dtype = np.dtype(input_dtype)
        x64 = bool(jax.config.jax_enable_x64) if x64 is None else bool(x64)
        spec = jax.ShapeDtypeStruct(self.input_shape, self.input_dtype)
        out = jax.eval_shape(fns[0], spec)
        self.output_shape = tuple(out.shape)
        self.output_dtype = np.result_type(self.input_dtype, np.float32)
        self._ray = _import_ray()
        self._owner = _pool is None
        if _pool is None:
            if not self._ray.is_initialized():
                init_local_ray()
            _pool = _ActorPool(
                fns,
                self.input_shape,
                self.input_dtype,
                x64,
                actor_options,
                max_restarts,
                xla_single_thread,
            )
            t0 = time.perf_counter()
            try:
                _pool.wait_ready(startup_timeout_s)
            except Exception:
                _pool.shutdown()
                raise
            self.startup_wall_s = time.perf_counter() - t0
        else:
            self.startup_wall_s = 0.0
        if len(_pool) < num_workers:
            raise ValueError(f"the actor pool has {len(_pool)} actors, fewer than {num_workers}")
        self._pool = _pool
        self._workers = list(range(num_workers))
        self._rounds = RoundCounter()

    @property
    def startup(self) -> list[dict]:
        """Per actor: ``startup_s`` = ``load_s`` (unpickle ``f``, importing what it needs) +
        ``compile_s`` (jit for one input), its ``pid`` and the Ray ``node_id`` it runs on; a
        restarted actor's once ready."""
        infos = self._pool.infos()
        return [dict(infos[w]) for w in self._workers if infos[w] is not None]

    @property
    def restarts(self) -> list[int]:
        """Restarts so far of each worker (counted over the shared actor pool)."""
        return [self._pool.restarts[w] for w in self._workers]

    def view(
        self,
        num_workers: int | None = None,
        *,
        workers: Sequence[int] | None = None,
        delays: DelayModel | None = None,
        faults: Sequence[Fault] = (),
        validate: Callable[[np.ndarray], bool] | None | str = "inherit",
    ) -> "RayExecutor":
        """An executor on some actors of this pool, with its own injected delays and faults.

        ``num_workers=m`` takes the first ``m`` actors; ``workers=[...]`` any distinct ones,
        in that order (its worker ``i`` is actor ``workers[i]``). Views share the actors (and
        their restarts) and start nothing; closing a view does not stop the actors, closing
        the original does. ``validate`` defaults to this executor's.
        """
        size = len(self._pool)
        if workers is None:
            workers = range(as_int(num_workers, "num_workers", 1, size))
        ids = [int(w) for w in workers]
        if not ids or len(set(ids)) != len(ids) or not all(0 <= w < size for w in ids):
            raise ValueError(f"`workers` must be distinct actor indices in [0, {size}); got {ids}")
        if num_workers is not None and num_workers != len(ids):
            raise ValueError(f"`num_workers`={num_workers} but {len(ids)} `workers` given")
        new = object.__new__(RayExecutor)
        new.num_workers = len(ids)
        new._workers = ids
        new.delays = check_delays(delays, len(ids))
        new.faults = check_faults(faults, len(ids))
        new.validate = self.validate if isinstance(validate, str) else validate
        new.cancel_late = self.cancel_late
        new.input_shape, new.input_dtype = self.input_shape, self.input_dtype
        new.output_shape, new.output_dtype = self.output_shape, self.output_dtype
        new._ray, new._owner, new._pool = self._ray, False, self._pool
        new.startup_wall_s = 0.0
        new._rounds = RoundCounter()
        return new

    def kill_worker(self, worker: int) -> None:
        """Kill worker ``worker``'s actor now, as a crash would (for fault-injection runs)."""
        self._pool.kill(self._workers[int(worker)])

    def _check_inputs(self, xt: Any) -> np.ndarray:
        """The coded inputs as a NumPy array of ``(N, *input_shape)`` in ``input_dtype``."""
        n = self.num_workers
        xt = np.asarray(xt)
        if xt.shape != (n, *self.input_shape):
            raise ValueError(
                f"`xt` must have shape ({n}, *{self.input_shape}), one row per worker; "
                f"got {xt.shape}"
            )
        return xt.astype(self.input_dtype, copy=False)

    def _run(self, xt: np.ndarray, spec: RoundSpec) -> RoundResult:
        """One round; latencies are wall time on the Ray cluster."""
        ray = self._ray
        n = self.num_workers
        rule, need, timeout_s, _, on_result = spec
        rid = self._rounds.take(spec.round_id)
        delays = self.delays.sample(rid) if self.delays is not None else np.zeros(n)
        kinds = faults_for_round(self.faults, n, rid)

        record = RoundRecord.empty(n, self.output_shape, self.output_dtype)
        mask, outcomes, latencies, messages = (
            record.mask,
            record.outcomes,
            record.latencies,
            record.messages,
        )
        restarted = record.restarted
        pending: dict[Any, tuple[int, int]] = {}
        where = {w: i for i, w in enumerate(self._workers)}
        for w in self._pool.reap():  # deaths found among earlier rounds' late tasks
            if w in where:
                restarted.append(where[w])
        t0 = time.time()
        for i in range(n):
            actor, gen = self._pool.get(self._workers[i])
            if actor is None:
                outcomes[i] = Outcome.DEAD
                latencies[i] = 0.0
                messages[i] = f"dead (out of its {self._pool.max_restarts} restarts)"
                continue
            kind = kinds[i]
            delay = float(delays[i])
            if not np.isfinite(delay):  # the delay model's failures: never answer
                kind, delay = "hang", 0.0
            ref = actor.compute.remote(rid, xt[i], delay, kind)
            pending[ref] = (i, gen)
        deadline = t0 + timeout_s
        met = rule(mask)
        while not met and pending:
            left = deadline - time.time()
            if left <= 0:
                break
            num = 1 if on_result is not None else need - int(mask.sum())
            num = max(1, min(num, len(pending)))
            ready, _ = ray.wait(list(pending), num_returns=num, timeout=left)
            now = time.time()
            for ref in ready:
                i, gen = pending.pop(ref)
                try:
                    y, t_done = ray.get(ref)
                except ray.exceptions.RayActorError as err:
                    outcomes[i], latencies[i] = Outcome.DEAD, now - t0
                    if self._pool.restart(self._workers[i], gen):
                        restarted.append(i)
                        messages[i] = f"actor died ({type(err).__name__}); restarted"
                    else:
                        messages[i] = f"actor died ({type(err).__name__}); not restarted"
                    continue
                except Exception as err:  # the worker function raised
                    outcomes[i], latencies[i] = Outcome.ERROR, now - t0
                    cause = getattr(err, "cause", None) or err
                    messages[i] = f"raised {type(cause).__name__}: {cause}".splitlines()[0]
                    continue
                latencies[i] = max(0.0, min(t_done, now) - t0)
                record.accept(i, y, self.validate, on_result, latencies[i])
            met = rule(mask)
        t_cut = time.time()
        elapsed = t_cut - t0
        for ref, (i, _) in pending.items():  # late: cancel and discard
            messages[i] = f"no answer within {elapsed * 1e3:.1f} ms"
            try:
                if self.cancel_late:
                    ray.cancel(ref)
            except Exception:
                pass
        self._pool.adopt({ref: (self._workers[i], g) for ref, (i, g) in pending.items()})
        # a late task that ends in a dead actor gets it restarted
        return record.result(rid, elapsed, met, not met and pending)

    def close(self) -> None:
        """Kill the actors (only the executor that started them does; views do nothing)."""
        if getattr(self, "_owner", False):
            self._pool.shutdown()
            self._owner = False
