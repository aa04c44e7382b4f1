"""The ``conveyor`` console script: Ctrl-C exits 130 from the first instant, then the app runs.

Importing the app takes a noticeable moment (Typer, Rich); a Ctrl-C then would otherwise print
Python's traceback. Only the standard library is imported before the handler is in place. The
garbage collector is paused for the start and not run over the heap at exit
(:mod:`conveyor.cli.collector`).
"""

from __future__ import annotations

__all__ = ["main"]


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
