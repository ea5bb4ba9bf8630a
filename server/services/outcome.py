"""What a finished command leaves: its output summary, how it ended, where (pure)."""

from __future__ import annotations

import msgspec

from bashrpc.protocol import messages, paths
from bashrpc.server.observe.stats import CommandOutcome
from bashrpc.server.output.sink import SinkSummary


class Outcome(msgspec.Struct, frozen=True):
    summary: SinkSummary
    exit_code: int | None
    cancelled: bool
    timed_out: bool
    timeout: float | None
    working_dir: str | None
    artifact_id: int | None
    # The artifact stopped at a size cap.
    artifact_truncated: bool = False
    # One line saying the sandbox refused a write the command needed; None: it did not.
    sandbox_denied: str | None = None
    # The session's shell state was lost (this command's shell ended, or an earlier
    # one did since the last result).
    shell_restarted: bool = False
    # (directory, workspace): a new shell could not enter the one, so it started in the other.
    cwd_fallback: tuple[str, str] | None = None
    # What a new shell's sandbox did at its start: the git guard's roots kept
    # read-only and pointers not followed, each a line.
    start_notices: tuple[str, ...] = ()
    # The line saying the session's sandbox was tightened, so its shell restarted confined.
    sandbox_tightened: str | None = None
    # Seconds it waited for the session's turn, behind the commands before it.
    queued_seconds: float = 0.0
    # It ran at once on a shell of its own, without the session's state (asked for).
    one_shot: bool = False

    @property
    def label(self) -> CommandOutcome:
        """How the command ended, in one of the figures' fixed words."""
        if self.timed_out:
            return "timed_out"
        if self.cancelled:
            return "cancelled"
        if self.sandbox_denied is not None:
            return "sandbox_denied"
        return "ok" if self.exit_code == 0 else "failed"

    @property
    def notice(self) -> str | None:
        if self.timed_out and self.timeout is not None:
            return messages.timed_out_notice(self.timeout)
        if self.cancelled:
            return messages.NOTICE_CANCELLED
        return None

    @property
    def shell_notice(self) -> str | None:
        """The lines about the shell itself: its state lost, its directory not entered."""
        lines = []
        if self.cwd_fallback is not None:
            gone, workspace = self.cwd_fallback
            lines.append(
                messages.SHELL_CWD_GONE.format(
                    cwd=paths.printable(gone), workspace=paths.printable(workspace)
                )
            )
        lines += self.start_notices
        if self.sandbox_tightened is not None:
            lines.append(self.sandbox_tightened)
        if self.shell_restarted:
            lines.append(messages.SHELL_RESTARTED)
        return "\n".join(lines) or None
