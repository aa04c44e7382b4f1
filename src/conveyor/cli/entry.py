"""The ``conveyor`` console script: Ctrl-C exits 130 from the first instant, then the app runs.

Importing the app takes a noticeable moment (Typer, Rich); a Ctrl-C then would otherwise print
Python's traceback. So the first thing this module does, before it imports anything, is to
take SIGINT with the interpreter's own ``_signal`` (loaded with the interpreter; ``signal``
imports ``enum``, several milliseconds in which Python's ``KeyboardInterrupt`` would still
print its traceback): ``SIGINT: interrupted`` and exit code 130, as
:func:`conveyor.cli.signals.interrupt_exits` answers later. Only a Ctrl-C in the interpreter's
own start, before this module's first line, is Python's. The garbage collector is paused for
the start and not run over the heap at exit (:mod:`conveyor.cli.collector`).
"""

from __future__ import annotations

import os

# ``typing`` takes milliseconds to import; mypy reads a name TYPE_CHECKING as true as well.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the same functions; ``_signal`` has no stub
    import signal as _signal
    from types import FrameType
else:
    import _signal

__all__ = ["main"]


def _interrupted(_signum: int, _frame: FrameType | None) -> None:
    try:  # noqa: SIM105 (contextlib is not imported yet)
        os.write(2, b"SIGINT: interrupted\n")
    except OSError:  # stderr closed: stopping matters more than saying so
        pass
    raise SystemExit(130)  # ExitCode.INTERRUPTED, which is not imported yet


# Not when SIGINT is ignored (a background job of a script): the command leaves it so.
if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted)


def main() -> None:
    """Install the interrupt handler, then run :func:`conveyor.cli.root.main`."""
    from conveyor.cli import collector
    from conveyor.cli.signals import interrupt_exits

    interrupt_exits()
    collector.pause()
    try:
        from conveyor.cli.root import main as run

        run()
    finally:
        collector.skip_at_exit()  # after run() closed the command's connections
