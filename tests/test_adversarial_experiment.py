"""`gcc-jax adversarial` at toy size: the JSON record, the slopes, LCC-EC exactness, the CLI."""

import json

import numpy as np
import pytest

from gcc_jax.cli import main
from gcc_jax.experiments import adversarial


def test_run_toy_and_report(tmp_path):
    res = adversarial.run_adversarial(
        **(
            adversarial.TOY
            | dict(
                exponents=(0.0,),
                decoders=("gcc", "lcc-ec"),
                strategies=("max", "pgd"),
                constants=(1e-3,),
            )
        ),
        seed=0,
        progress=False,
    )
    r = res.results
    # every rate row's worst is the max over its strategies; slopes refit from the rows
    for row in r["rows"]:
        assert row["worst"] == max(row["by_strategy"].values())
    n = [row["N"] for row in r["rows"]]
    slope = np.polyfit(np.log(n), np.log([row["worst"] for row in r["rows"]]), 1)[0]
    assert (
        r["fits"][0]["slope"] == np.float64(slope).item()
        or abs(r["fits"][0]["slope"] - slope) < 1e-12
    )
    assert r["fits"][0]["theory_slope"] == -1.2
    # LCC with error correction recovers the cubic exactly whatever the adversary does
    lcc = [t for t in r["table"] if t["decoder"] == "lcc-ec"]
    assert lcc and lcc[0]["worst"] < 1e-20
    # the gradient attack is at least as strong as the fixed one on the linear decoder
    gcc_row = [t for t in r["table"] if t["decoder"] == "gcc"][0]
    assert gcc_row["pgd"] >= gcc_row["max"] * (1 - 1e-9)
    text = adversarial.format_adversarial_table(res)
    assert "6/5 (a − 1)" in text and "lcc-ec" in text
    paths = adversarial.save_adversarial(res, tmp_path)
    rec = json.loads(paths["json"].read_text())
    assert rec["experiment"] == "adversarial" and rec["schema_version"] >= 1
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
