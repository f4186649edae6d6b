"""``gcc-jax demo``: flags, sizes and rules of :mod:`gcc_jax.experiments.demo`."""

import argparse

from .._checks import count, lam, sizes
from .._command import Command, explicit, int_list, merge_config

__all__ = ["COMMAND", "DEFAULTS", "TOY"]

DEFAULTS = dict(
    num_inputs=20, num_workers=100, stragglers=(0, 5, 10, 20, 30, 40), num_masks=1000, dim=4
)
"""Full-size keyword arguments of :func:`~gcc_jax.experiments.demo.run_demo`."""
TOY = dict(num_inputs=4, num_workers=16, stragglers=(0, 3), num_masks=20, dim=2)
"""Toy sizes (``--toy``)."""


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--num-inputs", "-K", type=int, help="K (default 20)")
    p.add_argument("--num-workers", "-N", type=int, help="N (default 100)")
    p.add_argument(
        "--stragglers", "-S", type=int_list, help="comma-separated S values (default 0,5,...,40)"
    )
    p.add_argument("--masks", "-M", type=int, help="straggler sets per S (default 1000)")
    p.add_argument("--dim", type=int, help="input dimension d (default 4)")
    p.add_argument("--lam-enc", type=float, default=0.0, help="encoder smoothing (default 0)")
    p.add_argument("--lam-dec", type=float, default=0.0, help="decoder smoothing (default 0)")


def _config(args: argparse.Namespace, toy: bool) -> dict:
    flags = explicit(args, "num_inputs", "num_workers", "stragglers", "dim", num_masks="masks")
    return merge_config(DEFAULTS, TOY if toy else None, flags) | explicit(
        args, "lam_enc", "lam_dec"
    )


COMMAND = Command(
    name="demo",
    help="synthetic GCC demo: loss versus S on a smooth vector-valued function",
    description="GCC on a smooth vector-valued function R^d -> R^(d+2): mean, median and "
    "largest loss versus the number of stragglers S over random straggler sets (loss = "
    "(1/K) sum_k ||f^(x_k) - f(x_k)||^2). Writes demo.json, demo.txt and demo.png.",
    add_arguments=_add_arguments,
    config=_config,
    module="gcc_jax.experiments.demo",
    defaults=DEFAULTS | dict(lam_enc=0.0, lam_dec=0.0),
    rules=(
        sizes(
            ("num_inputs", "--num-inputs/-K"),
            ("num_workers", "--num-workers/-N"),
            ("stragglers", "--stragglers/-S"),
        ),
        count("num_masks", "--masks/-M"),
        count("dim", "--dim"),
        lam("lam_enc", "--lam-enc"),
        lam("lam_dec", "--lam-dec"),
    ),
    float32_flag=True,
)
