"""`gcc-jax` argument handling, checked before any compute.

Every invalid argument exits with code 2 and an ``error:`` line naming the flag and its valid
range, under the *subcommand's* usage; nothing runs first (the run function is replaced by one
that fails the test). Toy mode is one convention: ``--toy`` or ``GCC_JAX_TOY=1`` on every
subcommand, explicit flags always win.
"""

import argparse
import os
import subprocess
import sys

import pytest

import gcc_jax
from gcc_jax.experiments import COMMANDS, cli

NAMES = [c.name for c in COMMANDS]


@pytest.fixture
def no_compute(monkeypatch):
    """Fail the test if any experiment starts; record the settings it would have run with."""
    seen = {}

    def refuse(command, config, args):
        seen["config"] = config
        raise AssertionError(f"{command.name} started computing despite invalid arguments")

    monkeypatch.setattr(cli, "_run_command", refuse)
    monkeypatch.delenv("GCC_JAX_TOY", raising=False)
    return seen


def _fails(argv, flag, capsys, tmp_path, *, needs_out=True, text=None):
    argv = [*argv, "--out", str(tmp_path / "out")] if needs_out else list(argv)
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert f"usage: gcc-jax {argv[0]}" in err, err  # the subcommand's usage, not the top level
    line = next(ln for ln in err.splitlines() if "error:" in ln)
    assert line.startswith(f"gcc-jax {argv[0]}: error:"), line
    assert flag in line, line
    if text is not None:
        assert text in line, line
    assert "Traceback" not in err
    return line


BAD = [
    # the shared size rules, identical everywhere: 2 <= K <= N, 0 <= S <= N - 2
    (["demo", "-K", "30", "-N", "12"], "--num-inputs/-K", "2 <= K <= N"),
    (["run", "-K", "30", "-N", "12"], "--num-inputs/-K", "2 <= K <= N"),
    (["rates", "-K", "7", "-N", "5,60"], "--num-inputs/-K", "2 <= K <= N"),
    (
        ["serve-bench", "--sweep-inputs", "9", "--sweep-workers", "8"],
        "--sweep-inputs",
        "2 <= K <= N",
    ),
    (["demo", "-K", "4", "-N", "16", "-S", "0,15"], "--stragglers/-S", "0 <= S <= N - 2 = 14"),
    (["run", "-N", "10", "-K", "4", "-S", "9"], "--stragglers/-S", "0 <= S <= N - 2 = 8"),
    (["rates", "-N", "12,24", "-S", "11"], "--stragglers/-S", "0 <= S <= N - 2 = 10"),
    (
        ["serve-bench", "--sweep-workers", "6", "--sweep-inputs", "2", "--sweep-stragglers", "5"],
        "--sweep-stragglers",
        "N - 2 = 4",
    ),
    (["demo", "-N", "1"], "--workers/-N", ">= 2"),
    (["demo", "--num-workers", "1"], "--workers/-N", ">= 2"),  # the old name, an alias
    (["demo", "-K", "1"], "--num-inputs/-K", ">= 2"),
    (["poly", "--n-low", "3"], "--n-low", ">= K = 5"),
    (["poly", "--n-high", "8"], "--n-high", ">= K = 10"),
    # counts >= 1
    (["demo", "-M", "0"], "--masks/-M", ">= 1"),
    (["demo", "--dim", "0"], "--dim", ">= 1"),
    (["rates", "-M", "0"], "--masks/-M", ">= 1"),
    (["rates", "--restarts", "0"], "--restarts", ">= 1"),
    (["rates", "--draws", "1"], "--draws", ">= 2"),
    (["rates", "--noise", "-0.1"], "--noise", "[0, inf)"),
    (["regimes", "--ratios", "1.0,2"], "--ratios", "(1, inf)"),
    (["regimes", "--fractions", "0.1,1"], "--fractions", "[0, 1)"),
    (["regimes", "--workloads", "resnet"], "--workloads", "unknown name"),
    (["regimes", "-K", "1"], "--num-inputs/-K", ">= 2"),
    (["regimes", "--worst-batches", "0"], "--worst-case-batches", ">= 1"),
    (["poly", "--trials", "0"], "--masks/-M", ">= 1"),
    (["poly", "-M", "0"], "--masks/-M", ">= 1"),
    (["adversarial", "--jobs", "0"], "--jobs", ">= 1"),
    (["run", "--trials", "0"], "--masks/-M", ">= 1"),
    (["run", "-M", "0"], "--masks/-M", ">= 1"),
    (["run", "--batches", "0"], "--batches", ">= 1"),
    (["run", "--cv-batches", "0"], "--cv-batches", ">= 1"),
    (["run", "--epochs", "0"], "--epochs", ">= 1"),
    (["run", "--max-iters", "0"], "--max-iters", ">= 1"),
    (["serve-bench", "--queries", "0"], "--queries", ">= 1"),
    (["serve-bench", "--max-in-flight", "0"], "--max-in-flight", ">= 1"),
    (["compare-learned", "--code-epochs", "0"], "--code-epochs", ">= 1"),
    (["compare-learned", "-k", "1"], "--ks/-k", ">= 2"),
    (["tune", "--steps", "-1"], "--steps", ">= 0"),
    # numbers in their ranges; λ >= 0
    (["rates", "--p", "1.5"], "--p", "(0, 1)"),
    (["rates", "--lam-dec", "-1"], "--lam-dec", "[0, inf)"),
    (["demo", "--lam-enc", "nan"], "--lam-enc", "[0, inf)"),
    (["run", "--lam-dec-grid=0,-1e-6"], "--lam-dec-grid", "[0, inf)"),
    (["run", "--lr", "0"], "--lr", "(0, inf)"),
    (["serve-bench", "--rate", "0"], "--rate", "(0, inf)"),
    (["serve-bench", "--fail-prob", "1"], "--fail-prob", "[0, 1)"),
    (["serve-bench", "--straggle-prob", "2"], "--straggle-prob", "[0, 1]"),
    (["serve-bench", "--timeout", "0"], "--timeout", "(0, inf)"),
    (["serve-bench", "--lam-dec=-1e-6"], "--lam-dec", "[0, inf)"),
    # names
    (["rates", "--functions", "xsinx,nope"], "--functions", "'nope'"),
    (["run", "--codes", "gcc,nope"], "--codes", "'nope'"),
    (["serve-bench", "--schemes", "gcc,nope"], "--schemes", "'nope'"),
    (["serve-bench", "--release", "sometimes"], "--release", "'sometimes'"),
    (["serve-bench", "--groups", "0"], "--groups", ">= 1"),
    (["tune", "--workloads", "nope"], "--workloads", "'nope'"),
    (["tune", "--regimes", "nope"], "--regimes", "'nope'"),
    (["regimes", "--modes", "sometimes"], "--modes", "'sometimes'"),
    # checks a shared setting carries, and rules across settings
    (["serve-sim", "--ks", "1"], "--ks/-k", ">= 2"),
    (["serve-sim", "--slowdown", "0.5"], "--slowdown", "[1, inf)"),
    (["serve-bench", "--tail", "heavy"], "--tail", "'heavy'"),
    (["serve-sim", "--instances", "5", "--ks", "2"], "--instances", "multiple of every k"),
    # common flags
    (["demo", "--seed", "-1"], "--seed", ">= 0"),
    # empty items in a list
    (["demo", "-S", "1,,2"], "--stragglers/-S", "no empty item"),
    (["rates", "-N", "12,24,"], "--workers/-N", "no empty item"),
    (["rates", "--functions", "xsinx,,vector_map"], "--functions", "no empty item"),
    # a data set asked for by name is found before any compute (never replaced by another)
    (["compare-learned", "--dataset", "nope"], "--dataset", "'nope'"),
    (
        ["compare-learned", "--dataset", "fashion_mnist", "--data-path", "/nonexistent-gcc"],
        "--dataset",
        "--data-path",
    ),
    (["compare-learned", "--dataset", "mnist"], "--dataset", "pass --data-path"),
]


@pytest.mark.parametrize(("argv", "flag", "text"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_invalid_argument_fails_before_compute(argv, flag, text, no_compute, capsys, tmp_path):
    _fails(argv, flag, capsys, tmp_path, text=text)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("out", ["/proc/gcc-out", "/dev/null/sub"])
def test_unwritable_out_is_found_first(name, out, no_compute, capsys, tmp_path):
    line = _fails([name, "--out", out], "--out", capsys, tmp_path, needs_out=False)
    assert out in line


@pytest.mark.parametrize("name", NAMES)
def test_unknown_flag_shows_the_subcommand_usage(name, no_compute, capsys, tmp_path):
    line = _fails([name, "--bogus"], "--bogus", capsys, tmp_path)
    assert "unrecognized arguments" in line


@pytest.mark.parametrize("name", NAMES)
def test_toy_flag_and_environment_are_one_convention(name, no_compute, monkeypatch, tmp_path):
    """`--toy` and GCC_JAX_TOY=1 give the same settings, different from the full ones."""
    configs = {}
    for mode in ("full", "flag", "env"):
        if mode == "env":
            monkeypatch.setenv("GCC_JAX_TOY", "1")
        argv = [name, "--out", str(tmp_path), *(["--toy"] if mode == "flag" else [])]
        with pytest.raises(AssertionError, match="started computing"):
            cli.main(argv)
        configs[mode] = no_compute["config"]
        monkeypatch.delenv("GCC_JAX_TOY", raising=False)
    assert configs["flag"] == configs["env"]
    assert configs["flag"] != configs["full"]


@pytest.mark.parametrize(
    ("argv", "key", "value"),
    [
        (["rates", "--toy", "-K", "7", "-N", "30,60"], "num_inputs", 7),
        (["rates", "--toy", "-K", "7", "-N", "30,60"], "workers", (30, 60)),
        (["poly", "--toy", "--trials", "5"], "num_trials", 5),
        (["demo", "--toy", "-M", "7"], "num_masks", 7),
        (["run", "--toy", "-N", "12"], "num_workers", 12),
        (["serve-bench", "--toy", "--queries", "9"], "num_queries", 9),
    ],
)
def test_explicit_flags_win_over_toy(argv, key, value, no_compute, tmp_path):
    with pytest.raises(AssertionError, match="started computing"):
        cli.main([*argv, "--out", str(tmp_path)])
    assert no_compute["config"][key] == value


@pytest.mark.parametrize(
    ("argv", "old"),
    [
        (["demo", "--toy", "-N", "12"], ["demo", "--toy", "--num-workers", "12"]),
        (["demo", "--toy", "-M", "7"], ["demo", "--toy", "--trials", "7"]),
        (["poly", "--toy", "-M", "5"], ["poly", "--toy", "--trials", "5"]),
        (["adversarial", "--toy", "--jobs", "3"], ["adversarial", "--toy", "--trials", "3"]),
        (
            ["run", "--toy", "-N", "12", "-M", "3"],
            ["run", "--toy", "--num-workers", "12", "--trials", "3"],
        ),
        (
            ["regimes", "--toy", "-M", "3", "--worst-case-batches", "2"],
            ["regimes", "--toy", "--trials", "3", "--worst-batches", "2"],
        ),
        (
            ["compare-learned", "--toy", "--gcc-masks", "3"],
            ["compare-learned", "--toy", "--gcc-trials", "3"],
        ),
    ],
)
def test_old_flag_names_are_aliases(argv, old, no_compute, tmp_path):
    """A renamed flag's old name (kept for a release) sets the same run keyword."""
    configs = []
    for a in (argv, old):
        with pytest.raises(AssertionError, match="started computing"):
            cli.main([*a, "--out", str(tmp_path)])
        configs.append(no_compute["config"])
    assert configs[0] == configs[1]


@pytest.mark.parametrize("name", NAMES)
def test_shared_settings_have_one_flag_everywhere(name):
    """A setting shared by several commands (N, K, S, random straggler sets, data set, ...)
    is spelled as its shared flag first wherever a command takes it, by run keyword or by
    any of its names."""
    from gcc_jax.experiments._commands import _flags

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for action in sub.choices[name]._actions:
        for s in _flags.SETTINGS:
            names = {s.flag, *s.aliases} - {"--trials"}  # adversarial's --trials: its jobs
            if action.dest in s.keys or names & set(action.option_strings):
                assert action.option_strings[0] == s.flag, (name, action.option_strings)


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "-S", "1,,2"],
        ["demo", "-K", "30", "-N", "12"],
        ["rates", "--bogus"],
        ["compare-learned", "--dataset", "mnist"],
    ],
)
def test_a_rejected_command_leaves_no_out_folder(argv, no_compute, capsys, tmp_path):
    out = tmp_path / "new" / "results"
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--out", str(out)])
    assert info.value.code == 2
    assert not (tmp_path / "new").exists()


def test_a_missing_extra_stops_before_compute_naming_it(no_compute, monkeypatch, capsys, tmp_path):
    """A command declaring an extra (here: demo, given a made-up one) whose modules are not
    installed exits 2 before any compute, naming the extra to install."""
    import dataclasses

    from gcc_jax.experiments._commands import demo

    monkeypatch.setitem(cli.EXTRAS, "made-up", {"gcc_jax_no_such_module": "no-such-dist"})
    command = dataclasses.replace(demo.COMMAND, extras=("experiments", "made-up"))
    monkeypatch.setattr(cli, "COMMANDS", (command,))
    line = _fails(["demo", "--toy"], "no-such-dist", capsys, tmp_path)
    assert "pip install 'gcc_jax[made-up]'" in line
    assert not (tmp_path / "out").exists()


def test_every_declared_extra_is_known():
    for command in COMMANDS:
        assert set(command.extras) <= set(cli.EXTRAS), command.name


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gcc-jax {gcc_jax.__version__}"


def test_console_script_exit_code_and_stderr(tmp_path):
    """Through a real process: exit status 2, the message on stderr, nothing on stdout."""
    env = dict(os.environ, GCC_JAX_TOY="0")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gcc_jax.experiments.cli",
            "rates",
            "-K",
            "30",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "gcc-jax rates: error: argument --num-inputs/-K:" in proc.stderr


def test_every_flag_a_rule_names_exists_with_that_spelling():
    """The rules name flags as argparse does (``--num-inputs/-K``), and only real ones."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {c.name for c in COMMANDS} == set(sub.choices)
    for command in COMMANDS:
        subparser = sub.choices[command.name]
        labels = {  # a flag as errors name it: its name and short form, without old aliases
            "/".join(a.option_strings[:k])
            for a in subparser._actions
            for k in range(1, len(a.option_strings) + 1)
        }
        flags = [f for rule in command.rules for f in rule.flags]
        assert flags, command.name
        for flag in flags:
            assert flag in labels, f"{command.name}: a rule names {flag}; flags: {sorted(labels)}"


@pytest.mark.parametrize("command", COMMANDS, ids=NAMES)
def test_command_defaults_are_the_run_functions(command):
    """The defaults the rules check (kept apart so that no JAX is imported to check flags) are
    the run function's own keyword defaults, and cover every setting a rule reads."""
    import inspect

    params = inspect.signature(command.run.target).parameters
    for key, value in command.defaults.items():
        assert key in params, f"{command.name}: {key} is not a keyword of the run function"
        default = params[key].default
        if default is not None:  # None: the run function picks its own (e.g. a search budget)
            assert default == value or tuple(default) == tuple(value), (command.name, key)
    read = {key for rule in command.rules for key in rule.keys}
    assert read <= set(command.defaults) | {"settings", "stragglers"}, command.name


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_version_and_argument_errors_import_no_jax(tmp_path):
    """`gcc-jax --version` and argument errors (unknown flag, K > N, negative λ, a bad count)
    return before JAX (or NumPy) is imported."""
    code = f"""
import sys
from gcc_jax.experiments import cli
codes = []
for argv in (["--version"], ["demo", "--bogus"], ["demo", "-K", "30", "-N", "12"],
             ["rates", "--lam-dec-grid=0,-1"], ["serve-bench", "--queries", "0"],
             ["run", "--codes", "gcc,nope"]):
    try:
        cli.main([*argv, "--out", {str(tmp_path)!r}] if argv[0] != "--version" else argv)
    except SystemExit as stop:
        codes.append(stop.code)
print(codes, sorted(m for m in ("jax", "numpy", "matplotlib", "flax") if m in sys.modules))
"""
    proc = _run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[-2] == "[0, 2, 2, 2, 2, 2] []", proc.stdout


def test_experiments_package_imports_no_jax():
    """`import gcc_jax.experiments` lists the commands without importing JAX; the run
    functions load on first use."""
    proc = _run_python(
        "import sys, gcc_jax.experiments as e; names = [c.name for c in e.COMMANDS]; "
        "print(len(names), 'jax' in sys.modules); e.run_poly; print('jax' in sys.modules)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(len(NAMES)), "False", "True"]


@pytest.mark.parametrize("module", ["demo", "poly"])
def test_ctrl_c_saves_the_finished_part(module, monkeypatch, tmp_path, capsys):
    """An interrupt after the first measurement: exit 130, the finished rows saved, flagged."""
    import importlib
    import json

    mod = importlib.import_module(f"gcc_jax.experiments.{module}")
    real, calls = mod.monte_carlo_loss, []
    per_row = 1 if module == "demo" else 3  # poly measures GCC, BACC and LCC per S

    def interrupt_later(*args, **kwargs):
        calls.append(1)
        if len(calls) > per_row:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, "monte_carlo_loss", interrupt_later)
    rc = cli.main([module, "--toy", "--no-progress", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 130 and "interrupted; partial results written" in err
    saved = json.loads((tmp_path / f"{module}.json").read_text())
    assert saved["config"]["interrupted"] is True
    assert len(saved["results"]["rows"]) == per_row


@pytest.mark.parametrize(
    ("module", "name", "argv"),
    [
        ("rates", "_cv_lam_dec", ["rates"]),
        ("tune", "grid_search", ["tune", "--workloads", "xsinx"]),
        ("regimes", "grid_search", ["regimes", "--workloads", "xsinx", "--codes", "GCC,BACC"]),
        ("learned", "train_classifier", ["compare-learned"]),
    ],
)
def test_ctrl_c_before_the_first_measurement_saves_a_partial_record(
    module, name, argv, monkeypatch, tmp_path, capsys, recwarn
):
    """Ctrl-C at the first step of a longer experiment (the one StopOnInterrupt mechanism):
    exit 130, and the JSON record is written in the one schema, flagged interrupted, with
    no measurement in it; its empty plot draws no legend (no matplotlib warning)."""
    import importlib
    import json

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(f"gcc_jax.experiments.{module}"), name, interrupt)
    rc = cli.main([*argv, "--toy", "--no-progress", "--out", str(tmp_path)])
    assert rc == 130 and "interrupted; partial results written" in capsys.readouterr().err
    record = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert record["schema_version"] == 1 and record["config"]["interrupted"] is True
    results = record["results"]
    assert not results.get("rows") and not results.get("cells")
    assert not [w for w in recwarn if "No artists with labels" in str(w.message)]


def test_progress_goes_to_stderr_only(capsys):
    """Per-measurement progress lines are on stderr; stdout stays for results."""
    from gcc_jax.experiments.poly import run_poly

    # the toy setting (deg 3, K = 5, N = 20): the compiled programs of the poly test above serve
    run_poly(settings=((3, 5, 20),), stragglers=(0,), num_trials=2, progress=True)
    captured = capsys.readouterr()
    assert "deg= 3 K= 5 N= 20 S=  0" in captured.err
    assert captured.out == ""


def test_command_name_lists_match_the_experiments():
    """The names a command accepts are the ones its experiment knows."""
    from gcc_jax.experiments import adversarial, rates
    from gcc_jax.experiments._commands import _flags
    from gcc_jax.experiments._commands import adversarial as adversarial_command
    from gcc_jax.experiments._commands import rates as rates_command
    from gcc_jax.nn.models import MODEL_NAMES

    assert tuple(rates.FUNCTIONS) == rates_command.FUNCTION_NAMES
    assert _flags.MODELS == MODEL_NAMES  # what `--model` lists, the names `make_model` accepts
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = [
        a.help for p in sub.choices.values() for a in p._actions if "--model" in a.option_strings
    ]
    assert helps and all(name in text for text in helps for name in MODEL_NAMES), helps
    assert set(adversarial_command.FUNCTION_NAMES) == {*adversarial._ANALYTIC, "lenet5"}


def test_search_budgets_of_the_commands_are_what_they_say():
    """``run``'s budget is the library's default search (written out so that parsing imports no
    JAX); the regime map's is larger in every dimension."""
    from gcc_jax.evaluation import DEFAULT_SEARCH
    from gcc_jax.experiments._commands.dnn import RUN_SEARCH
    from gcc_jax.experiments._commands.regimes import REGIMES_SEARCH

    assert RUN_SEARCH == {k: getattr(DEFAULT_SEARCH, k) for k in RUN_SEARCH}
    assert set(REGIMES_SEARCH) == set(RUN_SEARCH)
    assert all(REGIMES_SEARCH[k] > RUN_SEARCH[k] for k in RUN_SEARCH)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="counts Linux memory maps")
def test_release_compiled_programs_unmaps_what_xla_compiled():
    """Each compiled CPU program holds memory mappings until JAX drops it; releasing the compiled
    programs gives them back (a process may hold at most vm.max_map_count of them)."""
    import jax
    import jax.numpy as jnp

    from gcc_jax.experiments._command import release_compiled_programs

    def count():
        with open("/proc/self/maps") as maps:
            return sum(1 for _ in maps)

    release_compiled_programs()
    before = count()
    fns = [jax.jit(lambda x, i=i: jnp.cumsum(x) * i) for i in range(40)]
    for i, fn in enumerate(fns):
        fn(jnp.ones(i + 1)).block_until_ready()
    grown = count() - before
    assert grown >= 40  # at least one mapping per program (about 20 on XLA's CPU backend)
    release_compiled_programs()
    assert count() - before < grown / 4
