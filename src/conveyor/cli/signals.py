"""Stop signals: SIGINT or SIGTERM asks a long command to stop gracefully.

The first signal sets the command's stop event; it finishes what is in hand and says what it
did. A second SIGINT ends the command at once (exit code 130; ``finally`` blocks still run),
except inside :func:`holding_interrupts`, where it waits for the block to end (then as
``KeyboardInterrupt``, which intake takes as "stop now"): a file being stored is finished with
its record, never left half-done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "holding_interrupts",
    "interrupt_exits",
    "interrupt_pending",
    "interrupted_early",
    "stop_on_signals",
]

#: The exit code of a command stopped by a signal (``ExitCode.INTERRUPTED``).
_INTERRUPTED = 130


class _Held:
    """Whether the main thread is inside :func:`holding_interrupts`, and whether a second
    SIGINT came meanwhile (only the main thread runs signal handlers, so no lock)."""

    depth = 0
    pending = False
    #: A SIGINT reached :func:`interrupt_exits`'s handler. Its ``SystemExit`` can be swallowed
    #: when it is raised inside a finalizer (``__del__``, a weakref callback: "Exception ignored
    #: in …"), so what comes after asks this too.
    early = False


def _say(text: str) -> None:
    # A handler runs between any two bytecodes of the main thread, possibly inside a Rich
    # render or a half-finished import; one raw write re-enters neither.
    with contextlib.suppress(OSError):  # stderr closed: stopping matters more than saying so
        os.write(2, text.encode())


def interrupt_exits() -> None:
    """SIGINT (Ctrl-C) ends the command at once with exit code 130 and says so, instead of
    Click's "Aborted!" and exit code 1. A command that has something to finish replaces this
    with :func:`stop_on_signals`; before that it has stored nothing."""

    def handler(_signum: int, _frame: Any) -> None:
        _Held.early = True
        _say("SIGINT: interrupted\n")
        raise SystemExit(_INTERRUPTED)

    signal.signal(signal.SIGINT, handler)


def interrupted_early() -> bool:
    """True when a SIGINT reached :func:`interrupt_exits`'s handler, whether or not its
    ``SystemExit`` ended the command (one raised inside a finalizer is swallowed)."""
    return _Held.early


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (graceful stop); a second SIGINT ends the command at
    once with exit code 130."""
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            if _Held.depth:
                _Held.pending = True
                _say("SIGINT: finishing the file in hand…\n")
                return
            _say("SIGINT again: stopping at once\n")
            raise SystemExit(_INTERRUPTED)  # exit 130, not Click's "Aborted!" and 1
        stop.set()
        _say(f"{signal.Signals(signum).name}: stopping…\n")

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    if _Held.early:  # a Ctrl-C during the start that did not end it still stops the command
        stop.set()
        _say("SIGINT: stopping…\n")
    return stop


@contextlib.contextmanager
def holding_interrupts(*, then_raise: bool = True) -> Iterator[None]:
    """A block a second SIGINT does not cut short: its ``KeyboardInterrupt`` is raised when the
    block ends (successfully or not) instead of inside it; with ``then_raise=False`` it is only
    noted, for the block to poll with :func:`interrupt_pending` and end itself."""
    _Held.depth += 1
    try:
        yield
    finally:
        _Held.depth -= 1
        if not _Held.depth and _Held.pending:
            _Held.pending = False
            if then_raise:
                raise KeyboardInterrupt


def interrupt_pending() -> bool:
    """True when a second SIGINT came inside :func:`holding_interrupts` and waits for it."""
    return _Held.pending
