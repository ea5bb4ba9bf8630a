import msgspec
import pytest

from bashrpc.protocol.mcp import HostOptions, UiSize
from bashrpc.server.services.tool.plan import wants_pty
from bashrpc.server.settings import BashSettings, Settings

ON = msgspec.structs.replace(Settings(), bash=BashSettings(virtual_terminal="on"))
UI = HostOptions(ui=UiSize(cols=80, rows=24))


def test_all_three_conditions_select_the_pty() -> None:
    assert wants_pty(ON, {}, UI)


@pytest.mark.parametrize(
    ("settings", "environ", "host"),
    [
        (Settings(), {}, UI),  # virtualTerminal off
        (ON, {"BASHRPC_NO_PTY": "1"}, UI),
        (ON, {"PI_NO_PTY": "1"}, UI),
        (ON, {}, HostOptions()),  # no ui declared
    ],
)
def test_each_condition_off_selects_pipes(
    settings: Settings, environ: dict[str, str], host: HostOptions
) -> None:
    assert not wants_pty(settings, environ, host)


def test_other_values_do_not_veto() -> None:
    assert wants_pty(ON, {"BASHRPC_NO_PTY": "0", "PI_NO_PTY": ""}, UI)
