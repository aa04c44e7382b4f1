"""conveyor.files: a written file appears whole or not at all (NORMS M4: re-runs overwrite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.files import atomic_path, write_atomic


def test_m4_write_replaces_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    dst = tmp_path / "deep" / "er" / "thumb.webp"
    write_atomic(dst, b"old")
    write_atomic(dst, "new ü")
    assert dst.read_text(encoding="utf-8") == "new ü"
    assert sorted(p.name for p in dst.parent.iterdir()) == ["thumb.webp"]


def test_m4_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path: Path) -> None:
    dst = tmp_path / "playback.mp4"
    dst.write_bytes(b"previous run")
    with pytest.raises(RuntimeError), atomic_path(dst) as tmp:
        tmp.write_bytes(b"half of a new")
        assert tmp.parent == dst.parent and tmp.name.startswith(".playback.mp4.")
        raise RuntimeError("encoder died")
    assert dst.read_bytes() == b"previous run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["playback.mp4"]


def test_m4_block_that_writes_nothing_does_not_replace(tmp_path: Path) -> None:
    dst = tmp_path / "out.wav"
    dst.write_bytes(b"kept")
    with pytest.raises(FileNotFoundError), atomic_path(dst):
        pass
    assert dst.read_bytes() == b"kept"
