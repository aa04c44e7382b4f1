"""A task run every few seconds in a daemon thread: the object and job-folder sweeps.

One mechanism so that every periodic chore starts, fails and stops the same way: the first run
comes one interval (or the ``first`` delay) after :meth:`Periodic.start`, an exception is
logged and the next run tries again, and :meth:`Periodic.stop` lets a run under way finish.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Periodic"]

log = logging.getLogger(__name__)


class Periodic:
    """Calls ``task`` every ``interval`` seconds until stopped, or until ``task`` returns False.

    Args:
        name: the thread's name, and what a failure's log line calls the chore.
        interval: seconds between runs.
        task: the chore; returning ``False`` ends the thread (nothing left to do in this
            process), any other value keeps it going. Exceptions are logged with their
            traceback and the chore runs again after the next interval.
        first: seconds before the first run; one ``interval`` when None.
    """

    def __init__(
        self,
        name: str,
        interval: float,
        task: Callable[[], bool | None],
        *,
        first: float | None = None,
    ) -> None:
        self.name = name
        self.interval = interval
        self.first = interval if first is None else first
        self._task = task
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop; a run under way finishes (waited for up to ``timeout`` seconds)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)

    def _run(self) -> None:
        wait = self.first
        while not self._stop.wait(wait):
            wait = self.interval
            try:
                if self._task() is False:
                    return
            except Exception:  # the next run tries again; an outage is logged elsewhere
                log.warning("%s failed", self.name, exc_info=True)
