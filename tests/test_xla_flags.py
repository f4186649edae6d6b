"""The command line's XLA flag: added for tested jaxlib versions only, the user's setting wins."""

import jaxlib
import pytest

from gcc_jax._core import xla_flags as _xla_flags


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


def test_toy_runs_compile_with_most_optimizations_off(monkeypatch, tmp_path, capsys):
    """`--toy` (compilation-bound) compiles with jax_disable_most_optimizations for the run only,
    except serve-bench (its toy run measures latencies); JAX_DISABLE_MOST_OPTIMIZATIONS wins."""
    import jax

    from gcc_jax.experiments import COMMANDS, cli

    monkeypatch.delenv("JAX_DISABLE_MOST_OPTIMIZATIONS", raising=False)
    monkeypatch.delenv("GCC_JAX_TOY", raising=False)
    seen = []
    demo = next(c for c in COMMANDS if c.name == "demo")

    def fake_run(command, config, args):
        assert command is demo
        seen.append(jax.config.read("jax_disable_most_optimizations"))
        raise KeyboardInterrupt  # stop before any compute; exit status 130

    monkeypatch.setattr(cli, "_run_command", fake_run)
    before = jax.config.read("jax_disable_most_optimizations")
    try:
        jax.config.update("jax_disable_most_optimizations", False)
        argv = ["demo", "--out", str(tmp_path), "--no-progress"]
        assert cli.main([*argv, "--toy"]) == 130
        assert cli.main(argv) == 130
        monkeypatch.setenv("JAX_DISABLE_MOST_OPTIMIZATIONS", "0")  # the user's choice wins
        assert cli.main([*argv, "--toy"]) == 130
        assert seen == [True, False, False]
        assert jax.config.read("jax_disable_most_optimizations") is False  # restored after the run
    finally:
        jax.config.update("jax_disable_most_optimizations", before)
    serve = next(c for c in COMMANDS if c.name == "serve-bench")
    assert not serve.fast_toy_compile and all(
        c.fast_toy_compile for c in COMMANDS if c.name != "serve-bench"
    )


def test_add_xla_flags_keeps_the_users_setting_of_each_flag(monkeypatch):
    monkeypatch.setattr(jaxlib, "__version__", "0.10.2")
    env = {"XLA_FLAGS": "--xla_cpu_parallel_codegen_split_count=8"}
    added = _xla_flags.add_xla_flags(_xla_flags.FLAG, _xla_flags.SERIAL_CODEGEN, environ=env)
    assert added == (_xla_flags.FLAG,)
    assert env["XLA_FLAGS"].split() == ["--xla_cpu_parallel_codegen_split_count=8", _xla_flags.FLAG]
    assert _xla_flags.add_xla_flags(_xla_flags.FLAG, environ=env) == ()  # idempotent
    monkeypatch.setattr(jaxlib, "__version__", "0.11.0")
    assert _xla_flags.add_xla_flags(_xla_flags.SERIAL_CODEGEN, environ={}) == ()


def test_the_suite_runs_with_its_xla_flags():
    """conftest.py set both flags before JAX started (for an untested jaxlib it adds none:
    test_untested_jaxlib_leaves_xla_flags_alone)."""
    import os

    flags = os.environ.get("XLA_FLAGS", "")
    if _xla_flags.jaxlib_is_tested():
        for flag in (_xla_flags.FLAG, _xla_flags.SERIAL_CODEGEN):  # ours, or the user's setting
            assert flag.split("=", 1)[0].lstrip("-") in flags, flag
