"""`gcc-jax run`: the table and the JSON hold the losses a plain loop computes."""

import json
import subprocess
import sys

import jax
import numpy as np

import gcc_jax as gcc
from gcc_jax.cli import main
from gcc_jax.experiments.demo import smooth_map


def test_run_writes_json_matching_a_loop(tmp_path, capsys):
    rc = main(
        [
            "run",
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
    assert [r["stragglers"] for r in result["rows"]] == [0, 3]
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
    row = result["rows"][1]
    np.testing.assert_allclose(row["mean_loss"], np.mean(losses), rtol=1e-8)
    np.testing.assert_allclose(row["worst_loss"], np.max(losses), rtol=1e-8)
    assert f"{row['mean_loss']:.3e}" in out


def test_bad_arguments_give_clear_errors(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gcc_jax.cli",
            "run",
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
    assert "every S must be in [0, N-2]" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "gcc_jax.cli", "run", "-S", "a,b"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "comma-separated integers" in proc.stderr
