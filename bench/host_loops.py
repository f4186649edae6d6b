"""Steps per second of the loops that drive compiled programs from Python: `gcc_jax.tune`'s
optimisation steps and the local search of `gcc_jax.worst_case_mask`.

Both loops dispatch one compiled program per step; what the script measures is how much the host
adds around it (transfers of masks, losses and minibatch indices, synchronisation). Run it at two
commits (e.g. with `git worktree`) and compare the steps/s; `--repeat` takes the best of several
runs (the machine is shared). Writes JSON with `--out`.

    python bench/host_loops.py --steps 200 --repeat 3
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _best(fn, repeat: int):
    """``((best wall s, best process CPU s), last result)`` of ``repeat`` calls of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return (min(walls), min(cpus)), out


def _tune_steps(steps: int, repeat: int, kind: str) -> dict:
    import jax
    import jax.numpy as jnp

    import gcc_jax as gcc
    from gcc_jax.tuning import StragglerModel, tune

    code = gcc.SplineCode.chebyshev(num_inputs=10, num_workers=30)
    x = jax.random.uniform(jax.random.key(1), (16, 10, 1), minval=-3.0, maxval=3.0)
    f = lambda v: v * jnp.sin(v)  # noqa: E731
    model = StragglerModel.exact(6) if kind == "exact" else StragglerModel.worst(6)

    def run(n):
        return tune(code, f, x, key=jax.random.key(0), steps=n, eval_every=n, patience=n,
                    straggler_model=model, progress=False, min_delta=0.0)  # fmt: skip

    run(steps)  # compile
    (best, cpu), res = _best(lambda: run(steps), repeat)
    n = int(res.history.train_loss.size)
    return {"kind": kind, "steps": n, "best_s": best, "best_cpu_s": cpu,
            "steps_per_s": n / best, "steps_per_cpu_s": n / cpu}  # fmt: skip


def _search_steps(iters: int, repeat: int) -> dict:
    import jax.numpy as jnp

    import gcc_jax as gcc

    code = gcc.SplineCode.chebyshev(num_inputs=20, num_workers=60)
    x = jnp.linspace(-3.0, 3.0, 20)[:, None]
    f = lambda v: v * jnp.sin(v)  # noqa: E731
    budget = {"max_exhaustive": 0, "restarts": 8, "proposals": 64, "max_iters": iters,
              "patience": iters}  # fmt: skip
    wc = gcc.worst_case_mask(code, f, x, stragglers=12, search=budget)  # compile
    (best, cpu), wc = _best(lambda: gcc.worst_case_mask(code, f, x, stragglers=12, search=budget),
                            repeat)  # fmt: skip
    return {"iters": iters, "best_s": best, "best_cpu_s": cpu, "iters_per_s": iters / best,
            "evaluated": int(wc.num_evaluated), "loss": float(wc.loss)}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="tune steps (200)")
    p.add_argument("--iters", type=int, default=40, help="local-search steps (40)")
    p.add_argument("--repeat", type=int, default=3, help="runs, best kept (3)")
    p.add_argument("--out", help="JSON file")
    a = p.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(__file__)).stdout.strip()  # fmt: skip
    rec = {
        "commit": commit,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "tune_exact": _tune_steps(a.steps, a.repeat, "exact"),
        "tune_worst": _tune_steps(a.steps, a.repeat, "worst"),
        "search": _search_steps(a.iters, a.repeat),
    }
    print(json.dumps(rec, indent=1))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(rec, fh, indent=1)


if __name__ == "__main__":
    main()
