"""When tracing is on: an `OTEL_*` variable, unless the SDK is disabled or the exporter is none."""

import pytest

from bashrpc.server.observe import traces


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"PATH": "/bin"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, False),
    ],
)
def test_tracing_is_wanted_only_when_asked(environ: dict[str, str], on: bool) -> None:
    assert traces.wanted(environ) is on


def test_an_unknown_exporter_makes_no_spans_rather_than_fail() -> None:
    assert traces.wrapper({"OTEL_TRACES_EXPORTER": "carrier-pigeon"}) is None
