"""The peers comparison as a picture: p50 latency and throughput per system.

matplotlib is an optional extra (`pip install -e '.[plot]'`); without it the
tables are all there is.
"""

from __future__ import annotations

from pathlib import Path

LATENCY = "`true` p50 ms"
THROUGHPUT = "zeros through, MB/s"
EXACT = "zeros byte-exact"


def plot(systems: list[str], results: dict[str, dict[str, float]], path: Path) -> str | None:
    """Write the figure; None, or why it was not written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[plot]'): no plot"
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    for axis, metric, title in (
        (left, LATENCY, "builtin `true`, p50 (ms, lower is better)"),
        (right, THROUGHPUT, "zeros through the tool (MB/s, higher is better)"),
    ):
        # A system whose zeros were not all there gets no bar: its figure is not a throughput.
        values = [
            results[system].get(metric, 0.0)
            if metric != THROUGHPUT or results[system].get(EXACT) == 1
            else 0.0
            for system in systems
        ]
        bars = axis.bar(systems, values, color=["#2b6cb0"] + ["#a0aec0"] * (len(systems) - 1))
        axis.bar_label(bars, fmt="%.3g")
        axis.set_title(title, fontsize=10)
        axis.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return None
