"""`bashrpc artifact N`: print an artifact, read straight from disk.

No server is needed: artifacts are plain files under the root, in the
workspace's directory (under the daemon, its client's or scope's beside it),
and the store reads them as a server would.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bashrpc.protocol import messages
from bashrpc.server.cli.sigpipe import die_of_sigpipe
from bashrpc.server.errors import ArtifactNotFound
from bashrpc.server.output.artifacts import ArtifactStore

EXIT_NOT_FOUND = 1
_PAGE_BYTES = 1 << 20


def print_artifact(
    artifact_id: int, root: Path, workspace: Path | None, owner: str | None = None
) -> int:
    """`owner`: the daemon tenant's key whose artifact it is; None: the workspace's."""
    workspace = (workspace or Path.cwd()).resolve()
    store = ArtifactStore(root, workspace, owner=owner)
    out = sys.stdout.buffer
    offset: int | None = 0
    try:
        while offset is not None:
            chunk = store.read(artifact_id, offset, _PAGE_BYTES)
            out.write(chunk.data)
            offset = chunk.next_offset
        out.flush()
    except ArtifactNotFound as exc:
        not_found = messages.artifact_not_found(artifact_id, exc.available)
        message = messages.CLI_ARTIFACT_NOT_FOUND.format(not_found=not_found, workspace=workspace)
        print(messages.CLI_ERROR.format(message=message), file=sys.stderr)
        return EXIT_NOT_FOUND
    except BrokenPipeError:
        die_of_sigpipe()  # `bashrpc artifact N | head`: the reader has all it wants
    except OSError as exc:
        reason = messages.CLI_ARTIFACT_UNREADABLE.format(id=artifact_id, reason=exc)
        print(messages.CLI_ERROR.format(message=reason), file=sys.stderr)
        return EXIT_NOT_FOUND
    return 0
