"""``gcc-jax serve-bench``: flags, sizes and rules of :mod:`gcc_jax.experiments.serve`."""

from .._checks import count, real, sizes
from .._command import Command
from ._flags import SCHEMES, Flags, at_least, flag, one_of, own, within

__all__ = ["COMMAND", "DEFAULTS", "SCHEMES", "SERVING", "TOY"]

SERVING = dict(
    model="mlp",
    dataset="digits",
    data_path=None,
    epochs=10,
    parm_epochs=20,
    shift_ms=4.0,
    scale_ms=2.0,
    tail="exponential",
    episode_ms=500.0,
    lam_dec=1e-6,
    deadline_ms=25.0,
    max_wait_ms=5.0,
    schemes=SCHEMES,
)
"""The defaults that ``serve-bench`` and its model, ``serve-sim``, share: the classifier, the
service time, the background episodes, GCC/BACC's decoding and the schemes compared."""

DEFAULTS = SERVING | dict(
    num_queries=10_000,
    rate=120.0,
    num_inputs=2,
    groups=2,
    straggle_prob=0.05,
    slowdown=10.0,
    dispatch="queue",
    cancel="none",
    fail_prob=0.0,
    release="query",
    timeout_s=2.0,
    max_in_flight=8,
    max_queue=4096,
    max_seconds=3600.0,
    sweep_inputs=4,
    sweep_workers=12,
    sweep_stragglers=2,
    sweep_queries=2000,
    sweep_deadlines_ms=(4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 25.0, 50.0),
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

_POSITIVE = within(0.0, lo_open=True)


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
    module="gcc_jax.experiments.serve",
    flags=Flags(
        DEFAULTS,
        TOY,
        own=(
            own("--rate", "Poisson arrival rate, queries/s", check=_POSITIVE),
            own("--groups", "G coding groups of workers", check=count),
            own("--straggle-prob", "fraction of time under background load", check=within(0, 1)),
            own(
                "--dispatch",
                "queue (one queue, idle group first) or round-robin",
                check=one_of(("queue", "round-robin")),
            ),
            own(
                "--cancel",
                "late tasks: none (run to the end) or all (cancelled)",
                check=one_of(("none", "all")),
            ),
            own("--fail-prob", "P(a task never answers)", check=within(0, 1, hi_open=True)),
            own(
                "--release",
                "query (each query as soon as ready) or batch",
                check=one_of(("query", "batch")),
            ),
            own("--timeout", "a round's hard limit, s", key="timeout_s", check=_POSITIVE),
            own("--max-in-flight", "rounds in flight per scheme", check=count),
            own("--max-queue", "queued queries before Overloaded", check=count),
            own("--max-seconds", "stream time budget, split between schemes", check=_POSITIVE),
            own("--sweep-inputs", "deadline sweep: K"),
            own("--sweep-workers", "deadline sweep: N"),
            own("--sweep-stragglers", "deadline sweep: S"),
            own("--sweep-queries", "deadline sweep: queries; 0 = skip", check=at_least(0)),
            own("--sweep-deadlines-ms", "deadline sweep: deadlines in ms", check=_POSITIVE),
            own("--num-cpus", "CPUs of the local Ray cluster", check=count),
        ),
        help=dict(
            num_queries="queries per scheme; ParM used 100000",
            num_inputs="k queries per coding group, as ParM",
            slowdown="background slowdown factor",
            episode_ms="mean background episode, ms; 0 = per task",
        ),
        rules=(
            count("num_inputs", flag("num_inputs")),
            count("num_queries", flag("num_queries")),
            real("episode_ms", flag("episode_ms"), 0.0),
            sizes(
                ("sweep_inputs", "--sweep-inputs"),
                ("sweep_workers", "--sweep-workers"),
                ("sweep_stragglers", "--sweep-stragglers"),
            ),
        ),
    ),
    extras=("experiments", "ray"),
    x64=None,
    fast_toy_compile=False,  # the toy run measures latencies: keep XLA's optimised code
)
