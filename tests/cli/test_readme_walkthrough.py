"""The README's first hour runs as written: its quick start (``conveyor records add my-note.ogg``)
and then its HTTP walk-through, the shell block copied from README.md and run by bash.

Only the port differs (a free one instead of 8000, so tests can run side by side); the files the
README names are corpus files under those names. The quick start's record belongs to ``me``, so
the walk-through must take alice's ids from the answers (``/api/records/1`` would be 404)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.cli_run import clean_env
from tests.support.servers import free_port

README = Path(__file__).resolve().parents[2] / "README.md"
BIN = str(Path(sys.executable).parent)


def _block(starting: str) -> str:
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(), flags=re.M | re.S)
    (found,) = [b for b in blocks if b.startswith(starting)]
    return str(found)


def _documents(text: str) -> list[dict[str, Any]]:
    """The JSON objects in curl's output (its answers end without a newline)."""
    decoder = json.JSONDecoder()
    found, at = [], text.find("{")
    while at != -1:
        try:
            document, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        found.append(document)
        at = text.find("{", end)
    return found


def _wait_gone(group: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(group, signal.SIGKILL)
    raise AssertionError("the walk-through left a process running after `kill %1`")


def test_the_readme_quick_start_and_http_walkthrough_run_as_written(
    tmp_path: Path, corpus: Path
) -> None:
    for name, source in {
        "my-note.ogg": "audio/LDC93S1.opus",
        "note.ogg": "audio/LDC93S1.opus",
        "note.pcm": "audio/goforward.raw",
        "IMG_0001.heic": "media/immich-test-assets__IMG_2682.heic",
    }.items():
        (tmp_path / name).symlink_to(corpus / source)
    port = free_port()
    env = clean_env(
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        CONVEYOR_API__PORT=str(port),
        CONVEYOR_TRANSCRIPTION__IDLE_EXIT="5",  # the warm recognizer leaves soon after
    )
    quick = _block("./scripts/install").splitlines()[0]
    command = quick.split("&&")[1].split("#")[0].strip().removeprefix(".venv/bin/")
    assert command == "conveyor records add my-note.ogg"
    first = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 0, first.stderr
    assert "record 1" in first.stdout and "transcript" in first.stdout
    script = _block("conveyor users create alice").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    walk = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    out, err = walk.communicate(timeout=300)
    _wait_gone(walk.pid, 60)
    assert walk.returncode == 0, err
    answers = _documents(out)
    cards = [a for a in answers if "stage" in a and "owner" in a]
    assert {c["owner"] for c in cards} == {"alice"} and len(cards) >= 2, out
    errors = [a["error"] for a in answers if isinstance(a.get("error"), dict)]
    assert all(e["code"] == "no_text" for e in errors), errors  # not done yet is fine
    assert "conveyor serving API and workers" in out + err
