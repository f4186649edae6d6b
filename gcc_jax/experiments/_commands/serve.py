"""``gcc-jax serve-bench``: flags, sizes and rules of :mod:`gcc_jax.experiments.serve`."""

import argparse

from .._checks import choice, count, lam, real, sizes
from .._command import Command, explicit, float_list, merge_config, str_list

__all__ = ["COMMAND", "DEFAULTS", "SCHEMES", "TOY", "add_flags", "add_serve_bench_arguments"]

SCHEMES = ("uncoded", "equal", "replication", "parm", "gcc", "bacc")
"""Schemes `run_serve_bench` knows, in table order."""

DEFAULTS = dict(
    model="mlp",
    dataset="digits",
    epochs=10,
    parm_epochs=20,
    num_queries=10_000,
    rate=120.0,
    num_inputs=2,
    groups=2,
    shift_ms=4.0,
    scale_ms=2.0,
    tail="exponential",
    straggle_prob=0.05,
    slowdown=10.0,
    episode_ms=500.0,
    dispatch="queue",
    cancel="none",
    fail_prob=0.0,
    lam_dec=1e-6,
    release="query",
    deadline_ms=25.0,
    max_wait_ms=5.0,
    timeout_s=2.0,
    max_in_flight=8,
    max_queue=4096,
    max_seconds=3600.0,
    schemes=SCHEMES,
    sweep_inputs=4,
    sweep_workers=12,
    sweep_stragglers=2,
    sweep_queries=2000,
    sweep_deadlines_ms=(4, 5, 6, 8, 10, 15, 25, 50),
    num_cpus=2,
)
"""Keyword defaults of :func:`~gcc_jax.experiments.serve.run_serve_bench`."""
TOY = dict(
    num_queries=40,
    rate=100.0,
    groups=1,
    epochs=1,
    parm_epochs=1,
    max_seconds=60.0,
    sweep_inputs=2,
    sweep_workers=6,
    sweep_stragglers=1,
    sweep_queries=40,
    sweep_deadlines_ms=(5.0, 10.0, 50.0),
)
"""Toy sizes of ``gcc-jax serve-bench --toy`` (tests)."""

_FLAGS = (
    # (flag, keyword, type, help)
    ("--model", "model", str, "classifier: mlp (default), lenet5, cnn, vit"),
    ("--dataset", "dataset", str, "digits (default), fashion_mnist, ..."),
    ("--data-path", "data_path", str, "directory of the data files"),
    ("--epochs", "epochs", int, "classifier training epochs (10; cached)"),
    ("--parm-epochs", "parm_epochs", int, "ParM parity-model epochs (20; cached)"),
    ("--queries", "num_queries", int, "queries per scheme (10000; ParM used 100000)"),
    ("--rate", "rate", float, "Poisson arrival rate, queries/s (120)"),
    ("--num-inputs", "num_inputs", int, "k queries per coding group (2, as ParM)"),
    ("--groups", "groups", int, "G coding groups of workers (2)"),
    ("--shift-ms", "shift_ms", float, "service time shift, ms (4)"),
    ("--scale-ms", "scale_ms", float, "service time exponential scale, ms (2)"),
    ("--tail", "tail", str, "exponential (default) or pareto service-time tail"),
    ("--straggle-prob", "straggle_prob", float, "fraction of time under background load (0.05)"),
    ("--slowdown", "slowdown", float, "background slowdown factor (10)"),
    ("--episode-ms", "episode_ms", float, "mean background episode, ms (500; 0 = per task)"),
    ("--dispatch", "dispatch", str, "queue (default: one queue, idle group first) or round-robin"),
    ("--cancel", "cancel", str, "late tasks: none (default: run to the end) or all (cancelled)"),
    ("--fail-prob", "fail_prob", float, "P(a task never answers) (0)"),
    ("--lam-dec", "lam_dec", float, "GCC decoder smoothing (1e-6)"),
    ("--release", "release", str, "query (default: each query as soon as ready) or batch"),
    ("--deadline-ms", "deadline_ms", float, "GCC/BACC: N-S results or this deadline (25)"),
    ("--max-wait-ms", "max_wait_ms", float, "longest wait for a group's k queries (5 ms)"),
    ("--timeout", "timeout_s", float, "a round's hard limit, s (2)"),
    ("--max-in-flight", "max_in_flight", int, "rounds in flight per scheme (8)"),
    ("--max-queue", "max_queue", int, "queued queries before Overloaded (4096)"),
    ("--max-seconds", "max_seconds", float, "stream time budget, split between schemes (3600)"),
    ("--sweep-inputs", "sweep_inputs", int, "deadline sweep: K (4)"),
    ("--sweep-workers", "sweep_workers", int, "deadline sweep: N (12)"),
    ("--sweep-stragglers", "sweep_stragglers", int, "deadline sweep: S (2)"),
    ("--sweep-queries", "sweep_queries", int, "deadline sweep: queries (2000; 0 = skip)"),
    ("--num-cpus", "num_cpus", int, "CPUs of the local Ray cluster (2)"),
)


def add_flags(parser: argparse.ArgumentParser, flags) -> None:
    """Add ``(flag, keyword, type, help)`` flags, each defaulting to ``None`` (the run
    function's default)."""
    for flag, dest, kind, text in flags:
        parser.add_argument(flag, dest=dest, type=kind, default=None, help=text)


def add_serve_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``gcc-jax serve-bench`` (defaults ``None``: :func:`run_serve_bench`'s)."""
    add_flags(parser, _FLAGS)
    parser.add_argument(
        "--schemes",
        default=None,
        type=str_list,
        help=f"comma-separated, from {','.join(SCHEMES)} (default all)",
    )
    parser.add_argument(
        "--sweep-deadlines-ms",
        dest="sweep_deadlines_ms",
        default=None,
        type=float_list,
        help="deadline sweep: deadlines in ms (4,5,6,8,10,15,25,50)",
    )


def serve_bench_config(args: argparse.Namespace, toy: bool) -> dict:
    """``run_serve_bench`` keywords from parsed flags: defaults, then toy sizes, then flags."""
    keys = [dest for _, dest, _, _ in _FLAGS] + ["schemes", "sweep_deadlines_ms"]
    return merge_config({}, TOY if toy else None, explicit(args, *keys))


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
    "into --out. Tails are ranked only among schemes that answered at least 99% of their "
    "queries; the others are listed with their errors and deadline misses. Beside each scheme, "
    "the serving-cluster model's prediction for the same setting (gcc-jax serve-sim's model). "
    "Bounded by --queries and --max-seconds: the default (10,000 queries per scheme at 120 "
    "q/s) takes about 12 minutes plus training; --toy under a minute. It needs the whole "
    "machine: other work running beside it adds its own delays to every scheme's tail.",
    add_arguments=add_serve_bench_arguments,
    config=serve_bench_config,
    module="gcc_jax.experiments.serve",
    extras=("experiments", "ray"),
    defaults=DEFAULTS,
    rules=(
        count("num_inputs", "--num-inputs"),
        count("groups", "--groups"),
        count("num_queries", "--queries"),
        real("rate", "--rate", 0.0, lo_open=True),
        count("epochs", "--epochs"),
        count("parm_epochs", "--parm-epochs"),
        real("shift_ms", "--shift-ms", 0.0),
        real("scale_ms", "--scale-ms", 0.0, lo_open=True),
        choice("tail", "--tail", ("exponential", "pareto")),
        real("straggle_prob", "--straggle-prob", 0.0, 1.0),
        real("slowdown", "--slowdown", 1.0),
        real("episode_ms", "--episode-ms", 0.0),
        choice("dispatch", "--dispatch", ("queue", "round-robin")),
        choice("cancel", "--cancel", ("none", "all")),
        real("fail_prob", "--fail-prob", 0.0, 1.0, hi_open=True),
        lam("lam_dec", "--lam-dec"),
        choice("release", "--release", ("query", "batch")),
        real("deadline_ms", "--deadline-ms", 0.0, lo_open=True, optional=True),
        real("max_wait_ms", "--max-wait-ms", 0.0),
        real("timeout_s", "--timeout", 0.0, lo_open=True),
        count("max_in_flight", "--max-in-flight"),
        count("max_queue", "--max-queue"),
        real("max_seconds", "--max-seconds", 0.0, lo_open=True),
        choice("schemes", "--schemes", SCHEMES),
        sizes(
            ("sweep_inputs", "--sweep-inputs"),
            ("sweep_workers", "--sweep-workers"),
            ("sweep_stragglers", "--sweep-stragglers"),
        ),
        count("sweep_queries", "--sweep-queries", 0),
        real("sweep_deadlines_ms", "--sweep-deadlines-ms", 0.0, lo_open=True),
        count("num_cpus", "--num-cpus"),
    ),
    x64=None,
    fast_toy_compile=False,  # the toy run measures latencies: keep XLA's optimised code
)
