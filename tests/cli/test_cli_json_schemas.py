"""``--json`` output against its documented schema in docs/cli.md, parsed from real runs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from conveyor.audio.stages import AUDIO
from conveyor.cli.intake_output import event_states
from conveyor.media.stages import MEDIA
from tests.support.cli_run import run

NO_WORKERS = {"CONVEYOR_PIPELINE__WORKERS": "0", "CONVEYOR_MEDIA__SHORT_WORKERS": "0"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_records_stats_json_has_null_for_the_oldest_of_no_waiting_record(
    tmp_path: Path, corpus: Path
) -> None:
    empty = run(["records", "stats", "--json"], tmp_path)
    assert empty.returncode == 0, empty.stderr
    rows = json.loads(empty.stdout)
    assert rows and all(set(r) == {"domain", "stage", "waiting", "oldest_seconds"} for r in rows)
    assert {(r["waiting"], r["oldest_seconds"]) for r in rows} == {(0, None)}
    added = run(["records", "add", str(corpus / "audio" / "jfk.wav")], tmp_path, **NO_WORKERS)
    assert added.returncode == 0, added.stderr
    rows = json.loads(run(["records", "stats", "--json"], tmp_path).stdout)
    (waiting,) = [r for r in rows if r["waiting"]]
    assert (waiting["domain"], waiting["stage"], waiting["waiting"]) == ("audio", "uploaded", 1)
    assert isinstance(waiting["oldest_seconds"], float) and waiting["oldest_seconds"] >= 0
    assert all(r["oldest_seconds"] is None for r in rows if not r["waiting"])
    assert "`null` when `waiting` is 0" in DOCS.read_text()


def _section(command: str) -> str:
    """The text of docs/cli.md's section ``### `conveyor COMMAND```, up to the next heading."""
    text = DOCS.read_text()
    start = text.index(f"### `conveyor {command}`")
    return text[start : text.index("\n#", start + 1)]


def _documented_states(command: str) -> set[str]:
    """The stages the ``state`` event of ``command`` is documented to carry: the list after
    "one of" where the section speaks of the event's ``state``."""
    section = _section(command)
    where = re.search(r"`state`[^\n]*?one of ((?:`[a-z_]+`(?:, )?)+)", section)
    assert where, f"docs/cli.md: {command} lists no state values"
    assert "`halted: REASON`" in section[where.end() : where.end() + 40], command
    return set(re.findall(r"`([a-z_]+)`", where.group(1)))


def _states(stdout: str) -> list[str]:
    events: list[dict[str, Any]] = [json.loads(line) for line in stdout.splitlines() if line]
    return [e["state"] for e in events if e["event"] == "state"]


def test_the_documented_state_values_are_the_declared_ones() -> None:
    for command, noun, declaration in (
        ("records add", "record", AUDIO),
        ("media add", "item", MEDIA),
    ):
        states = event_states(noun)
        stages = {s for s in states if not s.startswith("halted: ")}
        assert _documented_states(command) == stages == set(declaration.stage_names), command
        reasons = {str(r) for enum in declaration.halt_reasons for r in enum}
        assert states - stages == {f"halted: {r}" for r in reasons}, command


def test_media_add_json_emits_only_the_declared_states(tmp_path: Path, corpus: Path) -> None:
    """A photo that is done, one that halts and a video left at transcoding (long_workers = 0):
    each ``state`` is a declared value, the video's the stage itself, not the people's label."""
    media = corpus / "media"
    assert run(["albums", "create", "Trip"], tmp_path).returncode == 0
    done = run(
        ["media", "add", "Trip", str(media / "exif-samples__Canon_40D.jpg"), "--json"], tmp_path
    )
    halted = run(
        ["media", "add", "Trip", str(media / "pillow__truncated_jpeg.jpg"), "--json"], tmp_path
    )
    video = run(
        ["media", "add", "Trip", str(media / "file-type__fixture.mov"), "--json"],
        tmp_path,
        CONVEYOR_MEDIA__LONG_WORKERS="0",
    )
    assert done.returncode == 0 and video.returncode == 0, (done.stderr, video.stderr)
    assert halted.returncode == 1, halted.stderr
    seen = [*_states(done.stdout), *_states(halted.stdout), *_states(video.stdout)]
    assert set(seen) <= event_states("item"), seen
    assert {"done", "halted: undecodable", "transcoding"} <= set(seen), seen
    assert "variants ready; transcoding playback" in video.stderr  # people's words, stderr only
    # A rerun finds the video already there and says its state in the same words, at once.
    again = run(
        ["media", "add", "Trip", str(media / "file-type__fixture.mov")],
        tmp_path,
        CONVEYOR_MEDIA__LONG_WORKERS="0",
    )
    assert again.returncode == 0, again.stderr
    assert "already there as item" in again.stderr
    assert "variants ready; transcoding playback" in again.stderr, again.stderr
    assert not re.search(r"item \d+: transcoding$", again.stderr, re.MULTILINE), again.stderr


def test_records_add_json_emits_only_the_declared_states(tmp_path: Path, corpus: Path) -> None:
    added = run(["records", "add", str(corpus / "audio" / "jfk.wav"), "--json"], tmp_path)
    assert added.returncode == 0, added.stderr
    seen = _states(added.stdout)
    assert set(seen) <= event_states("record") and seen[-1] == "done", seen
