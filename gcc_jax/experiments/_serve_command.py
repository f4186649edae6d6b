"""``gcc-jax serve-bench``: the registry entry of :mod:`gcc_jax.experiments.serve`.

Kept apart from ``serve.py`` (the serving benchmark itself), which returns its own JSON-ready
dict and writes its own files.
"""

import argparse

from ._command import Command, merge_config, str_list

__all__ = ["COMMAND"]

#: run_serve_bench keyword -> argparse dest
_FLAGS = {
    "model": "model",
    "dataset": "dataset",
    "data_path": "data_path",
    "epochs": "epochs",
    "parm_epochs": "parm_epochs",
    "num_queries": "queries",
    "rate": "rate",
    "num_inputs": "num_inputs",
    "num_workers": "num_workers",
    "stragglers": "stragglers",
    "shift_ms": "shift_ms",
    "scale_ms": "scale_ms",
    "tail": "tail",
    "straggle_prob": "straggle_prob",
    "slowdown": "slowdown",
    "slow_workers": "slow_workers",
    "fail_prob": "fail_prob",
    "lam_dec": "lam_dec",
    "max_wait_ms": "max_wait_ms",
    "timeout_s": "timeout",
    "max_in_flight": "max_in_flight",
    "max_seconds": "max_seconds",
    "schemes": "schemes",
    "num_cpus": "num_cpus",
}
DEFAULTS = dict(epochs=10, parm_epochs=20, num_queries=1000, max_seconds=600.0)
"""Full-size values of the flags that ``--toy`` changes (the others default in the parser)."""
TOY = dict(
    num_queries=40,
    rate=100.0,
    num_inputs=2,
    num_workers=4,
    stragglers=1,
    epochs=1,
    parm_epochs=1,
    max_seconds=60.0,
)
"""Toy sizes (``--toy``)."""


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="mlp", help="classifier: mlp (default), lenet5, cnn, vit")
    p.add_argument("--dataset", default="digits", help="digits (default), fashion_mnist, ...")
    p.add_argument("--data-path", default=None, help="directory of the data files")
    p.add_argument("--epochs", type=int, help="training epochs (10; cached)")
    p.add_argument("--parm-epochs", type=int, help="ParM parity-model epochs (20)")
    p.add_argument("--queries", type=int, help="queries per scheme (1000)")
    p.add_argument("--rate", type=float, help="arrival rate, queries/s (50)")
    p.add_argument("--num-inputs", "-K", type=int, help="K queries per batch (4)")
    p.add_argument("--num-workers", "-N", type=int, help="N workers (8)")
    p.add_argument("--stragglers", "-S", type=int, help="codes wait for N-S (S=2)")
    p.add_argument("--shift-ms", type=float, default=5.0, help="injected delay shift (5 ms)")
    p.add_argument("--scale-ms", type=float, default=5.0, help="injected delay scale (5 ms)")
    p.add_argument("--tail", choices=("exponential", "pareto"), default="exponential")
    p.add_argument(
        "--straggle-prob", type=float, default=0.05, help="P(task slowed --slowdown x) (0.05)"
    )
    p.add_argument("--slowdown", type=float, default=10.0, help="straggler slow-down (10)")
    p.add_argument("--slow-workers", type=int, default=0, help="workers slowed in every round (0)")
    p.add_argument("--fail-prob", type=float, default=0.0, help="P(task never answers) (0)")
    p.add_argument("--lam-dec", type=float, default=1e-6, help="GCC decoder smoothing (1e-6)")
    p.add_argument("--max-wait-ms", type=float, default=20.0, help="batch fill wait (20 ms)")
    p.add_argument("--timeout", type=float, default=1.0, help="round deadline, s (1.0)")
    p.add_argument("--max-in-flight", type=int, default=4, help="rounds in flight (4)")
    p.add_argument("--max-seconds", type=float, help="stream time budget (600)")
    p.add_argument(
        "--schemes",
        type=str_list,
        default=("uncoded", "replication", "gcc", "bacc", "parm"),
        help="comma-separated schemes (default uncoded,replication,gcc,bacc,parm)",
    )
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray cluster (2)")


def _config(args: argparse.Namespace, toy: bool) -> dict:
    return merge_config(
        DEFAULTS, TOY if toy else None, {k: getattr(args, a) for k, a in _FLAGS.items()}
    )


def _run(**kwargs):
    from .serve import run_serve_bench

    return run_serve_bench(**kwargs)


def _report(result) -> str:
    from .serve import format_serve_table

    return format_serve_table(result)


def _save(result, out):
    from .serve import save_serve

    return save_serve(result, out)


COMMAND = Command(
    name="serve-bench",
    help="coded inference on a local Ray cluster: latency tails and accuracy per scheme",
    description="Serves one Poisson stream of test images with a trained classifier on Ray "
    "actors (a local cluster on the loopback interface), with injected stragglers, once per "
    "scheme: uncoded (K workers, wait for all), replication (N workers, wait for one copy "
    "of each query), GCC and BACC (N workers, wait for N-S), ParM. Prints median, p99 and "
    "p99.9 latency and accuracy; writes serve_bench.json, serve_bench.txt and serve_bench.png "
    "(latency CDFs) into --out. Bounded by --queries and --max-seconds; stops by itself.",
    add_arguments=_add_arguments,
    config=_config,
    run=_run,
    report=_report,
    save=_save,
    x64=None,
)
