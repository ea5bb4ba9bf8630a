"""The peers comparison as a picture: p50 latency and throughput per system.

matplotlib is an optional extra (`pip install -e '.[plot]'`); without it the
tables are all there is.
"""

from __future__ import annotations

from pathlib import Path

LATENCY = "`true` p50 ms"
THROUGHPUT = "zeros through, MB/s"
EXACT = "zeros byte-exact"
UNRANKED = "not ranked:\nbytes lost\nor unchecked"


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
        # A system whose zeros were not all there gets no bar, and says why: its
        # figure is not a throughput.
        ranked = [metric != THROUGHPUT or results[system].get(EXACT) == 1 for system in systems]
        values = [
            results[system].get(metric, 0.0) if ok else 0.0
            for system, ok in zip(systems, ranked, strict=True)
        ]
        bars = axis.bar(systems, values, color=["#2b6cb0"] + ["#a0aec0"] * (len(systems) - 1))
        labels = [
            f"{value:.3g}" if ok else UNRANKED for value, ok in zip(values, ranked, strict=True)
        ]
        axis.bar_label(bars, labels=labels)
        axis.set_title(title, fontsize=10)
        axis.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return None
