"""Where a result was computed: package versions, backend and devices, the git commit, argv.

One place for the provenance that experiment results (:mod:`gcc_jax.experiments._io`) and
training checkpoints (:func:`gcc_jax.nn.training.cached_fit`) record.
"""

import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = ["environment", "git_commit", "versions"]


def versions() -> dict[str, str]:
    """Versions of gcc_jax and the packages its numbers depend on."""
    import flax
    import jaxlib
    import optax

    from .. import __version__

    return {
        "gcc_jax": __version__,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "numpy": np.__version__,
    }


def _git(root: Path, *args: str) -> str | None:
    """``git -C root ARGS``'s output, or ``None`` when it fails."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit() -> str | None:
    """``git rev-parse HEAD`` of gcc_jax's own checkout, or ``None``.

    Only a repository at the package folder's parent (holding ``.git``) that tracks the
    package's ``__init__.py`` counts: an installed wheel inside some other repository (a venv
    in a project's folder) records ``None``, not that project's commit.
    """
    package = Path(__file__).resolve().parents[1]
    root = package.parent
    if not (root / ".git").exists():
        return None
    tracked = _git(root, "ls-files", "--error-unmatch", f"{package.name}/__init__.py")
    sha = _git(root, "rev-parse", "HEAD") if tracked is not None else None
    return sha if sha is not None and len(sha) == 40 else None


def environment() -> dict[str, Any]:
    """Where a result was computed: versions, backend, devices, x64 flag, git commit, argv."""
    return {
        "command": list(sys.argv),
        "versions": versions(),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "x64": bool(jax.config.jax_enable_x64),
        "git_commit": git_commit(),
    }
