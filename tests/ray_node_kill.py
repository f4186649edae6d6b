"""A Ray node dies in the middle of a stream of queries: ParM and GCC on a three-node cluster.

Run as a script (``python tests/ray_node_kill.py``; ``tests/test_distributed_ray.py`` does, in a
subprocess, since it needs a Ray cluster of its own beside that module's). A head node and two
worker nodes start on the loopback interface (``ray.cluster_utils.Cluster``); six actors
(:class:`gcc_jax.distributed.RayExecutor`, ``SPREAD`` over the worker nodes) run a linear map
``f(x) = W x``. Two services share them: GCC (``SplineCode``, K = 2, N = 6, S = 3) on all six,
ParM (K = 2, its parity worker running ``f`` too: exact for a linear ``f``) on actors 0-2. Both
serve ``--queries`` queries each, paced at ``--rate`` per second, and ``--kill-at`` seconds in,
the worker node of actor 1 is killed (SIGKILL, no drain). The last line of stdout is a JSON
summary: per service, answers, correct ones (ParM: ``f(x)``; GCC: the decode of the workers the
answer says answered, recomputed here), explicit errors and wrong ones; which actors were lost,
their restarts and where the new actors run; and a final round that waits for all six.
"""

import argparse
import json
import os
import sys
import threading
import time

# before Ray is imported: every node registers as 127.0.0.1 (Ray's single-machine mode)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

K, N, S = 2, 6, 3
PARM_WORKERS = (0, 1, 2)
KILLED_ACTOR = 1  # the node hosting this actor is killed
# fast node-failure detection (Ray's default is about 15 s): the test then takes seconds
HEALTH = {
    "health_check_period_ms": 200,
    "health_check_failure_threshold": 2,
    "health_check_initial_delay_ms": 0,
}


def _make_linear(w):
    import jax.numpy as jnp

    def f(x):
        """``W x``: a linear map, so ParM's parity worker can run ``f`` itself exactly."""
        return jnp.asarray(w) @ x

    return f


def _matvec(params, v):
    return params @ v


def run(num_queries: int, rate: float, kill_at: float) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import ray
    from ray.cluster_utils import Cluster

    jax.config.update("jax_enable_x64", True)
    import gcc_jax as gcc
    from gcc_jax.distributed import CodedInferenceService, RayExecutor

    t_start = time.monotonic()
    cluster = Cluster(
        initialize_head=True,
        head_node_args=dict(num_cpus=1, include_dashboard=False, _system_config=HEALTH),
    )
    nodes = [cluster.add_node(num_cpus=1, resources={"gcc_worker": 100}) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    summary: dict = {"nodes": [n["NodeManagerAddress"] for n in ray.nodes()]}
    w = np.random.default_rng(0).normal(size=(4, 3))
    f = _make_linear(w)
    pool = RayExecutor(
        f,
        num_workers=N,
        input_shape=(3,),
        input_dtype=np.float64,
        max_restarts=2,
        startup_timeout_s=600,
        actor_options={"resources": {"gcc_worker": 1}, "scheduling_strategy": "SPREAD"},
    )
    try:
        placed = [i["node_id"] for i in pool.startup]
        summary["startup_s"] = time.monotonic() - t_start
        victim = next(n for n in nodes if n.node_id == placed[KILLED_ACTOR])
        survivor = next(n for n in nodes if n is not victim)
        lost = [i for i, node in enumerate(placed) if node == victim.node_id]
        summary["placement"] = ["killed" if p == victim.node_id else "survivor" for p in placed]

        gcc_code = gcc.SplineCode.chebyshev(num_inputs=K, num_workers=N)
        parm_code = gcc.ParityModelCode(jnp.asarray(w), _matvec, num_inputs=K)
        rng = np.random.default_rng(1)
        queries = {name: rng.uniform(-1, 1, size=(num_queries, 3)) for name in ("gcc", "parm")}
        arrivals = np.arange(num_queries) / rate
        services = {
            "gcc": CodedInferenceService(
                pool.view(N), gcc_code, stragglers=S, max_wait_s=0.05, timeout_s=2.0,
                max_queue=2 * num_queries, on_liars="ignore",
            ),
            "parm": CodedInferenceService(
                pool.view(workers=PARM_WORKERS), parm_code, max_wait_s=0.05, timeout_s=0.5,
                max_queue=2 * num_queries, on_liars="ignore",
            ),
        }  # fmt: skip
        for svc in services.values():
            svc.warmup()
        answers: dict = {}
        threads = [
            threading.Thread(
                target=lambda name=name: answers.__setitem__(
                    name, services[name].serve(queries[name], arrivals)
                )
            )
            for name in services
        ]
        t0 = time.monotonic()
        for th in threads:
            th.start()
        time.sleep(kill_at)
        t_kill = time.monotonic()
        cluster.remove_node(victim, allow_graceful=False)
        summary["kill_s"] = t_kill - t0
        for th in threads:
            th.join()
        summary["serve_s"] = time.monotonic() - t0
        for svc in services.values():
            svc.close()

        # the lost actors come back on the surviving node
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            infos = {i["worker_id"]: i for i in pool.startup}
            if len(infos) == N and all(pool.restarts[i] > 0 for i in lost):
                break
            pool.run_round(np.zeros((N, 3)), wait_for=1, timeout_s=1.0)  # finds the dead
            time.sleep(0.5)
        infos = {i["worker_id"]: i for i in pool.startup}
        summary["lost_actors"] = lost
        summary["restarts"] = pool.restarts
        summary["recovered_s"] = time.monotonic() - t_kill
        summary["new_nodes"] = [
            "not ready" if i not in infos
            else "survivor" if infos[i]["node_id"] == survivor.node_id
            else "elsewhere"
            for i in lost
        ]  # fmt: skip
        xt = rng.uniform(-1, 1, size=(N, 3))
        final = pool.run_round(xt, wait_for=N, timeout_s=60)
        summary["final_round"] = dict(
            rule_met=final.rule_met,
            answered=len(final.answered),
            exact=bool(np.allclose(final.outputs, xt @ w.T, rtol=1e-12, atol=1e-12)),
        )

        # every answer: correct, or an explicit error
        for name, got in answers.items():
            code, x = (gcc_code, queries[name]) if name == "gcc" else (parm_code, queries[name])
            counts = dict(submitted=num_queries, answered=len(got), ok=0, errors=0, wrong=0)
            errors: dict = {}
            ids = sorted(a.query_id for a in got)
            counts["ids_complete"] = ids == list(range(num_queries))
            by_batch: dict = {}
            for a in got:
                by_batch.setdefault(a.batch_id, []).append(a)
            for group in by_batch.values():
                group.sort(key=lambda a: a.slot)
                rows = [x[a.query_id] for a in group]
                xb = np.stack(rows + [rows[-1]] * (K - len(rows)))
                for a in group:
                    if not a.ok:
                        counts["errors"] += 1
                        kind = a.error.split(":")[0] if a.error else "(empty error)"
                        errors[kind] = errors.get(kind, 0) + 1
                        continue
                    counts["ok"] += 1
                    if name == "parm":
                        want = w @ x[a.query_id]
                    else:
                        mask = np.zeros(N, bool)
                        mask[list(a.workers_answered)] = True
                        yt = np.asarray(code.encode(jnp.asarray(xb))) @ w.T
                        want = np.asarray(code.decode(yt, mask))[a.slot]
                    if not np.allclose(a.value, want, rtol=1e-9, atol=1e-9):
                        counts["wrong"] += 1
            counts["sources"] = {}
            for a in got:
                src = a.source.split(" ")[0] if a.ok else "error"
                if a.ok and name == "gcc":
                    src = f"decoder, {len(a.workers_answered)} workers"
                counts["sources"][src] = counts["sources"].get(src, 0) + 1
            after = [a for a in got if a.query_id >= 0.9 * num_queries]
            counts["ok_last_tenth"] = sum(a.ok for a in after)
            counts["last_tenth"] = len(after)
            counts["error_kinds"] = errors
            counts["p99_latency_s"] = float(np.percentile([a.latency_s for a in got], 99))
            summary[name] = counts
    finally:
        pool.close()
        ray.shutdown()
        cluster.shutdown()
    summary["total_s"] = time.monotonic() - t_start
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50.0, help="queries per second per service")
    parser.add_argument("--kill-at", type=float, default=8.0, help="seconds into the stream")
    args = parser.parse_args(argv)
    summary = run(args.queries, args.rate, args.kill_at)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
