"""The `gcc-jax` command line."""
def main(argv=None):
    raise SystemExit("gcc-jax: not ready")
