"""Figures of robustness-bias curves: I_P(tau) of every partition member, one panel per distance estimator."""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.figure import Figure

from fairnas.robustness.bias import RobustnessBiasReport

MAX_LEGEND_ENTRIES = 12


def plot_curves(reports: Mapping[str, RobustnessBiasReport], partition: str) -> Figure:
    """One panel per estimator name in ``reports``: I_P(tau) of each member, sigma(P) in the legend."""
    figure = Figure(figsize=(4.5 * len(reports), 3.6), layout="constrained")
    axes = figure.subplots(1, len(reports), squeeze=False)[0]
    for axis, (method, report) in zip(axes, reports.items(), strict=True):
        sigma = dict(zip(report.scores["member"], report.scores["sigma"], strict=True))
        for member, curve in report.curves.groupby("member", sort=False):
            axis.plot(
                curve["tau"], curve["share"], drawstyle="steps-post", label=f"{member} (sigma {sigma[member]:+.3g})"
            )
        axis.set(
            title=f"{method}: robustness bias {report.robustness_bias:.3g}",
            xlabel="tau (L2, pixels in [0, 1])",
            ylabel="I_P(tau): share with d > tau",
            ylim=(0, 1.02),
        )
        if len(sigma) <= MAX_LEGEND_ENTRIES:
            axis.legend(title=partition, fontsize="small")
    return figure
