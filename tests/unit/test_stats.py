"""The figures: counted once each, durations cumulative, every label a fixed word."""

from bashrpc.protocol.methods import CommandsFinished, Kills
from bashrpc.server.observe import prometheus
from bashrpc.server.observe.stats import DURATION_BOUNDS, Gauges, Stats

NOTHING_ALIVE = Gauges(
    connections=0,
    tenants=0,
    sessions=0,
    shells=0,
    commands_running=0,
    commands_queued=0,
    jobs=0,
    replay_bytes=0,
)


def test_each_outcome_counts_once_and_ends_by_timeout_or_cancel_count_as_kills() -> None:
    stats = Stats()
    for outcome in ("ok", "ok", "failed", "timed_out", "cancelled", "sandbox_denied"):
        stats.started()
        stats.finished_as(outcome, 0.001, 10)
    stats.killed("reset", 3)
    figures = stats.figures(NOTHING_ALIVE)
    assert figures.commands_started == 6
    assert figures.commands_finished == CommandsFinished(
        ok=2, failed=1, cancelled=1, timed_out=1, sandbox_denied=1
    )
    assert figures.kills == Kills(timeout=1, cancel=1, reset=3)
    assert figures.output_bytes == 60


def test_durations_are_cumulative_per_bound_and_the_longest_only_in_the_count() -> None:
    stats = Stats()
    for seconds in (0.001, 0.005, 0.2, 7200.0):
        stats.finished_as("ok", seconds, 0)
    histogram = stats.histogram()
    assert histogram.bounds == list(DURATION_BOUNDS)
    by_bound = dict(zip(histogram.bounds, histogram.counts, strict=True))
    # A bound holds what took at most that long: 0.005 s falls in its own bucket.
    assert by_bound[0.005] == 2
    assert by_bound[0.1] == 2 and by_bound[0.25] == 3
    assert by_bound[3600.0] == 3 and histogram.count == 4
    assert histogram.sum == 0.001 + 0.005 + 0.2 + 7200.0


def test_the_rc_capture_fails_until_one_succeeds_again() -> None:
    stats = Stats()
    stats.rc_captured(ok=False)
    stats.rc_captured(ok=False)
    assert stats.rc_capture_failing and stats.rc_capture_failures == 2
    stats.rc_captured(ok=True)
    assert not stats.rc_capture_failing and stats.rc_capture_failures == 2


def _series(text: str) -> set[str]:
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}


def test_the_prometheus_series_are_the_same_however_much_is_counted() -> None:
    stats = Stats()
    before = _series(prometheus.render(lambda: stats.figures(NOTHING_ALIVE)).decode())
    for i in range(1000):
        stats.started()
        stats.finished_as(("ok", "failed", "timed_out")[i % 3], i / 100, i)
        stats.resumed(gap=i % 2 == 0)
        # Whatever host a connection went to, its series are the decision's alone.
        stats.network_connection(allowed=i % 4 == 0, sent=i, received=2 * i)
    text = prometheus.render(lambda: stats.figures(NOTHING_ALIVE)).decode()
    assert _series(text) == before
    assert 'bashrpc_network_connections_total{decision="refused"} 750.0' in text
    assert 'bashrpc_network_bytes_total{direction="received"} 999000.0' in text
    assert 'bashrpc_commands_finished_total{outcome="timed_out"} 333.0' in text
    assert 'bashrpc_resumes_total{result="gap"} 500.0' in text
    assert "bashrpc_command_duration_seconds_count 1000.0" in text
