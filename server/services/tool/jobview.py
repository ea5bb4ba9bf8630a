"""The model's view of its background jobs: how far it has read each one's
output, and whether a tool result has told it of the job's end.

It is the model's state, not the job's: kept beside each job, for as long as
the job lives (the daemon's jobs outlive a connection, and so does what the
model has seen of them), and read and written by the job tools and the tool
results alone.
"""

from __future__ import annotations

import weakref

from bashrpc.server.runtime.jobs.job import Job


class JobView:
    """What the model has seen of one job."""

    def __init__(self) -> None:
        # The end of the output `bash_output` last returned.
        self.cursor = 0
        # A tool result has said the job ended.
        self.told_end = False


_views: weakref.WeakKeyDictionary[Job, JobView] = weakref.WeakKeyDictionary()


def of(job: Job) -> JobView:
    view = _views.get(job)
    if view is None:
        view = _views[job] = JobView()
    return view
