"""``conveyor worker --lanes``: one process serves some lanes, others serve the rest (D8, M7).

Recognition, image variants and video transcodes can run on different hosts: a worker serves
only the lanes it is given, says which at start, refuses a lane no domain declares, and checks
the recognizer only when it serves the audio lane.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import ctranslate2
import pytest

from conveyor.cli.exits import ExitCode
from tests.support.cli_run import CONVEYOR, clean_env, invoke


@pytest.fixture(autouse=True)
def _in_a_fresh_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _started_lanes(tmp_path: Path, *args: str, **env: str) -> str:
    """Start ``conveyor worker ARGS…``, return its "worker pool started" line, stop it (exit 0)."""
    proc = subprocess.Popen(
        [CONVEYOR, "worker", *args],
        cwd=tmp_path,
        env=clean_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = ""
    try:
        while line := proc.stderr.readline():
            seen += line
            if "worker pool started" in line:
                return line
        raise AssertionError(f"the worker never started its pool:\n{seen}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert proc.returncode == 0, seen


def test_an_unknown_lane_is_refused_with_the_lanes_there_are() -> None:
    result = invoke("worker", "--lanes", "audio,gpu")
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert "unknown lane 'gpu'" in result.stderr
    assert "audio, short, long" in result.stderr


def test_an_empty_lane_list_is_refused() -> None:
    result = invoke("worker", "--lanes", " , ")
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert "--lanes names no lane" in result.stderr


def test_workers_sets_the_audio_lane_and_needs_it_served() -> None:
    result = invoke("worker", "--lanes", "short", "--workers", "2")
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert "--lanes does not serve audio" in result.stderr


def test_a_worker_serves_only_its_lanes_and_skips_the_recognizer_without_audio(
    tmp_path: Path,
) -> None:
    # A compute type this CPU cannot run stops a worker that serves audio (see
    # test_cli_config); a worker of the image and video lanes never loads the recognizer.
    unsupported = sorted(
        {"float16", "bfloat16", "int8_float16"} - ctranslate2.get_supported_compute_types("cpu")
    )
    assert unsupported
    line = _started_lanes(
        tmp_path,
        "--lanes",
        "short,long",
        CONVEYOR_TRANSCRIPTION__COMPUTE_TYPE=unsupported[0],
        CONVEYOR_MEDIA__SHORT_WORKERS="2",
        CONVEYOR_MEDIA__LONG_WORKERS="1",
    )
    assert re.search(r"worker pool started: short=2, long=1$", line.strip()), line
    refused = invoke(
        "worker", "--lanes", "audio", CONVEYOR_TRANSCRIPTION__COMPUTE_TYPE=unsupported[0]
    )
    assert refused.exit_code == ExitCode.USAGE, refused.stderr


def test_workers_still_sets_the_audio_lane(tmp_path: Path) -> None:
    line = _started_lanes(tmp_path, "--lanes", "audio", "--workers", "0")
    assert line.strip().endswith("worker pool started: audio=0"), line
    every = _started_lanes(tmp_path, "--workers", "0", CONVEYOR_MEDIA__SHORT_WORKERS="3")
    assert re.search(r"audio=0, short=3, long=\d+$", every.strip()), every
