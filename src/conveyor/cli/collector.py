"""The cyclic garbage collector of a ``conveyor`` process: off while the command starts, and
not walked over everything once more at exit.

Starting a command makes several hundred thousand objects that live as long as the process
(modules, classes, SQLAlchemy's and pydantic's structures, Typer's commands). Each pass of the
collector over them frees nothing, and the interpreter's last pass at exit walks all of them
again: together a third of the CPU of ``conveyor records list``. So the console script

* :func:`pause`\\ s the collector before anything is imported;
* :func:`resume` (called once a command's runtime is built, by
  :func:`conveyor.cli.settings.make_runtime`) moves what exists to the permanent generation
  (:func:`gc.freeze`) and turns the collector back on, so a long command (``worker``,
  ``serve``, a large ``records add``) collects its own garbage as any process does;
* :func:`skip_at_exit` freezes again as the command ends, after the command closed what it
  opened (its database connections: :func:`conveyor.cli.settings.close_connections`), so the
  interpreter's exit does not walk the heap.

Only the console script pauses: :func:`resume` and :func:`skip_at_exit` do nothing in a process
that never paused (a test driving the app in-process keeps its collector as it was).
Measured by ``bench/bench_cli_start.py`` (docs/performance.md, *Command start*).
"""

from __future__ import annotations

import gc

__all__ = ["pause", "resume", "skip_at_exit"]


class _State:
    managed = False  # this process paused the collector (the console script)
    paused = False  # and it is still off


def pause() -> None:
    """Turn the collector off for the command's start (the console script, first thing)."""
    if gc.isenabled():
        gc.disable()
        _State.managed = _State.paused = True


def resume() -> None:
    """Freeze what the start made and turn the collector back on (once; no-op unless paused)."""
    if _State.paused:
        _State.paused = False
        gc.freeze()
        gc.enable()


def skip_at_exit() -> None:
    """Freeze every object as the process ends, so the interpreter's exit does not walk them
    (no-op unless :func:`pause` was called in this process). Call it last: nothing frozen is
    collected afterwards, so what needs closing must be closed before."""
    if _State.managed:
        gc.freeze()
