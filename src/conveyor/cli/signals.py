"""Stop signals: SIGINT or SIGTERM asks a long command to stop gracefully."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

__all__ = ["stop_on_signals"]


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (graceful stop); a second SIGINT aborts at once."""
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        # A handler runs between any two bytecodes of the main thread, possibly inside a Rich
        # render or a half-finished import; one raw write re-enters neither.
        with contextlib.suppress(OSError):  # stderr closed: stopping matters more than saying so
            os.write(2, f"{signal.Signals(signum).name}: stopping…\n".encode())

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop
