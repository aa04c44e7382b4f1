"""A ``conveyor worker`` killed with SIGKILL mid-step, then restarted, loses nothing (P2, P6, D12).

Both databases. After the kill, the dead worker's leases are expired by hand (what waiting out
the lease would do), so the test does not sit through minutes of lease time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from conveyor.audio.intake import accept_audio
from conveyor.config import Settings
from conveyor.db.tables import audio_records, recognition_attempts, texts
from conveyor.runtime import Runtime

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))


def worker_env(engine: Engine, root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CONVEYOR_DATABASE__URL": engine.url.render_as_string(hide_password=False),
        "CONVEYOR_STORAGE__ROOT": str(root),
        "CONVEYOR_PIPELINE__WORKERS": "2",
        "CONVEYOR_PIPELINE__POLL_INTERVAL": "0.2",
        "CONVEYOR_TRANSCRIPTION__POLL_DELAY": "0.3",
        "CONVEYOR_MEDIA__SHORT_WORKERS": "0",
        "CONVEYOR_MEDIA__LONG_WORKERS": "0",
    }


@pytest.mark.slow
def test_sigkill_mid_step_then_restart_loses_nothing(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    root = tmp_path / "data"
    runtime = Runtime(Settings(storage={"root": root}), engine=engine)  # type: ignore[arg-type]
    names = ["jfk.wav", "LDC93S1.flac", "sense_and_sensibility_0880.wav", "cards_005.wav"]
    ids = [
        accept_audio(
            engine,
            runtime.store,
            runtime.clock,
            corpus / "audio" / n,
            owner="ann",
            keep_duplicate=True,
        )
        for n in names
    ]
    env = worker_env(engine, root)
    first = subprocess.Popen([CONVEYOR, "worker"], env=env, cwd=tmp_path)
    killed_in: str | None = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and killed_in is None:
        with engine.connect() as conn:
            row = conn.execute(
                select(audio_records.c.stage).where(
                    audio_records.c.claim_token.is_not(None),
                    audio_records.c.stage.in_(["normalized", "submitted", "transcribed"]),
                )
            ).first()
        if row is not None:
            first.send_signal(signal.SIGKILL)
            killed_in = row[0]
        time.sleep(0.01)
    first.wait(timeout=30)
    assert killed_in is not None, "the worker never held a claim mid-pipeline"
    assert first.returncode == -signal.SIGKILL
    with engine.begin() as conn:
        # The dead worker's leases run out.
        conn.execute(
            update(audio_records)
            .where(audio_records.c.claim_token.is_not(None))
            .values(claim_expires_at=0.0)
        )
    second = subprocess.Popen([CONVEYOR, "worker"], env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                stages = conn.execute(
                    select(audio_records.c.stage, audio_records.c.halt_reason)
                ).all()
            if all(s == "done" or r is not None for s, r in stages):
                break
            time.sleep(0.3)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    assert second.returncode == 0  # a graceful stop
    with engine.connect() as conn:
        records = conn.execute(select(audio_records).order_by(audio_records.c.id)).mappings().all()
        attempts = conn.execute(select(recognition_attempts)).mappings().all()
        transcripts = conn.execute(select(texts.c.record_id)).scalars().all()
    assert [(r["id"], r["stage"], r["halt_reason"]) for r in records] == [
        (i, "done", None) for i in ids
    ]
    # No duplicate attempt for one claim, and no second paid call for one record.
    assert all(n == 1 for n in Counter(a["claim_token"] for a in attempts).values())
    assert sorted(a["record_id"] for a in attempts) == ids
    assert sorted(transcripts) == ids
