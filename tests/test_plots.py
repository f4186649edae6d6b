"""`gcc_jax.experiments._plots` and `_summary`: the shared plotting and verdict rules."""

import numpy as np
import pytest

from gcc_jax.experiments._io import new_figure
from gcc_jax.experiments._plots import annotate_cells, bounded_errorbar, positive
from gcc_jax.experiments._summary import difference_verdict, format_bounded, ratio_verdict


def test_heat_map_labels_are_dark_on_light_cells_and_white_on_dark_ones():
    fig, ax = new_figure()
    values = np.array([[0.0, 1.0], [np.nan, 0.5]])
    image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0)  # dark purple .. yellow
    annotate_cells(ax, values, [["low", "high"], ["nan", "mid"]], image)
    colors = {t.get_text(): t.get_color() for t in ax.texts}
    assert colors == {"low": "white", "high": "black", "mid": "white"}  # NaN: no label


def test_round_off_values_do_not_set_a_log_axis():
    fig, ax = new_figure()
    y, label = positive([1e-3, 2e-17, 5e-3], "uncoded", roundoff=1e-9)
    ax.semilogy([0, 1, 2], y)
    assert ax.get_ylim()[0] > 1e-5 and "1 at round-off" in label


def test_accuracy_interval_is_clipped_to_zero_one_and_labelled():
    fig, ax = new_figure()
    bounded_errorbar(ax, [0], [0.625], [1.5883], "GCC")
    lo, hi = ax.get_ylim()
    assert -0.05 <= lo and hi <= 1.05
    assert format_bounded(0.625, 1.5883) == "0.6250 [0.0000, 1.0000]"


@pytest.mark.parametrize(
    ("ratio", "ci", "verdict"),
    [
        (1e15, 3e15, "inconclusive"),
        (1.0, 0.1, "tied"),
        (0.2, 0.1, "lower"),
        (5.0, 1.0, "higher"),
        (1.2, 0.9, "inconclusive"),
        (float("nan"), 0.1, "inconclusive"),
    ],
)
def test_a_ratio_is_tied_only_inside_the_margin(ratio, ci, verdict):
    assert ratio_verdict(ratio, ci) == verdict


def test_a_difference_is_tied_only_inside_the_margin():
    assert difference_verdict(0.2, 0.3, margin=1.0) == "tied"
    assert difference_verdict(0.2, 5.0, margin=1.0) == "inconclusive"
    assert difference_verdict(-2.0, 1.0, margin=1.0) == "worse"


def test_serve_plot_gives_each_scheme_one_colour_and_no_overlapping_point_labels():
    from gcc_jax.experiments import serve
    from gcc_jax.experiments._io import ExperimentResult

    rng = np.random.default_rng(0)
    schemes = {}
    for name in ("uncoded", "equal", "parm", "gcc"):
        lat = 10.0 + rng.exponential(5.0, 200)
        schemes[name] = {
            "latencies_ms": lat.tolist(),
            "predictions": [1] * 200,
            "p999_ms": float(np.quantile(lat, 0.999)),
            "accuracy": 0.95,  # equal accuracies and close tails: labels would overlap
        }
    result = ExperimentResult(
        "serve_bench",
        {"dataset": "digits", "num_inputs": 2, "groups": 2, "rate": 120.0},
        {"seed": 0},
        {},
        {"schemes": schemes, "model": {"name": "mlp"}},
        toy=False,
    )
    fig = serve.plot_serve(result)
    cdf, tail, acc = fig.axes[:3]
    assert not acc.texts  # legend entries instead of labels on the points
    for i, name in enumerate(schemes):
        colours = {cdf.lines[i].get_color(), tail.lines[i].get_color(), acc.lines[i].get_color()}
        assert colours == {serve.SCHEME_COLORS[name]}
        assert acc.get_legend_handles_labels()[1][i].startswith(f"{name}: p99.9 ")
    assert len(set(serve.SCHEME_COLORS.values())) == len(serve.SCHEME_COLORS)


def test_lines_drawn_after_a_bounded_errorbar_still_scale_the_axis():
    # the run plot draws the worst case after the random-pattern bars: it must stay in view
    fig, ax = new_figure()
    bounded_errorbar(ax, [0, 1], [0.95, 0.9], [0.02, 0.03], "GCC")
    ax.plot([0, 1], [0.95, 0.55], "--")
    assert ax.get_ylim()[0] < 0.55
    bounded_errorbar(ax, [0], [1.2], [0.5], "RelAcc", hi=float("inf"))
    assert ax.get_legend_handles_labels()[1][-1] == "RelAcc, 95% CI clipped at 0"


def test_a_series_that_is_all_round_off_is_masked_against_the_axis():
    # replication's errors with every copy alive are 1e-17: round-off next to the panel's 1e-2
    y, label = positive([1e-17, 3e-18], "replication", roundoff=1e-12, reference=1e-2)
    assert np.isnan(y).all() and label == "replication (2 at round-off: not drawn)"
    y, _ = positive([1e-17, 3e-18], "replication", roundoff=1e-12)  # against itself: kept
    assert np.isfinite(y).all()
