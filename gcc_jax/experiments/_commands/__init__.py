"""The ``gcc-jax`` subcommands: one module per experiment with its flags, toy sizes, defaults
and argument rules. Nothing here imports JAX; each command's run, report and save functions are
imported when called."""

from . import adversarial, demo, dnn, learned, poly, rates, regimes, serve, serve_sim, tune

__all__ = ["COMMANDS"]

COMMANDS = (
    dnn.COMMAND,
    demo.COMMAND,
    rates.COMMAND,
    regimes.COMMAND,
    poly.COMMAND,
    serve.COMMAND,
    serve_sim.COMMAND,
    learned.COMMAND,
    tune.COMMAND,
    adversarial.COMMAND,
)
"""The ``gcc-jax`` subcommands, in ``--help`` order."""
