"""The command line's XLA flag: added for tested jaxlib versions only, the user's setting wins."""

import jaxlib
import pytest

from gcc_jax import _xla_flags


def test_flag_appended_to_the_users_flags(monkeypatch):
    monkeypatch.setattr(jaxlib, "__version__", "0.10.7")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    assert _xla_flags.use_classic_cpu_emitters(env)
    assert env["XLA_FLAGS"].split() == [
        "--xla_force_host_platform_device_count=4",
        "--xla_cpu_use_fusion_emitters=false",
    ]
    assert not _xla_flags.use_classic_cpu_emitters(env)  # idempotent: already there
    assert env["XLA_FLAGS"].count("fusion_emitters") == 1


@pytest.mark.parametrize("version", ["0.9.1", "0.11.0", "1.0.0", "dev"])
def test_untested_jaxlib_leaves_xla_flags_alone(monkeypatch, version):
    """An unknown flag in XLA_FLAGS aborts the process: never added for an untested jaxlib."""
    monkeypatch.setattr(jaxlib, "__version__", version)
    env = {}
    assert not _xla_flags.use_classic_cpu_emitters(env)
    assert env == {}
