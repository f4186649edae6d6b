"""``gcc-jax demo``: flags, sizes and rules of :mod:`gcc_jax.experiments.demo`."""

from .._checks import count
from .._command import Command
from ._flags import Flags, own, shared_sizes

__all__ = ["COMMAND", "DEFAULTS", "TOY"]

DEFAULTS = dict(
    num_inputs=20,
    num_workers=100,
    stragglers=(0, 5, 10, 20, 30, 40),
    num_masks=1000,
    dim=4,
    lam_enc=0.0,
    lam_dec=0.0,
)
"""Full-size keyword arguments of :func:`~gcc_jax.experiments.demo.run_demo`."""
TOY = dict(num_inputs=4, num_workers=16, stragglers=(0, 3), num_masks=20, dim=2)
"""Toy sizes (``--toy``)."""


COMMAND = Command(
    name="demo",
    help="synthetic GCC demo: loss versus S on a smooth vector-valued function",
    description="GCC on a smooth vector-valued function R^d -> R^(d+2): mean, median and "
    "largest loss versus the number of stragglers S over random straggler sets (loss = "
    "(1/K) sum_k ||f^(x_k) - f(x_k)||^2). Writes demo.json, demo.txt and demo.png.",
    module="gcc_jax.experiments.demo",
    flags=Flags(
        DEFAULTS,
        TOY,
        own=(own("--dim", "input dimension d", check=count),),
        help=dict(num_masks="random straggler sets per S"),
        rules=(shared_sizes("num_inputs", "num_workers", "stragglers"),),
    ),
    float32_flag=True,
)
