"""Stop signals: SIGINT, SIGTERM or SIGHUP asks a long command to stop gracefully.

The first signal sets the command's stop event; it finishes what is in hand and says what it
did. SIGHUP (the terminal closed, an SSH session dropped) is one too, unless the command was
started with it ignored (``nohup``); by default it would end the process where it stands,
leaving the half-written temporary file of the file being stored. A second SIGINT ends the
command at once (exit code 130; ``finally`` blocks still run), except inside
:func:`holding_interrupts`, where it waits for the block to end (then as
``KeyboardInterrupt``, which intake takes as "stop now"): a file being stored is finished with
its record, never left half-done. A short command ends at once on any of the three, but
through ``SystemExit``, so its ``finally`` blocks and exit handlers still remove what it was
writing (a temporary object, its work folder).

A closed stdout (its reader went away: ``conveyor records add … | head -1``, a script that
stopped reading ``--json``) stops a command whose stop event asks for it as the first signal
does (:func:`stdout_closed`); such a command then exits 141 (``ExitCode.PIPE_CLOSED``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "holding_interrupts",
    "interrupt_exits",
    "interrupt_pending",
    "interrupted_early",
    "stdout_closed",
    "stdout_was_closed",
    "stop_on_signals",
    "stops_on_closed_stdout",
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
    #: The event :func:`stop_on_signals` made for a command that a closed stdout stops too.
    stop: threading.Event | None = None
    #: :func:`stdout_closed` was called: stdout's reader went away.
    stdout_closed = False


def _say(text: str) -> None:
    # A handler runs between any two bytecodes of the main thread, possibly inside a Rich
    # render or a half-finished import; one raw write re-enters neither.
    with contextlib.suppress(OSError):  # stderr closed: stopping matters more than saying so
        os.write(2, text.encode())


def _stop_signals() -> list[signal.Signals]:
    """SIGINT, SIGTERM, and SIGHUP unless it is ignored (``nohup``: the command goes on)."""
    found = [signal.SIGINT, signal.SIGTERM]
    hangup = getattr(signal, "SIGHUP", None)
    if hangup is not None and signal.getsignal(hangup) is not signal.SIG_IGN:
        found.append(hangup)
    return found


def interrupt_exits() -> None:
    """SIGINT (Ctrl-C) ends the command at once with exit code 130 and says so, instead of
    Click's "Aborted!" and exit code 1; SIGTERM and SIGHUP end it at once too (exit code 143
    and 129, as the signal itself would), but with its ``finally`` blocks and exit handlers run.
    A command that has something to finish replaces this with :func:`stop_on_signals`; before
    that it has stored nothing."""

    def handler(signum: int, _frame: Any) -> None:
        if signum == signal.SIGINT:
            _Held.early = True
            _say("SIGINT: interrupted\n")
            raise SystemExit(_INTERRUPTED)
        _say(f"{signal.Signals(signum).name}: stopped\n")
        raise SystemExit(128 + signum)

    for signum in _stop_signals():
        signal.signal(signum, handler)


def interrupted_early() -> bool:
    """True when a SIGINT reached :func:`interrupt_exits`'s handler, whether or not its
    ``SystemExit`` ended the command (one raised inside a finalizer is swallowed)."""
    return _Held.early


def stop_on_signals(*, closed_stdout: bool = False) -> threading.Event:
    """An event set by SIGINT, SIGTERM or SIGHUP (graceful stop; SIGHUP unless ignored); a
    second SIGINT ends the command at once with exit code 130. With ``closed_stdout``, by
    :func:`stdout_closed` too."""
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

    for signum in _stop_signals():
        signal.signal(signum, handler)
    _Held.stop = stop if closed_stdout else None
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


def stdout_closed() -> None:
    """Stdout's reader went away (a write raised ``BrokenPipeError``): the command stops as on
    its first stop signal (the event of :func:`stop_on_signals` is set; the file in hand is
    finished with its record), and stdout is pointed at the null device from here on, so what
    the command still prints there (its ``--json`` summary, the rest of its cards, Python's
    flush of stdout at exit, which would say "Exception ignored … BrokenPipeError") goes
    nowhere instead of failing again; its lines on stderr stay. Idempotent."""
    if not _Held.stdout_closed:
        _Held.stdout_closed = True
        _say("stdout closed by its reader: stopping…\n")
    with contextlib.suppress(OSError, ValueError):  # no file descriptor (a test's capture)
        fileno = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fileno)
        finally:
            os.close(devnull)
    if _Held.stop is not None:
        _Held.stop.set()


def stdout_was_closed() -> bool:
    """True once :func:`stdout_closed` was called: the command ends with exit code 141."""
    return _Held.stdout_closed


def stops_on_closed_stdout() -> bool:
    """True when the command's stop event is set by a closed stdout (``stop_on_signals(
    closed_stdout=True)``): it handles a closed stdout as a stop, rather than ending there."""
    return _Held.stop is not None
