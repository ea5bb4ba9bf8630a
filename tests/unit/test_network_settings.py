"""`[sandbox.network]` as the settings file gives it: the table, the old booleans,
and a bad entry named at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashrpc.server.settings import SandboxSettings, SettingsError, load


def _loaded(tmp_path: Path, text: str) -> SandboxSettings:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return load(path).sandbox


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("[sandbox]\n", "off"),
        ("[sandbox]\nnetwork = false\n", "off"),
        ("[sandbox]\nnetwork = true\n", "host"),
        ('[sandbox.network]\nmode = "allowlist"\n', "allowlist"),
    ],
)
def test_the_booleans_are_the_modes_aliases(tmp_path: Path, text: str, mode: str) -> None:
    assert _loaded(tmp_path, text).net.mode == mode


def test_a_table_with_every_field(tmp_path: Path) -> None:
    sandbox = _loaded(
        tmp_path,
        '[sandbox]\nmode = "read-only"\n[sandbox.network]\nmode = "allowlist"\n'
        'allow = ["pypi.org", "*.example.org"]\ndeny = ["bad.example.org"]\n'
        "ports = [443]\nmaxConnections = 8\nidleSeconds = 30\n",
    )
    egress = sandbox.net.egress
    assert (egress.allow, egress.deny, egress.ports) == (
        ("pypi.org", "*.example.org"),
        ("bad.example.org",),
        (443,),
    )
    assert (egress.max_connections, egress.idle_seconds) == (8, 30)
    policy = sandbox.network_policy()
    assert (policy.mode, policy.ports) == ("allowlist", [443])


def test_unconfined_modes_have_the_hosts_network(tmp_path: Path) -> None:
    sandbox = _loaded(tmp_path, '[sandbox]\nmode = "full"\n[sandbox.network]\nmode = "off"\n')
    assert sandbox.network_policy().mode == "host"


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("*.com", "two labels"),
        ("a.*.example.org", "at the start only"),
        ("exa mple.org", "not a host name"),
    ],
)
def test_a_bad_entry_is_named_at_load(tmp_path: Path, entry: str, why: str) -> None:
    with pytest.raises(SettingsError) as raised:
        _loaded(tmp_path, f'[sandbox.network]\nmode = "allowlist"\nallow = ["{entry}"]\n')
    assert f"sandbox.network.allow: {entry!r}" in str(raised.value)
    assert why in str(raised.value)


@pytest.mark.parametrize("text", ["ports = [0]", "ports = [70000]", 'mode = "open"'])
def test_bad_values_are_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(SettingsError):
        _loaded(tmp_path, f"[sandbox.network]\n{text}\n")
