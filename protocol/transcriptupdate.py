"""What `replay --update` writes: the transcript with only what differs rewritten.

A new run cuts its output into other chunks and may order notifications of
different requests otherwise, so writing the whole run would change lines of
requests that matched: a noisy diff to review. Here each request that differs
takes this run's server lines, at this run's place among the host's lines, and
every other line stays as the file had it. The result must normalize to what
the run received; when it does not (a batch that mixes requests, replies in
another order), the whole run is written, as before.
"""

from __future__ import annotations

import json
from typing import Any

from bashrpc.protocol.normalization import normalize
from bashrpc.protocol.transcript import ClientRecord, Record, Rule

# The requests of lines about no request (connection notifications, non-JSON lines).
NO_REQUEST = ""


def _anchor(member: Any, tokens: dict[str, str]) -> str:
    """The id (as JSON) of the request a server message is about, or NO_REQUEST."""
    if not isinstance(member, dict):
        return NO_REQUEST
    if "method" not in member:
        return json.dumps(member.get("id"))
    params = member.get("params")
    if not isinstance(params, dict):
        return NO_REQUEST
    if "requestId" in params:
        return json.dumps(params["requestId"])
    return tokens.get(json.dumps(params.get("progressToken")), NO_REQUEST)


def _tokens(records: list[Record]) -> dict[str, str]:
    """Progress tokens (as JSON) to the ids (as JSON) of the requests that named them."""
    found: dict[str, str] = {}
    for record in records:
        members = record.message if isinstance(record.message, list) else [record.message]
        for member in members if isinstance(record, ClientRecord) else []:
            params = member.get("params") if isinstance(member, dict) else None
            meta = params.get("_meta") if isinstance(params, dict) else None
            if isinstance(meta, dict) and "progressToken" in meta:
                found[json.dumps(meta["progressToken"])] = json.dumps(member.get("id"))
    return found


def _by_place(records: list[Record], differing: set[str], take: bool) -> list[list[Record]] | None:
    """The server lines after each host line (index: host lines before them):
    those about a differing request when `take`, the others when not. None when
    a line mixes the two."""
    tokens = _tokens(records)
    places: list[list[Record]] = [[]]
    for record in records:
        if isinstance(record, ClientRecord):
            places.append([])
            continue
        members = record.message if isinstance(record.message, list) else [record.message]
        if record.line is not None:
            members = [None]  # a line that is not JSON is about no request
        about = {_anchor(m, tokens) in differing for m in members}
        if len(about) > 1:
            return None
        if about == {take}:
            places[-1].append(record)
    return places


def updated(expected: list[Record], actual: list[Record], rules: list[Rule]) -> list[Record]:
    """The records to write: `expected` with the requests that differ from
    `actual` taken from it; `actual` itself when that cannot be done exactly."""
    want, got = normalize(expected, rules), normalize(actual, rules)
    asked, answered = want.pop("requests"), got.pop("requests")
    if want != got:
        return actual  # what differs is about no one request
    got["requests"] = answered
    differing = {
        label.split("#", 1)[0]
        for label in {*asked, *answered}
        if asked.get(label) != answered.get(label)
    }
    kept = _by_place(expected, differing, take=False)
    taken = _by_place(actual, differing, take=True)
    hosts = [r for r in expected if isinstance(r, ClientRecord)]
    if kept is None or taken is None or len(taken) != len(kept):
        return actual
    merged: list[Record] = []
    for place, (old, new) in enumerate(zip(kept, taken, strict=True)):
        merged += old + new
        if place < len(hosts):
            merged.append(hosts[place])
    return merged if normalize(merged, rules) == got else actual
