"""`gcc-jax run` (the coded-inference main job) and `gcc-jax demo`: output equals the library's.

`gcc-jax run --toy` against `run_dnn` is in tests/test_dnn.py, on the model that module trains.
"""

import json
import subprocess
import sys

import jax
import numpy as np
import pytest

import gcc_jax as gcc
from gcc_jax.experiments.cli import main
from gcc_jax.experiments.demo import smooth_map


def test_demo_writes_json_matching_a_loop(tmp_path, capsys):
    rc = main(
        [
            "demo",
            "-K",
            "4",
            "-N",
            "16",
            "-S",
            "0,3",
            "-M",
            "20",
            "--dim",
            "2",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--seed",
            "3",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "demo.json").read_text())
    assert result["experiment"] == "demo" and result["seeds"] == {"seed": 3}
    assert [r["stragglers"] for r in result["results"]["rows"]] == [0, 3]
    # recompute S = 3 independently: same seed schedule, a Python loop over masks
    key = jax.random.key(3)
    kx, km = jax.random.split(key)
    x = jax.random.uniform(kx, (4, 2), minval=-2.0, maxval=2.0)
    code = gcc.SplineCode.chebyshev(num_inputs=4, num_workers=16)
    masks = gcc.sample_masks(jax.random.fold_in(km, 1), 16, num=20, stragglers=3)
    fx = np.stack([np.asarray(smooth_map(v)) for v in x])
    losses = [
        np.sum((np.asarray(gcc.coded_apply(code, smooth_map, x, m)) - fx) ** 2) / 4 for m in masks
    ]
    row = result["results"]["rows"][1]
    np.testing.assert_allclose(row["mean_loss"], np.mean(losses), rtol=1e-8)
    np.testing.assert_allclose(row["worst_loss"], np.max(losses), rtol=1e-8)
    assert f"{row['mean_loss']:.3e}" in out


def test_demo_bad_arguments_give_clear_errors(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gcc_jax.experiments.cli",
            "demo",
            "-N",
            "10",
            "-S",
            "9",
            "--out",
            str(tmp_path),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "valid range 0 <= S <= N - 2 = 8" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "gcc_jax.experiments.cli", "demo", "-S", "a,b"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "comma-separated integers" in proc.stderr


def test_run_bad_arguments_give_clear_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "-N", "10", "-K", "4", "-S", "9", "--out", str(tmp_path), "--no-progress"])
    assert exit_info.value.code == 2
    assert "valid range 0 <= S <= N - 2 = 8" in capsys.readouterr().err
    assert main(["run", "--dataset", "mnist", "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "mnist" in err.lower() and "never downloads" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--codes", ""])
    assert exit_info.value.code == 2 and "expected at least one name" in capsys.readouterr().err
