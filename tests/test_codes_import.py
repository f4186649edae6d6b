"""``import gcc_jax.codes`` loads the codes alone: no Flax, Optax, tqdm or experiments (a
learned code imports its networks when it is first built or applied)."""

import subprocess
import sys

HEAVY = ("flax", "optax", "tqdm", "matplotlib", "sklearn", "ray", "gcc_jax.experiments")


def test_import_gcc_jax_codes_loads_no_heavy_dependency():
    script = f"import sys, gcc_jax.codes\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
