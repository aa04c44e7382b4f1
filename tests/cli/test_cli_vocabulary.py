"""``conveyor vocabulary`` keeps an owner's standing hints; ``ingest --channels`` chooses
per-channel recognition for the records it accepts (issue 9 §5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conveyor.cli.exits import ExitCode
from tests.support.cli_run import invoke


def test_vocabulary_set_show_clear_per_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    empty = invoke("vocabulary", "show")
    assert empty.exit_code == 0 and empty.stdout == ""
    assert "no vocabulary" in empty.stderr
    assert invoke("vocabulary", "set", "Kubernetes,  Anya Petrova").exit_code == 0
    assert invoke("vocabulary", "set", "Sorensen", "--owner", "ann").exit_code == 0
    assert invoke("vocabulary", "show").stdout == "Kubernetes, Anya Petrova\n"
    assert invoke("vocabulary", "show", "--owner", "ann").stdout == "Sorensen\n"
    too_long = invoke("vocabulary", "set", "x" * 1001)
    assert too_long.exit_code == ExitCode.USAGE
    assert "vocabulary hint text is longer than 1,000 characters" in too_long.stderr
    assert "hints" not in too_long.stderr
    assert invoke("vocabulary", "show").stdout == "Kubernetes, Anya Petrova\n"
    assert invoke("vocabulary", "clear").exit_code == 0
    assert invoke("vocabulary", "show").stdout == ""
    assert invoke("vocabulary", "show", "--owner", "ann").stdout == "Sorensen\n"


def test_ingest_channels_is_kept_on_the_record_and_checked(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    stereo = str(corpus / "audio" / "stereo_two_speakers.wav")
    held = {"CONVEYOR_PIPELINE__WORKERS": "0"}
    assert invoke("ingest", "--channels", "separate", stereo, **held).exit_code == 0
    assert invoke("ingest", "--keep-duplicates", stereo, **held).exit_code == 0
    assert (
        invoke(
            "ingest",
            "--keep-duplicates",
            stereo,
            CONVEYOR_TRANSCRIPTION__CHANNELS="separate",
            **held,
        ).exit_code
        == 0
    )
    cards = [json.loads(invoke("records", "show", str(n), "--json").stdout) for n in (1, 2, 3)]
    assert [card["channels"] for card in cards] == ["separate", "mix", "separate"]
    # The record's own hints are on its card, as on its web page.
    hinted = invoke("ingest", "--keep-duplicates", "--hints", "Sorensen,  Kennedy", stereo, **held)
    assert hinted.exit_code == 0, hinted.stderr
    assert "  hints      Sorensen, Kennedy\n" in invoke("records", "show", "4").stdout
    shown = json.loads(invoke("records", "show", "4", "--json").stdout)
    assert shown["hints"] == "Sorensen, Kennedy"
    assert json.loads(invoke("records", "show", "1", "--json").stdout)["hints"] is None
    assert "hints" not in invoke("records", "show", "1").stdout
    # The text card says it too, as docs/cli.md promises for --channels.
    assert "  channels   separate\n" in invoke("records", "show", "1").stdout
    assert "  channels   mix\n" in invoke("records", "show", "2").stdout
    # A recording's own hints keep their own message; a usage mistake, before any file.
    hints = invoke("ingest", "--hints", "x" * 1001, stereo, **held)
    assert hints.exit_code == ExitCode.USAGE
    assert "vocabulary hint text is longer than 1,000 characters (it has 1,001)" in hints.stderr
    wrong = invoke("ingest", "--channels", "both", stereo, **held)
    assert wrong.exit_code == ExitCode.USAGE and "mix or separate" in wrong.stderr
