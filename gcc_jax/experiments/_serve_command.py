"""``gcc-jax serve-bench``: the registry entry of :mod:`gcc_jax.experiments.serve`.

Kept apart from ``serve.py`` (the serving benchmark itself, which imports Ray-facing code),
which returns its own JSON-ready dict and writes its own files; its flags, toy sizes and
flag-to-keyword mapping live there (:func:`~gcc_jax.experiments.serve.add_serve_bench_arguments`,
:func:`~gcc_jax.experiments.serve.serve_bench_config`).
"""

import argparse

from ._command import Command

__all__ = ["COMMAND"]


def _add_arguments(p: argparse.ArgumentParser) -> None:
    from .serve import add_serve_bench_arguments

    add_serve_bench_arguments(p)


def _config(args: argparse.Namespace, toy: bool) -> dict:
    from .serve import serve_bench_config

    return serve_bench_config(args, toy)


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
    help="ParM's tail-latency experiment on a local Ray cluster: latency tails and accuracy",
    description="Serves one Poisson stream of test images with a trained classifier on Ray "
    "actors (loopback-only local cluster; each actor serves one query at a time) with "
    "background slowdowns on random workers, once per scheme: uncoded, equal (ParM's "
    "equal-resources baseline), replication, parm, gcc and bacc (N-S results or a deadline). "
    "Each query is released as soon as its own estimate is ready (--release query) or with "
    "its group (--release batch). Also sweeps GCC's and BACC's accuracy against a decoding "
    "deadline. Progress on stderr; prints the tail table (median, mean, p99, p99.9, "
    "p99.9-median gap, accuracy), the gap ratios against ParM's 3.5x claim and a "
    "plain-language summary; writes serve_bench.json, serve_bench.txt and serve_bench.png "
    "into --out. Bounded by --queries and --max-seconds. Run time: the defaults (10,000 "
    "queries per scheme at 120 queries/s) took 9 min 8 s wall on the idle 2-core development "
    "machine (751 s of CPU time with the Ray actors, 0.7 GB in the driver; models from the "
    "cache), 9 min 42 s at load 4-12. It needs the whole machine: with other work running, "
    "GCC and BACC miss their 25 ms deadline for many queries (29% and 22% even when idle, "
    "about half at load 4-12, 99% with one core taken). --toy 30 s wall on the idle machine.",
    add_arguments=_add_arguments,
    config=_config,
    run=_run,
    report=_report,
    save=_save,
    x64=None,
    fast_toy_compile=False,  # the toy run measures latencies: keep XLA's optimised code
)
