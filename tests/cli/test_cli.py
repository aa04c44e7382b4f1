"""The CLI as a user runs it: ingest, records show/events/resume, db upgrade (SQLite default)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from conveyor.audio.intake import accept_audio
from conveyor.cli.exits import ExitCode
from conveyor.config import DatabaseSettings, Settings, StorageSettings
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock
from tests.support.cli_run import run


def test_ingest_prints_the_transcript_on_the_embedded_default(tmp_path: Path, corpus: Path) -> None:
    result = run(["ingest", str(corpus / "audio" / "jfk.mp3")], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ask not what your country can do for you" in result.stdout
    assert (tmp_path / "conveyor-data" / "conveyor.db").is_file()


def test_halted_record_shows_its_reason_and_resume_continues_from_its_stage(
    tmp_path: Path, corpus: Path
) -> None:
    result = run(["ingest", str(corpus / "audio" / "corrupt_bad_header.wav")], tmp_path)
    assert result.returncode == 1
    assert "undecodable" in result.stdout
    # The log line says when, what, and whether a resume helps.
    assert re.search(
        r"^\d{4}-\d\d-\d\dT[\d:.]+Z WARNING record 1 halted at uploaded: undecodable: .*"
        r"\(resume will not help",
        result.stderr,
        re.MULTILINE,
    ), result.stderr
    show = run(["records", "show", "1"], tmp_path)
    assert show.returncode == 0 and "halted" in show.stdout and "cannot be opened" in show.stdout
    # A content halt says that a resume will not help and what to do instead.
    assert "resume will not help" in show.stdout and "upload it again" in show.stdout
    assert "halted at  20" in show.stdout and "attempts   0" in show.stdout
    halted = run(["records", "list", "--halted"], tmp_path)
    assert halted.returncode == 0 and "corrupt_bad_header.wav" in halted.stdout
    resumed = run(["records", "resume", "1"], tmp_path)
    assert resumed.returncode == 0 and "resumed at stage uploaded" in resumed.stdout
    assert "`conveyor worker`" in resumed.stdout  # nothing moves it without a worker
    again = run(["records", "resume", "1"], tmp_path)
    assert again.returncode == ExitCode.CONFLICT and "is not halted" in again.stderr
    assert "at stage uploaded, waiting for a worker" in again.stderr
    events = run(["records", "events", "1"], tmp_path)
    assert "resumed" in events.stdout and "human" in events.stdout
    listing = run(["records", "list", "--halted"], tmp_path)
    assert listing.returncode == 0 and "corrupt_bad_header.wav" not in listing.stdout  # resumed


def test_unknown_record_and_bad_config_are_clear_errors(tmp_path: Path) -> None:
    missing = run(["records", "show", "42"], tmp_path)
    assert missing.returncode == ExitCode.NOT_FOUND and "does not exist" in missing.stderr
    bad = run(["records", "list"], tmp_path, CONVEYOR_PIPELINE__WORKERS="-1")
    assert bad.returncode == 2 and "invalid configuration" in bad.stderr
    upgraded = run(["db", "upgrade"], tmp_path)
    assert upgraded.returncode == 0 and "already at revision" in upgraded.stdout


def test_bad_input_is_refused_up_front_with_clear_errors(tmp_path: Path, corpus: Path) -> None:
    language = run(["ingest", "--language", "xx", str(corpus / "audio" / "jfk.wav")], tmp_path)
    assert language.returncode == 2 and "'xx' is not a language code" in language.stderr
    folder = run(["ingest", str(corpus / "audio")], tmp_path)
    assert folder.returncode == 1 and "is a directory" in folder.stderr
    stage = run(["records", "list", "--stage", "bogus"], tmp_path)
    assert stage.returncode == 2 and "uploaded, normalized" in stage.stderr
    (tmp_path / "conveyor.toml").write_text("[pipeline]\nworkerz = 3\n")
    typo = run(["records", "list"], tmp_path)
    assert typo.returncode == 2 and "[pipeline] workerz is not a setting" in typo.stderr
    (tmp_path / "conveyor.toml").write_text("[pipeline\n")
    broken = run(["records", "list"], tmp_path)
    assert broken.returncode == 2 and "invalid configuration" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_a_language_code_in_any_case_is_accepted_and_stored_lower_case(
    tmp_path: Path, corpus: Path
) -> None:
    wav = str(corpus / "audio" / "jfk.wav")
    result = run(["ingest", "--language", " EN ", wav], tmp_path, CONVEYOR_PIPELINE__WORKERS="0")
    assert result.returncode != ExitCode.USAGE, result.stderr
    card = json.loads(run(["records", "show", "1", "--json"], tmp_path).stdout)
    assert card["language"] == "en"
    refused = run(["ingest", "--language", "ZZ", wav], tmp_path, CONVEYOR_PIPELINE__WORKERS="0")
    assert refused.returncode == ExitCode.USAGE
    assert "'zz' is not a language code the recognizer knows" in refused.stderr


def test_ingest_without_workers_exits_0_with_the_records_waiting_as_documented(
    tmp_path: Path, corpus: Path
) -> None:
    result = run(
        ["ingest", str(corpus / "audio" / "jfk.wav")], tmp_path, CONVEYOR_PIPELINE__WORKERS="0"
    )
    assert result.returncode == ExitCode.OK, result.stderr
    assert "wait for a `conveyor worker`" in result.stderr
    assert "1 unfinished" in result.stderr
    # docs/cli.md says the same: a hand-off to a worker is not exit 1.
    docs = " ".join((Path(__file__).parents[2] / "docs" / "cli.md").read_text().split())
    assert "with `[pipeline] workers = 0`: when every file was accepted" in docs
    assert "halted or were left unfinished" not in docs


def test_text_said_to_be_raw_pcm_is_refused_as_not_pcm(tmp_path: Path, corpus: Path) -> None:
    # Raw PCM is still sniffed: text, markup, documents and images are never "decoded".
    result = run(["ingest", "--raw-pcm", str(corpus / "audio" / "not_audio_text.wav")], tmp_path)
    assert result.returncode == 1
    assert "not headerless PCM" in result.stdout + result.stderr


def test_compressed_audio_said_to_be_raw_pcm_is_refused_before_it_is_stored(
    tmp_path: Path, corpus: Path
) -> None:
    # Read as samples, the MP3 would "succeed" as 2 s of noise with no speech.
    result = run(["ingest", "--raw-pcm", str(corpus / "audio" / "jfk.mp3")], tmp_path)
    assert result.returncode == ExitCode.HALTED, result.stderr
    assert "this file is MP3 audio, not headerless PCM" in result.stderr
    assert "without --raw-pcm" in result.stderr
    assert "0 accepted" in result.stderr
    listing = run(["records", "list"], tmp_path)
    assert "jfk.mp3" not in listing.stdout
    # Real headerless PCM is still accepted and transcribed.
    pcm = run(["ingest", "--raw-pcm", str(corpus / "audio" / "goforward.raw")], tmp_path)
    assert pcm.returncode == 0, pcm.stderr
    assert "forward" in pcm.stdout


def test_headerless_pcm_without_raw_pcm_is_refused_with_the_hint(
    tmp_path: Path, corpus: Path
) -> None:
    result = run(["ingest", str(corpus / "audio" / "goforward.raw")], tmp_path)
    assert result.returncode == 1
    assert "--raw-pcm" in result.stdout + result.stderr


def test_transcript_printed_to_a_pipe_is_not_wrapped(tmp_path: Path, corpus: Path) -> None:
    result = run(["ingest", str(corpus / "audio" / "jfk.wav")], tmp_path, COLUMNS="")
    assert result.returncode == 0
    assert (
        "ask not what your country can do for you, ask what you can do for your country."
        in result.stdout
    )


def test_ingest_piped_prints_one_progress_line_per_stage_on_stderr(
    tmp_path: Path, corpus: Path
) -> None:
    # Without a terminal there is no progress bar; plain lines say how far each record is.
    result = run(["ingest", str(corpus / "audio" / "jfk.wav")], tmp_path)
    assert result.returncode == 0, result.stderr
    lines = re.findall(r"^record 1: (\S+)$", result.stderr, re.MULTILINE)
    assert lines and lines[-1] == "done", result.stderr
    assert len(lines) == len(set(lines))  # each state once
    assert "record 1: " not in result.stdout  # stdout keeps the card and transcript only


def test_the_recognizer_ingest_starts_outlives_it_until_idle_exit_as_documented(
    tmp_path: Path, corpus: Path
) -> None:
    result = run(
        ["ingest", str(corpus / "audio" / "jfk.wav")],
        tmp_path,
        CONVEYOR_TRANSCRIPTION__IDLE_EXIT="3",
    )
    assert result.returncode == 0, result.stderr
    # Where docs/cli.md says to find it: still running after ingest exited, gone once idle.
    slots = list((tmp_path / "conveyor-data" / "recognizer" / ".servers").glob("slot-*.json"))
    assert slots
    pid = int(json.loads(slots[0].read_text())["pid"])
    assert _running(pid)
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(pid)
    docs = " ".join((Path(__file__).parents[2] / "docs" / "cli.md").read_text().split())
    assert "each exits by itself after `[transcription] idle_exit` seconds" in docs
    assert "`pid` in `<storage root>/recognizer/.servers/slot-N.json`" in docs


def _running(pid: int) -> bool:
    # The recognizer is not our child (it has its own session), so no zombie lingers.
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_d3_records_stats_shows_the_backlog_per_domain_and_stage(
    tmp_path: Path, corpus: Path
) -> None:
    data = tmp_path / "conveyor-data"
    settings = Settings(
        database=DatabaseSettings(url=f"sqlite:///{data / 'conveyor.db'}"),
        storage=StorageSettings(root=data),
    )
    runtime = Runtime(settings, FakeClock(start=1_000_000.0))  # accepted long ago
    runtime.migrate()
    for _ in range(2):
        accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            corpus / "audio" / "jfk.wav",
            owner="ann",
            keep_duplicate=True,
        )
    runtime.engine.dispose()
    result = run(["records", "stats", "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {(r["domain"], r["stage"]): r for r in json.loads(result.stdout)}
    assert rows["audio", "uploaded"]["waiting"] == 2
    assert rows["audio", "uploaded"]["oldest_seconds"] > 3600 * 24 * 365  # real time since
    assert rows["media", "uploaded"]["waiting"] == 0
    table = run(["records", "stats"], tmp_path)
    assert table.returncode == 0 and "uploaded" in table.stdout
    assert re.search(r" \d+\.\dd\b", table.stdout), table.stdout  # days, one word: `412.3d`


def test_a_transcript_of_channels_heard_apart_is_indented_line_by_line(
    tmp_path: Path, corpus: Path
) -> None:
    stereo = str(corpus / "audio" / "stereo_two_speakers.wav")
    result = run(["ingest", "--channels", "separate", "--language", "en", stereo], tmp_path)
    assert result.returncode == 0, result.stderr
    heading = result.stdout.index("  transcript")
    lines = result.stdout[heading:].splitlines()[1:]
    said = [line for line in lines if line.strip()]
    # One line per segment, labelled by channel, every one under the heading.
    assert {line[4:7] for line in said} >= {"[1]", "[2]"}, result.stdout
    assert all(line.startswith("    [") for line in said), result.stdout
