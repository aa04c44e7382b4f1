"""Conveyor from a script: ``--json`` on every command that lists or produces something (parsed
here, with the fields docs/cli.md gives), JSON Lines from ``records add``/``media add``, ``-q``,
``-v``/``--log-level``, ``-h``, old verbs as hidden aliases, tables without empty cells, any
file name a file system gives, Ctrl-C during intake, a storage that cannot take a file, usage
mistakes refused before anything is stored, and prompts that behave on piped input."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from conveyor.cli.exits import ExitCode
from conveyor.names import MAX_NAME, escaped_name, name_bytes
from tests.support.cli_run import CONVEYOR, clean_env, commands, invoke, run

NO_WORKERS = {"CONVEYOR_PIPELINE__WORKERS": "0", "CONVEYOR_MEDIA__SHORT_WORKERS": "0"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_every_listing_and_producing_command_takes_json() -> None:
    produce = {
        "records add", "records list", "records show", "records events", "records resume",
        "records delete", "records stats", "albums create", "albums list", "albums delete",
        "media add", "media list", "media show", "media resume", "media delete",
        "users create", "users list", "tokens create", "tokens list", "vocabulary show",
        "vocabulary set", "db upgrade", "version", "albums share", "albums unshare",
        "albums shares", "albums link create", "albums link list", "albums link revoke",
    }  # fmt: skip
    found = {
        name
        for name, command in commands()
        if not command.hidden and any("--json" in p.opts for p in command.params)
    }
    assert produce <= found


def test_json_documents_parse_with_the_documented_fields(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    jfk = str(corpus / "audio" / "jfk.wav")
    photo = str(corpus / "media" / "exif-samples__Canon_40D.jpg")

    def parsed(*args: str) -> Any:
        result = invoke(*args, "--json", **NO_WORKERS)
        assert result.exit_code == 0, (args, result.stderr)
        return json.loads(result.stdout)

    assert set(parsed("version")) == {"version"}
    upgrade = parsed("db", "upgrade")
    assert isinstance(upgrade, dict) and set(upgrade) == {"database", "before", "after"}
    assert parsed("records", "list") == []
    events = _lines(invoke("records", "add", jfk, "--json", **NO_WORKERS).stdout)
    assert [e["event"] for e in events] == ["accepted", "result", "summary"]
    (row,) = parsed("records", "list")
    assert set(row) == {"id", "owner", "name", "stage", "halt_reason", "created_at"}
    assert row["name"] == "jfk.wav" and row["halt_reason"] is None
    (event,) = parsed("records", "events", "1")
    assert set(event) == {"time", "stage", "outcome", "origin", "text"}
    assert event["outcome"] == "accepted"
    assert {r["stage"] for r in parsed("records", "stats")} >= {"uploaded"}
    resumed = parsed("records", "resume", "--all", "--dry-run")
    assert resumed == {"dry_run": True, "selected": [], "resumed": [], "skipped": []}
    album = parsed("albums", "create", "Trip")
    assert isinstance(album, dict) and set(album) == {"id", "name", "owner"}
    added = _lines(invoke("media", "add", "Trip", photo, "--json", **NO_WORKERS).stdout)
    assert added[0] == {"event": "accepted", "file": photo, "item": 1}
    (albums,) = parsed("albums", "list")
    assert set(albums) == {"id", "owner", "name", "items", "created_at"} and albums["items"] == 1
    (item,) = parsed("media", "list", "Trip")
    assert item["id"] == 1 and "roles" in item
    user = parsed("users", "create", "ann")
    assert user == {"id": 1, "name": "ann", "password": False, "admin": False}
    (listed,) = parsed("users", "list")
    assert set(listed) == {"id", "name", "created_at", "password", "admin"}
    token = parsed("tokens", "create", "ann", "--label", "script")
    assert isinstance(token, dict) and set(token) == {"id", "user", "label", "token"}
    (tokens,) = parsed("tokens", "list", "ann")
    assert set(tokens) == {"id", "label", "created_at", "last_used_at"}
    assert tokens["last_used_at"] is None
    assert parsed("vocabulary", "set", "Kubernetes") == {"owner": "me", "hints": "Kubernetes"}
    assert parsed("vocabulary", "show") == {"owner": "me", "hints": "Kubernetes"}
    deleted = _lines(invoke("records", "delete", "1", "7", "--json").stdout)
    assert deleted == [{"id": 1, "deleted": True}, {"id": 7, "deleted": False}]
    # Every field named here is in docs/cli.md.
    text = DOCS.read_text()
    for field in ("halt_reason", "oldest_seconds", "last_used_at", "not_tried", "selected"):
        assert field in text


def test_tables_have_no_empty_cells(tmp_path: Path, corpus: Path) -> None:
    jfk = str(corpus / "audio" / "jfk.wav")
    assert run(["records", "add", jfk], tmp_path, **NO_WORKERS).returncode == 0
    run(["users", "create", "me"], tmp_path)
    run(["tokens", "create", "me"], tmp_path)  # no label, never used
    for args in (["records", "list"], ["records", "events", "1"], ["tokens", "list", "me"]):
        lines = run(args, tmp_path).stdout.splitlines()
        columns = len(lines[0].split())
        # The last column may be free text; every column before it has a word or a dash.
        widths = {len(line.split(None, columns - 1)) for line in lines[1:]}
        assert widths == {columns}, (args, lines)
    assert " - " in run(["tokens", "list", "me"], tmp_path).stdout
    # Where no column is free text, every cell is one word (the backlog's age: `3s`, `12min`).
    lines = run(["records", "stats"], tmp_path).stdout.splitlines()
    assert {len(line.split()) for line in lines} == {len(lines[0].split())}, lines


def test_a_name_that_is_not_utf8_is_accepted_and_shown_escaped(
    tmp_path: Path, corpus: Path
) -> None:
    odd = os.fsdecode(b"caf\xe9 \xff.wav")
    (tmp_path / odd).symlink_to(corpus / "audio" / "jfk.wav")
    later = tmp_path / "later.mp3"
    later.symlink_to(corpus / "audio" / "jfk.mp3")
    broken = tmp_path / "two\nlines.flac"
    broken.symlink_to(corpus / "audio" / "LDC93S1.flac")
    # A backslash is an ordinary byte of a POSIX name (only an HTTP name is cut at one).
    slashed = tmp_path / "take\\one.opus"
    slashed.symlink_to(corpus / "audio" / "LDC93S1.opus")
    result = subprocess.run(
        [CONVEYOR, "records", "add", odd, str(later), broken.name, slashed.name, "--json"],
        cwd=tmp_path,
        env=clean_env(**NO_WORKERS),
        capture_output=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    events = _lines(result.stdout.decode())
    assert events[0] == {"event": "accepted", "file": "caf\\xe9 \\xff.wav", "record": 1}
    assert events[1]["event"] == "accepted"  # the files after it are tried too
    assert events[2] == {"event": "accepted", "file": "two\\nlines.flac", "record": 3}
    shown = run(["records", "show", "1", "--json"], tmp_path)
    assert json.loads(shown.stdout)["original_name"] == "caf\\xe9 \\xff.wav"
    assert events[3]["event"] == "accepted"
    kept = run(["records", "show", str(events[3]["record"]), "--json"], tmp_path)
    assert json.loads(kept.stdout)["original_name"] == "take\\\\one.opus"
    assert "caf\\xe9 \\xff.wav" in run(["records", "list"], tmp_path).stdout


def test_json_names_give_the_paths_back(tmp_path: Path, corpus: Path, engine: Engine) -> None:
    # A newline and a backslash-n, a tab and a backslash-t: one string each before.
    raws = [
        b"new\nline.wav", b"new\\nline.wav", b"tab\there.wav", b"tab\\there.wav",
        b"caf\xe9\x1b\xff.wav", b"\\xff.wav", b"\xff" * 70 + b"tail.wav",
    ]  # fmt: skip
    for raw in raws:
        (tmp_path / os.fsdecode(raw)).symlink_to(corpus / "audio" / "jfk.wav")
    url = engine.url.render_as_string(hide_password=False).replace("+psycopg", "")
    env = {**NO_WORKERS, "CONVEYOR_DATABASE__URL": url}
    result = subprocess.run(
        [CONVEYOR, "records", "add", "--keep-duplicates", "--json", *map(os.fsdecode, raws)],
        cwd=tmp_path,
        env=clean_env(**env),
        capture_output=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    accepted = [e for e in _lines(result.stdout.decode()) if e["event"] == "accepted"]
    files = [event["file"] for event in accepted]
    assert len(set(files)) == len(raws)
    # Both directions: the path's bytes to the text, the text back to the path's bytes.
    assert files == [escaped_name(raw) for raw in raws]
    assert [name_bytes(file) for file in files] == raws
    assert files[:2] == ["new\\nline.wav", "new\\\\nline.wav"]
    for file in files:  # the documented way back, from the text alone
        path = tmp_path / os.fsdecode(file.encode().decode("unicode_escape").encode("latin-1"))
        assert path.is_symlink(), file
    listed = json.loads(
        run(["records", "list", "--json", "--limit", "100"], tmp_path, **env).stdout
    )
    kept = {record["id"]: record["name"] for record in listed}
    names = [kept[event["record"]] for event in accepted]
    assert names[:-1] == files[:-1]  # a file's own name, as its path was
    # The long one is cut before escaping: whole escapes, its extension kept.
    assert len(names[-1]) <= MAX_NAME and names[-1].endswith("\\xff.wav"), names[-1]
    assert raws[-1].startswith(name_bytes(names[-1])[: -len(".wav")])


def test_ctrl_c_during_intake_says_what_was_accepted_and_a_rerun_makes_no_second_copy(
    tmp_path: Path, corpus: Path
) -> None:
    voice = (corpus / "audio" / "LDC93S1.opus").read_bytes()
    files = []
    for number in range(400):  # distinct bytes each: a trailer after the last Ogg page
        path = tmp_path / f"take-{number:03d}.ogg"
        path.write_bytes(voice + f"take {number}".encode())
        files.append(str(path))
    process = subprocess.Popen(
        [CONVEYOR, "records", "add", *files, "--json"],
        cwd=tmp_path,
        env=clean_env(**NO_WORKERS),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: communicate() reads the pipe itself, past any buffer of ours
    )
    assert process.stdout is not None
    # Read byte by byte: a buffered readline could take later lines that communicate() then
    # never sees (on a loaded machine the command writes several before we read).
    first = json.loads(process.stdout.readline())
    assert first["event"] == "accepted"
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGINT)  # a second one waits for the file in hand too
    rest_bytes, error_bytes = process.communicate(timeout=120)
    rest, errors = rest_bytes.decode(), error_bytes.decode()
    assert process.returncode == ExitCode.INTERRUPTED, errors
    events = [first, *_lines(rest)]
    summary = events[-1]
    accepted = [e["record"] for e in events if e["event"] == "accepted"]
    assert summary["event"] == "summary" and summary["stopped"] is True
    assert summary["accepted"] == len(accepted) and summary["not_tried"] > 0
    assert summary["accepted"] + summary["not_tried"] == len(files)
    assert f"accepted records {', '.join(map(str, accepted))}" in errors
    listing = json.loads(run(["records", "list", "--json", "--limit", "1000"], tmp_path).stdout)
    assert sorted(r["id"] for r in listing) == sorted(accepted)
    uploads = tmp_path / "conveyor-data" / "uploads"
    assert len([p for p in uploads.rglob("*") if p.is_file()]) == len(accepted)  # no orphan
    # The same command again takes only what the first run did not.
    again = run(["records", "add", *files, "--json"], tmp_path, **NO_WORKERS)
    assert again.returncode == 0, again.stderr
    rerun = _lines(again.stdout)
    assert sorted(e["record"] for e in rerun if e["event"] == "duplicate") == sorted(accepted)
    assert rerun[-1]["accepted"] == len(files) - len(accepted)
    assert rerun[-1]["duplicates"] == len(accepted)
    listing = json.loads(run(["records", "list", "--json", "--limit", "1000"], tmp_path).stdout)
    assert len(listing) == len(files)  # one record per file, none twice
    # What the rerun stored of a file already there was removed with it.
    assert len([p for p in uploads.rglob("*") if p.is_file()]) == len(files)


#: Runs ``conveyor ARGS…`` in this interpreter and prints how often the file ``$WATCHED`` was
#: opened (the interpreter's audit events, so every way of opening it counts).
_COUNT_OPENS = """
import os, sys
watched = os.environ["WATCHED"]
opened = []
sys.addaudithook(
    lambda event, args: opened.append(1)
    if event == "open" and args and os.fsdecode(args[0]) == watched else None
)
from conveyor.cli.entry import main
try:
    main()
finally:
    print(f"opened {len(opened)}", file=sys.stderr)
"""


def test_a_file_added_is_read_once_new_or_already_there(tmp_path: Path, corpus: Path) -> None:
    """The duplicate check uses the digest the store computes as it stores the file, so a file is
    read (and hashed) once whether it is new or already there; the copy a rerun stored of a
    file already there is removed, and the person is told which record holds it."""
    recording = tmp_path / "jfk.wav"
    recording.write_bytes((corpus / "audio" / "jfk.wav").read_bytes())

    def add() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _COUNT_OPENS, "records", "add", str(recording)],
            cwd=tmp_path,
            env=clean_env(**NO_WORKERS, WATCHED=str(recording)),
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = add()
    assert first.returncode == 0, first.stderr
    assert "opened 1" in first.stderr
    again = add()
    assert again.returncode == 0, again.stderr
    assert "opened 1" in again.stderr
    assert f"{recording}: already there as record 1; not stored again" in again.stderr
    uploads = tmp_path / "conveyor-data" / "uploads"
    assert len([p for p in uploads.rglob("*") if p.is_file()]) == 1


def _file_size_limit(limit: int) -> None:
    # A file system that takes no more than `limit` bytes per file: writes past it fail with
    # EFBIG, as a full disk's fail with ENOSPC (the signal would kill the process instead).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_storage_that_cannot_take_a_file_is_exit_5_not_a_refusal(
    tmp_path: Path, corpus: Path
) -> None:
    assert run(["db", "upgrade"], tmp_path).returncode == 0  # the database exists, small
    big = tmp_path / "big.wav"
    big.write_bytes((corpus / "audio" / "jfk.wav").read_bytes() * 8)  # 2.8 MB
    small = str(corpus / "audio" / "jfk.wav")
    result = subprocess.run(
        [CONVEYOR, "records", "add", small, str(big), small],
        cwd=tmp_path,
        env=clean_env(**NO_WORKERS),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=lambda: _file_size_limit(2 * 1024 * 1024),
    )
    assert result.returncode == ExitCode.UNAVAILABLE, result.stderr
    storage = (tmp_path / "conveyor-data").resolve()
    assert (
        f"cannot store {big}: the storage folder {storage} cannot take a file this large "
        "(File too large); store it elsewhere" in result.stderr
    )
    assert "cannot be read" not in result.stderr
    assert "accepted records 1" in result.stderr
    # The summary's counts add up to the files given: the file the storage failed on and the
    # one after it were not taken.
    assert "3 files: 1 accepted as records" in result.stderr
    assert "0 refused, 2 not tried" in result.stderr
    listing = json.loads(run(["records", "list", "--json"], tmp_path).stdout)
    assert [r["id"] for r in listing] == [1]


def test_usage_mistakes_exit_2_before_anything_is_stored(tmp_path: Path, corpus: Path) -> None:
    jfk = str(corpus / "audio" / "jfk.wav")
    for args in (
        ["records", "add", "--hints", "x" * 1001, jfk],
        ["records", "add", "--owner", " ", jfk],
        ["records", "add", "--channels", "both", jfk],
        ["records", "add", "--log-level", "loud", jfk],
    ):
        result = run(args, tmp_path, **NO_WORKERS)
        assert result.returncode == ExitCode.USAGE, (args, result.stderr)
        assert not (tmp_path / "conveyor-data" / "uploads").exists(), args
    typo = run(["records", "resume", "--reason", "stuk"], tmp_path)
    assert typo.returncode == ExitCode.USAGE
    assert "unknown halt reason 'stuk'" in typo.stderr and "stuck" in typo.stderr


def test_quiet_verbose_help_and_old_verbs(tmp_path: Path, corpus: Path) -> None:
    quiet = run(["records", "list", "-q"], tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == ""
    before = run(["-q", "records", "list"], tmp_path)
    assert before.returncode == 0 and before.stderr == ""
    loud = run(["records", "list", "--log-level", "DEBUG"], tmp_path)
    assert loud.returncode == 0 and "database" in loud.stderr
    assert run(["records", "list", "-vv"], tmp_path).returncode == 0
    short = invoke("records", "list", "-h")
    assert short.exit_code == 0 and "--json" in short.stdout
    old = run(["ingest", str(corpus / "audio" / "jfk.mp3")], tmp_path, **NO_WORKERS)
    assert old.returncode == 0, old.stderr
    assert run(["users", "add", "ann"], tmp_path).returncode == 0
    top = invoke("--help").stdout
    assert "ingest" not in top.split("Commands:")[1]
    assert "add " not in invoke("users", "--help").stdout.split("Commands:")[1]


def test_prompts_on_piped_input(tmp_path: Path) -> None:
    run(["users", "create", "bob"], tmp_path)
    missing = run(["users", "passwd", "nobody"], tmp_path)
    assert missing.returncode == ExitCode.NOT_FOUND and "password" not in missing.stdout
    ended = subprocess.run(
        [CONVEYOR, "users", "passwd", "bob"],
        cwd=tmp_path,
        env=clean_env(),
        input="only-one-line\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ended.returncode == ExitCode.USAGE
    assert "standard input ended" in ended.stderr and ended.stdout == ""
    taken = run(["users", "create", "bob", "--password"], tmp_path)
    assert taken.returncode == ExitCode.CONFLICT  # said before any prompt


#: Runs ``conveyor ARGS…`` as the console script does, sending itself SIGINT when the module
#: ``$AT`` is about to be imported: a Ctrl-C at that instant of the start, every time.
_INTERRUPT_AT_IMPORT = """
import os, sys
at = os.environ["AT"]
class At:
    def find_spec(self, name, path=None, target=None):
        if name == at:
            os.kill(os.getpid(), 2)
        return None
sys.meta_path.insert(0, At())
from conveyor.cli.entry import main
sys.exit(main())
"""


def test_ctrl_c_while_the_command_starts_exits_130_without_a_traceback(tmp_path: Path) -> None:
    # From the console script's module on (the handler is its first statement): the modules
    # the start imports in order, the shared ones (typing, threading) in the window that
    # printed Python's KeyboardInterrupt traceback.
    modules = [
        "conveyor.cli.collector", "conveyor.cli.signals", "typing", "threading",
        "conveyor.cli.root", "typer", "rich", "conveyor.cli.ingest", "sqlalchemy",
        "conveyor.runtime",
    ]  # fmt: skip
    for module in modules:
        started = subprocess.run(
            [sys.executable, "-c", _INTERRUPT_AT_IMPORT, "records", "list"],
            cwd=tmp_path,
            env=clean_env(AT=module),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert started.returncode == ExitCode.INTERRUPTED, (module, started.stderr)
        assert started.stderr == "SIGINT: interrupted\n", (module, started.stderr)
        assert started.stdout == ""


def test_ctrl_c_at_a_prompt_exits_130_and_changes_nothing(tmp_path: Path) -> None:
    waiting = subprocess.Popen(
        [CONVEYOR, "users", "create", "bob", "--password"],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.PIPE,  # kept open: the command waits for the password
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert waiting.stderr is not None
    assert waiting.stderr.readline().startswith("database ")  # it runs; now it reads stdin
    waiting.send_signal(signal.SIGINT)
    _, errors = waiting.communicate(timeout=60)
    assert waiting.returncode == ExitCode.INTERRUPTED, errors
    assert "SIGINT: interrupted" in errors and "Traceback" not in errors
    assert json.loads(run(["users", "list", "--json"], tmp_path).stdout) == []


def test_quiet_adds_print_results_only(tmp_path: Path, corpus: Path) -> None:
    """``-q`` on a command that waits for its work: no progress lines, no notes; the result."""
    assert run(["albums", "create", "Trip"], tmp_path).returncode == 0
    photo = str(corpus / "media" / "exif-samples__Canon_40D.jpg")
    added = run(["media", "add", "-q", "Trip", photo], tmp_path)
    assert added.returncode == 0, added.stderr
    assert added.stderr == ""
    assert "done" in added.stdout


def test_the_shell_user_is_made_when_first_needed(tmp_path: Path) -> None:
    """``me`` owns what the shell adds without ``--owner``; ``tokens create me`` makes its user
    row (another name must be made first), and ``users list`` then shows it; before that it
    says how ``me`` is made, and ``tokens list me`` lists no tokens (not "does not exist")."""
    assert run(["albums", "create", "Trip"], tmp_path).returncode == 0
    before = run(["users", "list", "--json"], tmp_path)
    assert json.loads(before.stdout) == []
    assert "the shell's user 'me'" in before.stderr and "tokens create me" in before.stderr
    none_yet = run(["tokens", "list", "me", "--json"], tmp_path)
    assert none_yet.returncode == 0 and json.loads(none_yet.stdout) == []
    assert run(["tokens", "list", "ann"], tmp_path).returncode == ExitCode.NOT_FOUND
    missing = run(["tokens", "create", "ann", "--json"], tmp_path)
    assert missing.returncode == ExitCode.NOT_FOUND and missing.stdout == ""
    made = run(["tokens", "create", "me", "--json"], tmp_path)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["user"] == "me" and "user 'me' created" in made.stderr
    listed = run(["users", "list", "--json"], tmp_path)
    assert [u["name"] for u in json.loads(listed.stdout)] == ["me"]
    assert "the shell's user" not in listed.stderr
    again = run(["tokens", "create", "me", "--json"], tmp_path)
    assert again.returncode == 0 and "created" not in again.stderr


def test_users_passwd_me_makes_the_shell_user_only_with_a_password_it_takes(
    tmp_path: Path,
) -> None:
    """``users passwd me`` makes ``me`` once a password is given and long enough: input that
    ends first, or a short password, exits 2 and leaves no user behind."""

    def passwd(given: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CONVEYOR, "users", "passwd", "me"],
            cwd=tmp_path,
            env=clean_env(),
            input=given,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def users() -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = json.loads(run(["users", "list", "--json"], tmp_path).stdout)
        return listed

    ended = passwd("")
    assert ended.returncode == ExitCode.USAGE, ended.stderr
    assert "the password for 'me'" in ended.stderr and users() == []
    short = passwd("short\nshort\n")
    assert short.returncode == ExitCode.USAGE and "at least 8" in short.stderr
    assert users() == []
    made = passwd("long-enough-1\nlong-enough-1\n")
    assert made.returncode == 0, made.stderr
    assert "user 'me' created" in made.stderr
    assert [(u["name"], u["password"]) for u in users()] == [("me", True)]


#: A Ctrl-C whose handler runs inside a finalizer: Python prints "Exception ignored in …" and
#: drops the handler's SystemExit, as it can during a command's start (an import, a collected
#: object). What happens next is printed for the test to read.
_SWALLOWED_CTRL_C = """
import os, signal, sys
from conveyor.cli.signals import interrupt_exits, stop_on_signals

interrupt_exits()


class Finalized:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100_000):  # the handler runs in here; its SystemExit is ignored
            pass


Finalized()
print("went on", flush=True)
stop = stop_on_signals()
print("stop set" if stop.is_set() else "stop not set", flush=True)
"""


def test_a_ctrl_c_whose_exit_was_swallowed_at_start_still_stops_the_command() -> None:
    """A SIGINT during the start whose ``SystemExit`` a finalizer swallowed is not forgotten:
    the long command's graceful stop starts set, so intake takes nothing more (issue 23:
    Ctrl-C at any moment)."""
    done = subprocess.run(
        [sys.executable, "-c", _SWALLOWED_CTRL_C],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert "Exception ignored" in done.stderr, done.stderr  # the exit really was swallowed
    assert done.stdout.splitlines() == ["went on", "stop set"], done.stderr
    assert "SIGINT: stopping" in done.stderr


def test_a_command_that_ran_on_past_a_swallowed_ctrl_c_exits_130() -> None:
    """A short command that finished although a Ctrl-C came during its start (its exit
    swallowed by a finalizer) exits 130, so a script learns it was interrupted."""
    script = _SWALLOWED_CTRL_C.replace(
        'stop = stop_on_signals()\nprint("stop set" if stop.is_set() else "stop not set", '
        "flush=True)\n",
        'sys.argv = ["conveyor", "version"]\nfrom conveyor.cli.root import main\nmain()\n',
    )
    assert "main()" in script
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert "Exception ignored" in done.stderr, done.stderr
    assert done.returncode == ExitCode.INTERRUPTED, (done.stdout, done.stderr)


def test_a_hangup_during_intake_stops_it_as_ctrl_c_does_leaving_no_temporary(
    tmp_path: Path, corpus: Path
) -> None:
    """SIGHUP (the terminal closed, the SSH session dropped) is a stop signal: the file in hand
    is finished, the summary said, exit 130; it used to end the process mid-write and leave the
    object's temporary file in the storage folder."""
    voice = (corpus / "audio" / "LDC93S1.opus").read_bytes()
    files = []
    for number in range(200):
        path = tmp_path / f"take-{number:03d}.ogg"
        path.write_bytes(voice + f"take {number}".encode() + bytes(256 * 1024))
        files.append(str(path))
    process = subprocess.Popen(
        [CONVEYOR, "records", "add", *files, "--json"],
        cwd=tmp_path,
        env=clean_env(**NO_WORKERS),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert process.stdout is not None
    first = json.loads(process.stdout.readline())
    assert first["event"] == "accepted"
    process.send_signal(signal.SIGHUP)
    rest, errors = process.communicate(timeout=120)
    assert process.returncode == ExitCode.INTERRUPTED, errors.decode()
    assert "SIGHUP: stopping" in errors.decode()
    events = [first, *_lines(rest.decode())]
    assert events[-1]["event"] == "summary" and events[-1]["stopped"] is True
    accepted = [e for e in events if e["event"] == "accepted"]
    stored = [p for p in (tmp_path / "conveyor-data").rglob("*") if p.is_file()]
    assert [p for p in stored if p.name.endswith(".part")] == []
    assert len([p for p in stored if "uploads" in p.parts]) == len(accepted)


def test_a_short_command_ended_by_sigterm_runs_its_cleanup(tmp_path: Path) -> None:
    """Before a command installs its graceful stop, SIGTERM and SIGHUP end it at once with the
    signal's own exit code, through SystemExit: its ``finally`` blocks (a temporary file's
    removal) and exit handlers (the work folder's) run, as they do not when the signal kills."""
    script = (
        "import os, signal, sys\n"
        "from conveyor.cli.signals import interrupt_exits\n"
        "interrupt_exits()\n"
        "temp = sys.argv[1]\n"
        "open(temp, 'w').close()\n"
        "try:\n"
        "    os.kill(os.getpid(), getattr(signal, sys.argv[2]))\n"
        "    signal.pause()\n"
        "finally:\n"
        "    os.unlink(temp)\n"
    )
    for name, code in (("SIGTERM", 143), ("SIGHUP", 129)):
        temp = tmp_path / f"{name}.part"
        result = subprocess.run(
            [sys.executable, "-c", script, str(temp), name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == code, result.stderr
        assert f"{name}: stopped" in result.stderr
        assert not temp.exists()


def test_a_dead_processs_work_folder_goes_with_the_next_command(tmp_path: Path) -> None:
    """A killed command's or step's work folder is removed by the next command that uses the
    storage, even one that needs no folder itself (``records list``), not only by the next
    worker; a running process's folder and another host's are left."""
    import socket

    host = socket.gethostname().replace("-", "_") or "host"
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    work = tmp_path / "conveyor-data" / "work"
    dead = work / f"{host}-{ended.pid}-0123abcd"
    running = work / f"{host}-{os.getpid()}-4567cdef"
    elsewhere = work / f"other_host-{ended.pid}-89abcdef"
    for folder in (dead, running, elsewhere):
        (folder / "copy").mkdir(parents=True)
        (folder / "copy" / "original.wav").write_bytes(b"RIFF")
    result = run(["records", "list"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert not dead.exists()
    assert running.is_dir() and elsewhere.is_dir()
