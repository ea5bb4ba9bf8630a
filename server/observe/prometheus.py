"""The figures in Prometheus' text format, through `prometheus_client` (the
`metrics` extra): each scrape renders one `ServerStatsResult`, so `/metrics`
and `server/stats` can never disagree."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from bashrpc.protocol.methods import ServerStatsResult

PREFIX = "bashrpc_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

GAUGES = {
    "connections": "Connections being served now.",
    "tenants": "Tenants (a clientId's or a scope's sessions) alive now.",
    "sessions": "Sessions now.",
    "shells": "Persistent shells running now.",
    "commands_running": "Commands running now.",
    "commands_queued": "Commands waiting for their session's turn now.",
    "jobs": "Background jobs (terminal/*) running now.",
    "replay_bytes": "Bytes held in replay rings for bash/attach.",
}
COUNTERS = {
    "commands_started": "Commands started.",
    "output_bytes": "Bytes commands printed.",
    "rc_capture_failures": "Captures of the user's rc that failed or timed out.",
    "log_lines_dropped": "Log lines dropped because stderr was not read fast enough.",
}


def available() -> bool:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


def render(figures: Callable[[], ServerStatsResult]) -> bytes:
    """One scrape: the text format of what `figures` gives now."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(figures))
    return bytes(generate_latest(registry))


class _Collector:
    def __init__(self, figures: Callable[[], ServerStatsResult]) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        now = self._figures()
        for name, text in GAUGES.items():
            yield GaugeMetricFamily(PREFIX + name, text, value=getattr(now, name))
        for name, text in COUNTERS.items():
            yield CounterMetricFamily(PREFIX + name, text, value=getattr(now, name))
        labelled = [
            (
                "commands_finished",
                "Commands finished, by outcome.",
                "outcome",
                now.commands_finished,
            ),
            ("kills", "Commands and processes killed, by reason.", "reason", now.kills),
            ("resumes", "bash/attach resumes, by result.", "result", now.resumes),
            (
                "network_connections",
                "Connections through the sandbox's network allowlist, by decision.",
                "decision",
                now.network_connections,
            ),
            (
                "network_bytes",
                "Bytes through the sandbox's network allowlist, by direction.",
                "direction",
                now.network_bytes,
            ),
        ]
        for name, text, label, values in labelled:
            family = CounterMetricFamily(PREFIX + name, text, labels=[label])
            for field in values.__struct_fields__:
                family.add_metric([field], getattr(values, field))
            yield family
        histogram = now.command_seconds
        buckets = [(_bound(b), c) for b, c in zip(histogram.bounds, histogram.counts, strict=True)]
        buckets.append(("+Inf", histogram.count))
        yield HistogramMetricFamily(
            PREFIX + "command_duration_seconds",
            "How long commands took.",
            buckets=buckets,
            sum_value=histogram.sum,
        )


def _bound(seconds: float) -> str:
    return repr(float(seconds))
