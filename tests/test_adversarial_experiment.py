"""`gcc-jax adversarial` at toy size: the JSON record, the slopes, LCC-EC exactness, the CLI."""

import json

import numpy as np
import pytest

from gcc_jax.experiments import adversarial
from gcc_jax.experiments.cli import main


def test_run_toy_and_report(tmp_path):
    res = adversarial.run_adversarial(
        **(
            adversarial.TOY
            | dict(
                exponents=(0.0,),
                decoders=("gcc", "lcc-ec"),
                strategies=("max", "targeted"),
                constants=(1e-3,),
            )
        ),
        seed=0,
        progress=False,
    )
    r = res.results
    # every rate row's worst is the max over its strategies
    for row in r["rows"]:
        assert row["worst"] == max(row["by_strategy"].values())
        assert set(row["by_strategy"]) == {"max", "targeted"}
    # slope: refit with NumPy; its bootstrap interval lies within the slopes of the curves a
    # resample of 2 jobs can give (job 0, job 1, their mean)
    n = np.log([row["N"] for row in r["rows"]])
    per = np.array([row["worst_trials"] for row in r["rows"]]).T  # (jobs, N)
    fit = r["fits"][0]
    assert fit["slope"] == pytest.approx(np.polyfit(n, np.log(per.mean(0)), 1)[0], abs=1e-12)
    possible = [np.polyfit(n, np.log(c), 1)[0] for c in (per[0], per[1], per.mean(0))]
    assert fit["slope_ci"] is None  # two N: a line through two points has no interval
    _, lo, hi = adversarial.slope_with_ci(np.exp(n), per)
    assert min(possible) - 1e-12 <= lo <= hi <= max(possible) + 1e-12
    assert fit["theory_slope"] == -1.2
    # every decoder against every adversary: each strategy at its own positions, each value
    # strategy also at the searched worst positions
    for row in r["table"]:
        for col in ("clean", "max", "targeted", "max@worst"):
            assert np.isfinite(row[col]), (row["decoder"], col)
        assert row["worst"] == max(row[c] for c in ("max", "targeted", "max@worst"))
    # LCC with error correction recovers the cubic exactly whatever the adversary does
    lcc = [t for t in r["table"] if t["decoder"] == "lcc-ec"]
    assert lcc and lcc[0]["worst"] < 1e-20
    gcc_row = [t for t in r["table"] if t["decoder"] == "gcc"][0]
    assert gcc_row["targeted"] > gcc_row["clean"]
    text = adversarial.format_adversarial_table(res)
    assert "6/5 (a − 1)" in text and "lcc-ec" in text and "max@worst" in text
    paths = adversarial.save_adversarial(res, tmp_path)
    rec = json.loads(paths["json"].read_text())
    assert rec["experiment"] == "adversarial" and rec["schema_version"] >= 1
    assert rec["results"]["table"][0]["max@worst"] == r["table"][0]["max@worst"]
    assert paths["plot"].stat().st_size > 0


def test_cli_toy(tmp_path, capsys):
    code = main(
        [
            "adversarial", "--toy", "--out", str(tmp_path), "--no-progress",
            "--decoders", "gcc", "--strategies", "max", "--exponents", "0",
        ]
    )  # fmt: skip
    assert code == 0
    assert "decoder × adversary" in capsys.readouterr().out
    assert (tmp_path / "adversarial.json").exists()
    with pytest.raises(SystemExit) as exit_info:  # the subcommand's usage error, exit code 2
        main(["adversarial", "--toy", "--decoders", "nope", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "unknown name 'nope'" in capsys.readouterr().err


def test_ctrl_c_saves_the_finished_rows(monkeypatch, tmp_path, capsys):
    """Ctrl-C in the table (after the calibration and the rates): exit 130, the calibration and
    every rate row saved in the one schema, flagged interrupted, with their slope; no table."""
    real, calls = adversarial._losses, []

    def interrupt_in_table(*args, **kwargs):
        calls.append(1)
        if len(calls) > 2 * 2 + 2 * 2:  # 2 constants x 2 functions, then N = 12, 24 x 2 jobs
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(adversarial, "_losses", interrupt_in_table)
    argv = ["adversarial", "--toy", "--no-progress", "--out", str(tmp_path)]
    argv += ["--decoders", "gcc", "--strategies", "max", "--exponents", "0"]
    assert main(argv) == 130
    assert "interrupted; partial results written" in capsys.readouterr().err
    rec = json.loads((tmp_path / "adversarial.json").read_text())
    assert rec["schema_version"] >= 1 and rec["config"]["interrupted"] is True
    res = rec["results"]
    assert list(res["calibration"]) == ["xsinx", "cubic"]
    assert [row["N"] for row in res["rows"]] == [12, 24] and res["table"] == []
    (fit,) = res["fits"]
    n = np.log([12, 24])
    per = np.log([row["worst"] for row in res["rows"]])
    assert fit["slope"] == pytest.approx((per[1] - per[0]) / (n[1] - n[0]), abs=1e-9)
    toy_note, first = (tmp_path / "adversarial.txt").read_text().splitlines()[:2]
    assert toy_note.startswith("TOY RUN") and first.startswith("INTERRUPTED")


def test_lenet5_job_calibrates_on_held_out_training_images(monkeypatch):
    """M and the constant c are calibrated on the model's held-out training images (purpose 1);
    the scored jobs (purpose 0) are test images."""
    import jax.numpy as jnp

    from gcc_jax.nn import training
    from gcc_jax.nn.data import load_digits
    from gcc_jax.nn.models import ModelApply

    class _Scaled(training.TrainedModel):
        def worker_fn(self, output="probs"):  # f(x) = (Σ x, ..., Σ x): cheap, known
            return lambda x: jnp.full((10,), jnp.sum(x))

    ds = load_digits()
    stub = _Scaled(
        ModelApply(None, "stub", (8, 8, 1), 10), {}, "lenet5", ds.name, 0.5, 0.5, (),
        train_losses=(), num_steps=0, from_cache=True, cache_path=None, train_time_s=0.0,
        config={"val_fraction": 0.1, "seed": 0},
    )  # fmt: skip
    monkeypatch.setattr(training, "train_classifier", lambda *a, **kw: stub)
    job = adversarial._Job("lenet5", num_inputs=5, seed=3, lenet_epochs=1, progress=False)
    # the documented rules, by NumPy: train_classifier's validation split, 64 calibration images
    val = np.random.default_rng((0, 0x5EED)).permutation(ds.num_train)[: round(0.1 * 1437)]
    flat_val = ds.x_train[val].reshape(len(val), -1)
    calib = np.random.default_rng((3, 7)).choice(len(val), 64, replace=False)
    np.testing.assert_allclose(job.bound, 1.25 * flat_val[calib].sum(1).max(), rtol=1e-6)
    flat_test = ds.x_test.reshape(ds.num_test, -1)

    def rows_in(x, table):
        return (x.reshape(len(x), 1, -1) == table[None]).all(-1).any(-1)

    for trial in range(2):
        tune = job.inputs(3, trial, purpose=1).reshape(5, -1)
        scored = job.inputs(3, trial, purpose=0).reshape(5, -1)
        assert rows_in(tune, flat_val).all() and not rows_in(tune, flat_test).any()
        assert rows_in(scored, flat_test).all()
