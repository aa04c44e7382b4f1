"""Settings of the tests that build a whole runtime: a folder store, and no workers unless asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conveyor.config import Settings


def build_settings(tmp_path: Path, **sections: dict[str, Any]) -> Settings:
    """Settings on ``tmp_path`` with no workers unless a section asks for them.

    Each keyword is a settings section (``pipeline={"workers": 1}``) merged over the defaults.
    """
    base: dict[str, dict[str, Any]] = {
        "storage": {"root": tmp_path / "data"},
        "pipeline": {"workers": 0, "poll_interval": 0.1, "retry_base": 0.2, "stop_grace": 10},
        "transcription": {"poll_delay": 0.3},
        "media": {"short_workers": 0, "long_workers": 0},
        "api": {"sse_heartbeat": 0.5},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return Settings(**base)  # type: ignore[arg-type]
