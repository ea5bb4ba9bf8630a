"""`bashrpc record` and `bashrpc replay` as a host's CI runs them."""

from __future__ import annotations

import os
import random
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import ArtifactReadParams, BashParams
from bashrpc.protocol.placeholders import Substitution
from bashrpc.protocol.transcript import (
    MAX_NESTING,
    ClientRecord,
    Header,
    Record,
    Rule,
    ServerRecord,
    Transcript,
    dumps,
    loads,
)
from bashrpc.server.cli.fixture import MAX_FIXTURE_BYTES, MAX_FIXTURE_ENTRIES
from bashrpc.server.cli.runroot import RunRoot
from tests.transcripts.host import Host

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).resolve().parents[1] / "transcripts"
STATEFUL = GOLDEN / "bash_state_carries_across_requests.jsonl"
RUNS_IN_A_ROW = 20
BIG_LINES = 200_000
CLI_SECONDS = 600


def replay_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "bashrpc", "replay", *map(str, args)]
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=CLI_SECONDS, check=False
    )


def _replies_to_2(message: object) -> bool:
    return isinstance(message, dict) and message.get("id") == 2 and "result" in message


def edited(path: Path, out: Path, change: dict[str, object]) -> Path:
    """A copy whose reply to request 2 has `change` merged into its result."""
    transcript = loads(path.read_bytes())
    records = []
    for record in transcript.records:
        message = record.message
        if isinstance(record, ServerRecord) and _replies_to_2(message):
            record = ServerRecord(message={**message, "result": {**message["result"], **change}})
        records.append(record)
    out.write_bytes(dumps(Transcript(header=transcript.header, records=records)))
    return out


def test_a_copy_replays_green_20_times_in_a_row_at_another_path(tmp_path: Path) -> None:
    checkout = tmp_path / "another" / "checkout" / "tests" / "transcripts"
    checkout.mkdir(parents=True)
    copy = checkout / STATEFUL.name
    shutil.copyfile(STATEFUL, copy)
    elsewhere = tmp_path / "ci"
    elsewhere.mkdir()
    done = replay_cli(*[copy] * RUNS_IN_A_ROW, cwd=elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    oks = [line for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert len(oks) == RUNS_IN_A_ROW


def test_an_edited_expected_output_fails_with_a_diff_naming_the_field(tmp_path: Path) -> None:
    change = {"exitCode": 7, "output": "hello from elsewhere\nand more\n"}
    broken = edited(STATEFUL, tmp_path / "broken.jsonl", change)
    done = replay_cli(broken, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert messages.REPLAY_DIFFERS.format(path=broken) in done.stdout
    assert "request 2 (bash): result.exitCode: expected 7, got 0" in done.stdout
    assert "request 2 (bash): result.output: the text differs" in done.stdout
    assert "-hello from elsewhere" in done.stdout


# Far below --wait: a run that waited it out would hit this instead.
NO_WAIT_OUT_SECONDS = 120


def test_a_shorter_output_than_recorded_fails_without_waiting_it_out(tmp_path: Path) -> None:
    transcript = loads(STATEFUL.read_bytes())
    records: list[Record] = []
    for record in transcript.records:
        message = record.message
        if isinstance(message, dict) and message.get("method") == "bash/chunk":
            text = message["params"]["text"] + "a line this server never printed\n"
            record = ServerRecord(
                message={**message, "params": {**message["params"], "text": text}}
            )
        records.append(record)
    longer = tmp_path / "longer.jsonl"
    longer.write_bytes(dumps(Transcript(header=transcript.header, records=records)))
    argv = [sys.executable, "-m", "bashrpc", "replay", "--wait", "600", str(longer)]
    done = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=NO_WAIT_OUT_SECONDS
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "request 2 (bash): output.bash/chunk: the text differs" in done.stdout


def test_update_rewrites_the_expected_side(tmp_path: Path) -> None:
    broken = edited(STATEFUL, tmp_path / "broken.jsonl", {"exitCode": 7})
    done = replay_cli("--update", broken, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == messages.REPLAY_UPDATED.format(path=broken)
    again = replay_cli(broken, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr


def recut(transcript: Transcript, seed: int | None) -> Transcript:
    """The same session with its bash/chunk texts cut again: into one chunk per
    request (no seed), or at random points."""
    texts: dict[object, list[str]] = {}
    kept: list[Record] = []
    for record in transcript.records:
        message = record.message
        if isinstance(message, dict) and message.get("method") == "bash/chunk":
            texts.setdefault(message["params"]["requestId"], []).append(message["params"]["text"])
            if len(texts[message["params"]["requestId"]]) > 1:
                continue
        kept.append(record)
    records: list[Record] = []
    for record in kept:
        message = record.message
        if not (isinstance(message, dict) and message.get("method") == "bash/chunk"):
            records.append(record)
            continue
        params = message["params"]
        whole = "".join(texts[params["requestId"]])
        points = [] if seed is None else sorted(random.Random(seed).sample(range(len(whole)), 300))
        pieces = [whole[a:b] for a, b in zip([0, *points], [*points, len(whole)], strict=True)]
        for seq, piece in enumerate(pieces):
            chunk = {**message, "params": {**params, "seq": seq, "text": piece}}
            records.append(ServerRecord(message=chunk))
    return Transcript(header=transcript.header, records=records)


def test_a_200000_line_output_and_its_artifact_replay_whatever_the_cut_points(
    tmp_path: Path,
) -> None:
    recorded = tmp_path / "big.jsonl"
    with Host(recorded) as host:
        host.call("bash", BashParams(command=f"seq 1 {BIG_LINES}"))
        host.call("artifact/read", ArtifactReadParams(id=1, limit=1000))
        host.call("artifact/read", ArtifactReadParams(id=1, offset=1288000, limit=1000))
    transcript = loads(recorded.read_bytes())
    variants = [recorded]
    for name, seed in (("whole", None), ("cut-a", 1), ("cut-b", 2)):
        path = tmp_path / f"big-{name}.jsonl"
        path.write_bytes(dumps(recut(transcript, seed)))
        variants.append(path)
    done = replay_cli(*variants, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    first = loads(variants[1].read_bytes()).records
    chunks = [r for r in first if isinstance(r, ServerRecord) and r.message.get("method")]
    assert len(chunks) == 1 and chunks[0].message["params"]["text"].count("\n") == BIG_LINES


def test_a_fixture_is_copied_in_as_the_workspace(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "hello.txt").write_text("from the fixture\n")
    recorded = tmp_path / "cat.jsonl"
    with Host(recorded, fixture=fixture) as host:
        host.call("bash", BashParams(command="cat hello.txt"))
    without = replay_cli(recorded, cwd=tmp_path)
    assert without.returncode == 1, without.stdout
    assert "No such file or directory" in without.stdout
    given = replay_cli("--fixture", fixture, recorded, cwd=tmp_path)
    assert given.returncode == 0, given.stdout + given.stderr
    transcript = loads(recorded.read_bytes())
    header = msgspec.structs.replace(transcript.header, fixture="fixture")
    recorded.write_bytes(dumps(Transcript(header=header, records=transcript.records)))
    named = replay_cli(recorded, cwd=tmp_path / "fixture")
    assert named.returncode == 0, named.stdout + named.stderr


def test_record_passes_every_line_through_unchanged(tmp_path: Path) -> None:
    recorded = tmp_path / "through.jsonl"
    with Host(recorded) as host:
        host.call("bash", BashParams(command="echo one; echo two >&2; pwd"))
        host.call("session/list")
        got = list(host.lines)
        hide = Substitution(host.root.paths()).hide
    servers = [r for r in loads(recorded.read_bytes()).records if isinstance(r, ServerRecord)]
    expected = [msgspec.json.encode(r.message) + b"\n" for r in servers]
    # The transcript holds the paths' placeholders; the lines are the server's own.
    assert [hide(line.decode()).encode() for line in got] == expected
    assert any(b"<WORKSPACE>" in line for line in expected)


def test_a_rule_of_the_host_hides_what_its_commands_print(tmp_path: Path) -> None:
    recorded = tmp_path / "clock.jsonl"
    rule = ["--rule", "*", r"now \d+", "now <N>"]
    with Host(recorded, record_args=rule) as host:
        host.call("bash", BashParams(command='echo "now $(date +%s%N)"'))
    assert loads(recorded.read_bytes()).header.rules == [
        Rule(field="*", pattern=r"now \d+", replacement="now <N>")
    ]
    assert replay_cli(recorded, cwd=tmp_path).returncode == 0
    transcript = loads(recorded.read_bytes())
    header = msgspec.structs.replace(transcript.header, rules=[])
    recorded.write_bytes(dumps(Transcript(header=header, records=transcript.records)))
    without = replay_cli(recorded, cwd=tmp_path)
    assert without.returncode == 1
    assert "request 1 (bash): result.output: expected" in without.stdout


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["replay", "missing.jsonl"], "missing.jsonl: No such file or directory"),
        (["replay", "not-a-transcript.jsonl"], "line 1:"),
        (["replay", "--fixture", "nowhere", str(STATEFUL)], "fixture nowhere: not a directory"),
        (["replay"], "the following arguments are required: FILE"),
        (["replay", "bad-rule.jsonl"], "rule '(' is not a regular expression"),
        (["record", "--out", "x.jsonl", "--rule", "*", "(", "x"], "not a regular expression"),
        (["record", "--out", "no/such/dir/x.jsonl"], "--out no/such/dir/x.jsonl: No such file"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, argv: list[str], says: str) -> None:
    (tmp_path / "not-a-transcript.jsonl").write_text('{"jsonrpc":"2.0"}\n')
    bad_rule = Header(normalization=1, rules=[Rule(field="*", pattern="(", replacement="")])
    (tmp_path / "bad-rule.jsonl").write_bytes(dumps(Transcript(header=bad_rule, records=[])))
    done = subprocess.run(
        [sys.executable, "-m", "bashrpc", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=CLI_SECONDS,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr
    assert done.stdout == ""


def touching(marker: Path, header: Header) -> Transcript:
    """A transcript whose one command leaves `marker` behind when it runs."""
    params = {"command": f"touch {marker}"}
    command = {"jsonrpc": "2.0", "id": 1, "method": "bash", "params": params}
    # A reply for replay to wait for (the real one differs from it).
    reply = ServerRecord(message={"jsonrpc": "2.0", "id": 1, "result": {}})
    return Transcript(header=header, records=[ClientRecord(waited=True, message=command), reply])


@pytest.mark.parametrize(
    ("server_args", "named"),
    [
        (["--sandbox", "off"], "--sandbox off"),
        (["--sandbox=off"], "--sandbox=off"),
        (["--config", "/etc/hostname"], "--config"),
        (["attach", "--sandbox", "off"], "--sandbox off"),
        (["record", "--out", "elsewhere.jsonl"], "record"),
    ],
)
def test_header_server_args_that_loosen_the_sandbox_need_trust(
    tmp_path: Path, server_args: list[str], named: str
) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "loose.jsonl"
    path.write_bytes(dumps(touching(marker, Header(normalization=1, server_args=server_args))))
    refused = replay_cli("--wait", "5", path, cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert messages.REPLAY_UNTRUSTED_ARGS.format(path=path, arg=named) in refused.stderr
    assert not marker.exists() and not (tmp_path / "elsewhere.jsonl").exists()
    if server_args[0] == "--sandbox":
        trusted = replay_cli("--trust", "--wait", "5", path, cwd=tmp_path)
        assert trusted.returncode == 1, trusted.stdout + trusted.stderr
        assert marker.exists()


def test_header_server_args_that_tighten_the_sandbox_replay_without_trust(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    header = Header(normalization=1, server_args=["--sandbox", "read-only", "--log-level=INFO"])
    path = tmp_path / "tight.jsonl"
    path.write_bytes(dumps(touching(marker, header)))
    done = replay_cli("--wait", "5", path, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr  # it ran; its reply differs
    assert "request 1 (bash)" in done.stdout
    assert not marker.exists()  # the sandbox kept the host read-only


def _with_fixture(path: Path, fixture: str) -> Path:
    path.write_bytes(dumps(touching(path.parent / "ran", Header(normalization=1, fixture=fixture))))
    return path


# Far below the minute `/proc/self` took to copy.
FIXTURE_REFUSAL_SECONDS = 30


@pytest.mark.parametrize("fixture", ["/proc/self", "../outside", "link", "/"])
def test_a_header_fixture_outside_the_transcripts_folder_is_refused(
    tmp_path: Path, fixture: str
) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("host file\n")
    folder = tmp_path / "golden"
    folder.mkdir()
    (folder / "link").symlink_to(tmp_path / "outside")
    path = _with_fixture(folder / "t.jsonl", fixture)
    argv = [sys.executable, "-m", "bashrpc", "replay", str(path)]
    done = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=FIXTURE_REFUSAL_SECONDS
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert messages.REPLAY_FIXTURE_OUTSIDE.format(path=fixture) in done.stderr
    assert not (folder / "ran").exists()


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_fixture_holding_what_is_not_a_file_or_folder_is_refused(
    tmp_path: Path, kind: str
) -> None:
    fixture = tmp_path / "repo"
    (fixture / "src").mkdir(parents=True)
    (fixture / "src" / "main.c").write_text("int main;\n")
    odd = fixture / "src" / "odd"
    if kind == "symlink":
        odd.symlink_to("/etc/passwd")
    else:
        os.mkfifo(odd)
    path = _with_fixture(tmp_path / "t.jsonl", "repo")
    argv = [sys.executable, "-m", "bashrpc", "replay", str(path)]
    done = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=FIXTURE_REFUSAL_SECONDS
    )
    assert done.returncode == 2, done.stdout + done.stderr
    reason = messages.FIXTURE_NOT_PLAIN.format(entry=os.path.join("src", "odd"))
    assert messages.REPLAY_BAD_FIXTURE.format(path=fixture, reason=reason) in done.stderr


def test_a_fixture_past_its_bound_is_refused(tmp_path: Path) -> None:
    fixture = tmp_path / "many"
    fixture.mkdir()
    for index in range(MAX_FIXTURE_ENTRIES + 1):
        (fixture / str(index)).touch()
    path = _with_fixture(tmp_path / "t.jsonl", "many")
    done = replay_cli(path, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    reason = messages.FIXTURE_TOO_BIG.format(entries=MAX_FIXTURE_ENTRIES, size=MAX_FIXTURE_BYTES)
    assert messages.REPLAY_BAD_FIXTURE.format(path=fixture, reason=reason) in done.stderr


def test_a_transcript_nested_too_deep_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    for depth in (900, 100_000):
        nested = "[" * depth + "]" * depth
        message = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + nested + "}}"
        record = '{"type":"client","waited":true,"message":' + message + "}\n"
        path.write_text('{"type":"header","normalization":1}\n' + record)
        done = replay_cli(path, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        assert f"line 2: nested deeper than {MAX_NESTING} levels" in done.stderr


def test_update_leaves_a_matching_transcript_as_it_is(tmp_path: Path) -> None:
    copy = tmp_path / STATEFUL.name
    shutil.copyfile(STATEFUL, copy)
    os.utime(copy, (0, 0))
    done = replay_cli("--update", copy, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == messages.REPLAY_MATCHED.format(path=copy)
    assert copy.read_bytes() == STATEFUL.read_bytes()
    assert copy.stat().st_mtime == 0


def test_record_writes_a_file_only_its_owner_reads(tmp_path: Path) -> None:
    recorded = tmp_path / "private.jsonl"
    with Host(recorded) as host:
        host.call("bash", BashParams(command="true", env={"TOKEN": "not for the world"}))
    assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
    assert b"not for the world" in recorded.read_bytes()


# A session's output far above what the recorder may hold: it writes as it goes.
RECORDED_OUTPUT_MB = 80
RECORDER_PEAK_MB = 60


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_record_streams_the_session_to_its_file_in_bounded_memory(tmp_path: Path) -> None:
    root = RunRoot()
    recorded = tmp_path / "big.jsonl"
    argv = [sys.executable, "-m", "bashrpc", "record", "--out", str(recorded), "--"]
    argv += root.argv([])[3:]
    command = f"head -c {RECORDED_OUTPUT_MB}M /dev/zero | tr '\\0' a | fold -w 99; echo; pwd"
    request = msgspec.json.encode(
        {"jsonrpc": "2.0", "id": 1, "method": "bash", "params": {"command": command}}
    )
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=root.environment(),
            cwd=root.workspace,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(request + b"\n")
        proc.stdin.flush()
        for line in proc.stdout:
            if line.startswith(b'{"jsonrpc":"2.0","id":1,'):
                break
        peak = _peak_rss_mb(proc.pid)
        proc.stdin.close()
        assert proc.wait(timeout=CLI_SECONDS) == 0
    finally:
        root.remove()
    assert peak < RECORDER_PEAK_MB, peak
    transcript = loads(recorded.read_bytes())
    chunks = [
        r.message["params"]["text"]
        for r in transcript.records
        if isinstance(r, ServerRecord) and r.message.get("method") == "bash/chunk"
    ]
    text = "".join(chunks)
    assert len(text) == RECORDED_OUTPUT_MB * 1024 * 1024 * 100 // 99 + 1 + len("<WORKSPACE>\n")
    assert text.endswith("a\n<WORKSPACE>\n")


def _with_chunk_cut(transcript: Transcript, request: int, at: int) -> Transcript:
    """The same session with `request`'s one chunk cut in two at `at`."""
    records: list[Record] = []
    for record in transcript.records:
        message: dict[str, Any] = record.message if isinstance(record.message, dict) else {}
        params: dict[str, Any] = message.get("params") or {}
        if message.get("method") != "bash/chunk" or params.get("requestId") != request:
            records.append(record)
            continue
        text = params["text"]
        for seq, piece in enumerate((text[:at], text[at:])):
            chunk = {**message, "params": {**params, "seq": seq, "text": piece}}
            records.append(ServerRecord(message=chunk))
    return Transcript(header=transcript.header, records=records)


def test_update_rewrites_only_the_requests_that_differ(tmp_path: Path) -> None:
    """Request 3's chunks are cut where this server would not cut them; request
    2's reply is edited. The update puts request 2 right and leaves the rest be."""
    cut = _with_chunk_cut(loads(STATEFUL.read_bytes()), request=3, at=3)
    want = tmp_path / "want.jsonl"
    want.write_bytes(dumps(cut))
    path = edited(want, tmp_path / "t.jsonl", {"exitCode": 7})
    done = replay_cli("--update", path, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == messages.REPLAY_UPDATED.format(path=path)
    assert path.read_bytes() == want.read_bytes()
