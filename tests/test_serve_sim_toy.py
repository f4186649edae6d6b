"""``gcc-jax serve-sim --toy`` end to end (about half a minute: trains a classifier and a parity
model; `make test-integration`): the record's validation table, gap ratios, claim and ranking
recomputed from its own numbers."""

import json
import math

import numpy as np
import pytest


def test_serve_sim_toy_run(tmp_path):
    from gcc_jax.experiments.cli import main

    out = tmp_path / "out"
    assert main(["serve-sim", "--toy", "--out", str(out), "--no-progress"]) == 0
    record = json.loads((out / "serve_sim.json").read_text())
    res, cfg = record["results"], record["config"]
    assert (out / "serve_sim.png").stat().st_size > 0
    text = (out / "serve_sim.txt").read_text()
    # validation: the Erlang C closed form, recomputed here
    mm1 = res["validation"][0]
    assert mm1["system"] == "M/M/1, rho=0.5"
    assert mm1["theory_ms"] == pytest.approx(20.0)  # 1 / (mu - lambda) with mu = 100 /s
    assert mm1["rel_error"] == pytest.approx(mm1["model_ms"] / mm1["theory_ms"] - 1.0)
    for row in res["validation"]:
        assert abs(row["rel_error"]) < max(3 * row["ci95_rel"], 0.02), row
    assert len(res["cells"]) == len(cfg["ks"]) * len(cfg["loads"]) * len(cfg["fractions"])
    for cell in res["cells"]:
        sch = cell["schemes"]
        for name, st in sch.items():
            ratio = np.asarray(sch["equal"]["per_seed_gap_ms"]) / np.asarray(st["per_seed_gap_ms"])
            assert st["gap_ratio"]["mean"] == pytest.approx(ratio.mean())
            assert st["gap_ratio"]["lo"] <= st["gap_ratio"]["mean"] <= st["gap_ratio"]["hi"]
            assert 0.0 <= st["accuracy"] <= 1.0 and 0.0 <= st["answered"] <= 1.0
        line = next(x for x in text.splitlines() if x.startswith(f"  k={cell['k']} bg="))
        for name, st in sch.items():  # ranked only with >= 99% answered
            ranked = f"not ranked: {name}" not in line and f" {name} (answered" not in line
            assert ranked == (st["answered"] >= 0.99), (name, line)
    parm = [c["schemes"]["parm"]["gap_ratio"]["mean"] for c in res["cells"]]
    assert res["claim"]["largest"]["mean"] == pytest.approx(max(parm))
    assert res["claim"]["smallest_mean"] == pytest.approx(min(parm))
    assert math.isfinite(res["accuracy_tables"]["base"])
