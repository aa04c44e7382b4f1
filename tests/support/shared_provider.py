"""A recognition provider whose operations live in a folder, so every worker process sees them.

The fault suite kills worker processes between a submit and the save that records it; the next
holder polls (or re-submits with the same key) from another process. A provider kept in one
process's memory would forget the operation; this one keeps each in a file, and appends one
line per operation it *creates* to ``created.log`` — what the suite counts as provider
operations (a second line for one record is a duplicate paid operation).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conveyor.providers.base import PollResult, RecognitionRequest, Submission
from conveyor.testing import FakeProvider


class SharedFakeProvider(FakeProvider):
    """:class:`FakeProvider` with its operations in ``folder`` (shared by processes).

    An operation is ``running`` for ``run_for`` seconds after it was created, then ``done``.
    """

    def __init__(self, folder: Path, run_for: float = 0.2) -> None:
        super().__init__("Hello world.", "en")
        self.folder = folder
        self.run_for = run_for
        (folder / "ops").mkdir(parents=True, exist_ok=True)

    def _op(self, operation_id: str) -> Path:
        return self.folder / "ops" / f"{operation_id}.json"

    def submit(self, audio: Path, *, operation_id: str, request: RecognitionRequest) -> Submission:
        """Create the operation unless it exists (idempotent per ``operation_id``)."""
        try:
            fd = os.open(self._op(operation_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as out:
                json.dump({"created": time.time()}, out)
            with open(self.folder / "created.log", "a") as log:
                log.write(f"{operation_id} {os.getpid()}\n")
        return Submission(operation_id=operation_id, source_url=str(audio), raw=None)

    def poll(self, operation_id: str) -> PollResult:
        """``running`` for ``run_for`` seconds after the submit, ``done`` afterwards."""
        try:
            created = json.loads(self._op(operation_id).read_text())["created"]
        except (FileNotFoundError, ValueError):
            return PollResult("unknown")
        if time.time() - created < self.run_for:
            return PollResult("running")
        return PollResult("done", raw=self._raw())

    def discard(self, operation_id: str) -> None:
        """Keep the file: the suite counts operations afterwards."""


def created_operations(folder: Path) -> list[str]:
    """Every operation id the provider created, in order (one per line of ``created.log``)."""
    log = folder / "created.log"
    if not log.exists():
        return []
    return [line.split()[0] for line in log.read_text().splitlines() if line.strip()]
