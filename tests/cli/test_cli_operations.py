"""Operating several processes: ``serve`` on a busy port fails before it claims to serve, a
``worker`` exposes its own ``/metrics``, and on PostgreSQL the schema changes only through
``conveyor db upgrade`` (other commands refuse a schema that is not current)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner, Result

from conveyor.cli.app import app
from conveyor.cli.exits import ExitCode
from conveyor.db.engine import make_engine
from conveyor.db.migrate import alembic_config, head_revision, upgrade
from tests.support.cli_run import CONVEYOR, clean_env, invoke, run

ISO_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO ", re.MULTILINE)


def test_serve_on_a_busy_port_fails_before_it_says_it_serves(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(["serve", "--no-workers", "--port", str(port)], tmp_path)
    assert result.returncode == ExitCode.USAGE
    assert "serving" not in result.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port" in result.stderr


def _read_until(proc: subprocess.Popen[str], pattern: str, timeout: float = 60) -> str:
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        if re.search(pattern, line):
            return seen
    raise AssertionError(f"no {pattern!r} in the worker's output:\n{seen}")


def test_worker_exposes_its_own_metrics_and_logs_in_iso_utc(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [CONVEYOR, "worker", "--metrics-port", "0"],
        cwd=tmp_path,
        env=clean_env(CONVEYOR_PIPELINE__WORKERS="0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = _read_until(proc, r"metrics at http://")
        url = re.search(r"metrics at (http://\S+)", seen)
        assert url is not None
        seen += _read_until(proc, r"worker pool started")
        assert ISO_LINE.search(seen), seen
        body = httpx.get(url.group(1), timeout=10).text
        assert "conveyor_step_outcomes_total" in body and "conveyor_step_seconds" in body
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def test_an_interrupted_ingest_exits_130_and_leaves_the_record_for_a_worker(
    tmp_path: Path, corpus: Path
) -> None:
    proc = subprocess.Popen(
        [CONVEYOR, "ingest", str(corpus / "audio" / "jfk.wav")],
        cwd=tmp_path,
        env=clean_env(CONVEYOR_PIPELINE__WORKERS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    database = make_engine(f"sqlite:///{tmp_path / 'conveyor-data' / 'conveyor.db'}")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the record is accepted and being worked on
        try:
            with database.connect() as conn:
                if conn.execute(text("SELECT count(*) FROM audio_records")).scalar():
                    break
        except OperationalError:
            pass  # the schema is not there yet
        time.sleep(0.05)
    database.dispose()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert "`conveyor worker` continues them" in err
    shown = run(["records", "show", "1", "--json"], tmp_path)
    assert shown.returncode == 0 and '"halted": false' in shown.stdout


@pytest.fixture
def fresh_schema(pg_engine: Engine) -> Iterator[str]:
    """A PostgreSQL URL whose search path is an empty schema of its own."""
    name = "cli_schema_check"
    with pg_engine.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {name} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {name}"))
    url = pg_engine.url.set(query={"options": f"-csearch_path={name}"})
    yield url.render_as_string(hide_password=False).replace("postgresql+psycopg", "postgresql")
    with pg_engine.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {name} CASCADE"))


def test_postgresql_schema_changes_only_by_db_upgrade(
    tmp_path: Path, fresh_schema: str, pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    def cli(*args: str) -> Result:
        return CliRunner().invoke(
            app, list(args), env=clean_env(CONVEYOR_DATABASE__URL=fresh_schema)
        )

    empty = cli("records", "list")
    assert empty.exit_code == ExitCode.SCHEMA
    assert "no Conveyor schema yet" in empty.stderr and "conveyor db upgrade" in empty.stderr
    upgraded = cli("db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.stderr
    assert f"upgraded from revision none to {head_revision()}" in upgraded.stdout
    assert cli("records", "list").exit_code == 0
    # A newer schema that still works with this code (it only added): a rolling upgrade, this
    # process runs and says so.
    with pg_engine.begin() as conn:
        conn.execute(text("UPDATE cli_schema_check.alembic_version SET version_num = '9999'"))
    compatible = cli("records", "list")
    assert compatible.exit_code == 0, compatible.stderr
    assert "newer than this version" in compatible.stderr and "runs until" in compatible.stderr
    # A newer schema that removed what this code uses: refused with exit 6, saying why.
    with pg_engine.begin() as conn:
        conn.execute(text("UPDATE cli_schema_check.schema_compat SET oldest_code = '9998'"))
    newer = cli("records", "list")
    assert newer.exit_code == ExitCode.SCHEMA and "newer than this version" in newer.stderr
    assert "needs code from revision 9998 on" in newer.stderr
    assert cli("worker").exit_code == ExitCode.SCHEMA
    assert cli("db", "upgrade").exit_code == ExitCode.SCHEMA


def test_an_older_postgresql_schema_is_refused_until_db_upgrade(
    tmp_path: Path, fresh_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    engine = make_engine(fresh_schema)
    head = head_revision()
    older = ScriptDirectory.from_config(alembic_config(engine)).get_revision(head).down_revision
    assert isinstance(older, str), "needs a revision before the head"
    upgrade(engine, older)
    engine.dispose()
    env = {"CONVEYOR_DATABASE__URL": fresh_schema}
    refused = invoke("worker", **env)
    assert refused.exit_code == ExitCode.SCHEMA
    assert f"revision {older}, older than this version needs ({head})" in refused.stderr
    assert "conveyor db upgrade" in refused.stderr
    upgraded = invoke("db", "upgrade", **env)
    assert f"upgraded from revision {older} to {head}" in upgraded.stdout, upgraded.output
    assert invoke("records", "list", **env).exit_code == 0
