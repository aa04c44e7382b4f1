"""Owners and tokens: created from the CLI, shown once, stored hashed, revocable."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from conveyor.accounts import (
    add_user,
    authenticate,
    create_token,
    list_tokens,
    list_users,
    revoke_token,
)
from conveyor.api.app import create_app
from conveyor.cli.app import app as cli
from conveyor.cli.exits import ExitCode
from conveyor.config import Settings
from conveyor.db.tables import api_tokens
from conveyor.errors import Conflict, NotFound, RejectedInput
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock


def test_tokens_are_stored_hashed_and_used_once_a_minute(engine: Engine, clock: FakeClock) -> None:
    add_user(engine, clock, "alice")
    issued = create_token(engine, clock, "alice", label="phone")
    assert len(issued.token) >= 43
    with engine.connect() as conn:
        row = conn.execute(select(api_tokens)).mappings().one()
    assert row["token_hash"] == hashlib.sha256(issued.token.encode()).hexdigest()
    assert issued.token not in {str(v) for v in row.values()}
    assert row["last_used_at"] is None
    account = authenticate(engine, clock, issued.token)
    assert account is not None and account.name == "alice" and account.token_id == issued.id
    clock.advance(10)
    authenticate(engine, clock, issued.token)
    [listed] = list_tokens(engine, "alice")
    assert listed["label"] == "phone"
    assert listed["last_used_at"] == clock.now() - 10  # not rewritten within a minute
    assert "token_hash" not in listed
    assert authenticate(engine, clock, issued.token + "x") is None
    assert authenticate(engine, clock, "") is None
    revoke_token(engine, issued.id)
    assert authenticate(engine, clock, issued.token) is None
    with pytest.raises(NotFound):
        revoke_token(engine, issued.id)


def test_a_revoked_token_id_is_never_given_to_a_later_token(
    engine: Engine, clock: FakeClock
) -> None:
    # SQLite reused the highest id once its row was deleted: `tokens revoke 2` twice would
    # have revoked two different tokens.
    add_user(engine, clock, "alice")
    first = create_token(engine, clock, "alice", label="one")
    second = create_token(engine, clock, "alice", label="two")
    revoke_token(engine, second.id)
    third = create_token(engine, clock, "alice", label="three")
    assert third.id > second.id
    with pytest.raises(NotFound):
        revoke_token(engine, second.id)
    assert [t["id"] for t in list_tokens(engine, "alice")] == [first.id, third.id]
    assert authenticate(engine, clock, third.token) is not None


def test_user_names_are_unique_and_plain(engine: Engine, clock: FakeClock) -> None:
    add_user(engine, clock, "alice")
    with pytest.raises(Conflict):
        add_user(engine, clock, " alice ")
    for bad in ("", "   ", "two words", "x" * 101):
        with pytest.raises(RejectedInput):
            add_user(engine, clock, bad)
    with pytest.raises(NotFound):
        create_token(engine, clock, "nobody")
    assert [u["name"] for u in list_users(engine)] == ["alice"]


def test_cli_users_add_and_tokens_create(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVEYOR_DATABASE__URL", engine.url.render_as_string(hide_password=False))
    monkeypatch.setenv("CONVEYOR_STORAGE__ROOT", str(tmp_path / "data"))
    monkeypatch.delenv("CONVEYOR_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    added = runner.invoke(cli, ["users", "add", "carol"])
    assert added.exit_code == 0, added.output
    again = runner.invoke(cli, ["users", "add", "carol"])
    assert again.exit_code == ExitCode.CONFLICT
    created = runner.invoke(cli, ["tokens", "create", "carol", "--label", "laptop"])
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert len(token) >= 43 and " " not in token
    listed = runner.invoke(cli, ["tokens", "list", "carol"])
    assert "laptop" in listed.stdout and token not in listed.stdout
    assert runner.invoke(cli, ["tokens", "create", "nobody"]).exit_code == ExitCode.NOT_FOUND

    runtime = Runtime(Settings(storage={"root": tmp_path / "data"}), engine=engine)  # type: ignore[arg-type]
    with TestClient(create_app(runtime, run_workers=False)) as client:
        answer = client.get("/api/records", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200
        token_id = list_tokens(engine, "carol")[0]["id"]
        assert runner.invoke(cli, ["tokens", "revoke", str(token_id)]).exit_code == 0
        answer = client.get("/api/records", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 401
