"""``conveyor albums share/unshare/shares`` and ``conveyor albums link create/list/revoke``: the
owner's side of shared albums from the shell, for people and (``--json``) for scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conveyor.api.schemas import IssuedLink
from conveyor.cli.exits import ExitCode
from conveyor.cli.sharing import parse_duration
from tests.support.cli_run import invoke


def _json(*args: str) -> Any:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, (args, result.stderr)
    return json.loads(result.stdout)


def test_an_owner_shares_an_album_and_makes_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert invoke("users", "create", "bob").exit_code == 0
    assert invoke("albums", "create", "Trip").exit_code == 0
    share = _json("albums", "share", "Trip", "bob", "--role", "contributor")
    assert (share["album_id"], share["user"], share["role"]) == (1, "bob", "contributor")
    assert [(s["user"], s["role"]) for s in _json("albums", "shares", "Trip")] == [
        ("bob", "contributor")
    ]
    # Again with another role: changed, still one share.
    assert invoke("albums", "share", "Trip", "bob", "--role", "viewer").exit_code == 0
    assert [s["role"] for s in _json("albums", "shares", "1")] == ["viewer"]
    people = invoke("albums", "shares", "Trip")
    assert "bob" in people.stdout and "viewer" in people.stdout

    refused = invoke("albums", "share", "Trip", "bob", "--role", "owner")
    assert refused.exit_code == ExitCode.USAGE and "viewer, contributor" in refused.stderr
    unknown = invoke("albums", "share", "Trip", "nobody")
    assert unknown.exit_code == ExitCode.NOT_FOUND and "nobody" in unknown.stderr
    # The shell's owner `me` has no user row; sharing with it is still sharing with the owner.
    self_share = invoke("albums", "share", "Trip", "me")
    assert self_share.exit_code == ExitCode.USAGE, self_share.stderr
    assert "owner's already" in self_share.stderr
    assert invoke("albums", "share", "Nowhere", "bob").exit_code == ExitCode.NOT_FOUND

    assert _json("albums", "unshare", "Trip", "bob")["unshared"] is True
    assert _json("albums", "unshare", "Trip", "bob")["unshared"] is False
    assert _json("albums", "shares", "Trip") == []

    link = _json("albums", "link", "create", "Trip", "--expires", "7d", "--label", "family")
    # The API's fields (IssuedLink, both from sharing.IssuedLink.shown), with the album and
    # `path`, the old name of `url` docs/cli.md promised.
    assert set(link) == set(IssuedLink.model_fields) | {"album_id", "path"}
    assert link["url"] == link["path"] == f"/s/{link['token']}" and link["label"] == "family"
    assert link["expires_at"] is not None
    plain = invoke("albums", "link", "create", "Trip")
    assert (
        plain.exit_code == 0 and plain.stdout.startswith("/s/") and "until revoked" in plain.stderr
    )
    listed = _json("albums", "link", "list", "Trip")
    assert [(x["id"], x["label"], x["expired"]) for x in listed] == [
        (link["id"], "family", False),
        (link["id"] + 1, None, False),
    ]
    assert "token" not in listed[0]
    assert invoke("albums", "link", "create", "Trip", "--expires", "soon").exit_code == (
        ExitCode.USAGE
    )
    too_long = invoke("albums", "link", "create", "Trip", "--expires", "11000d")
    assert too_long.exit_code == ExitCode.USAGE and "ten years" in too_long.stderr
    assert _json("albums", "link", "revoke", str(link["id"]))["revoked"] is True
    again = invoke("albums", "link", "revoke", str(link["id"]))
    assert again.exit_code == ExitCode.NOT_FOUND
    assert [x["id"] for x in _json("albums", "link", "list", "Trip")] == [link["id"] + 1]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("45m", 2700), ("12h", 43_200), ("7d", 604_800), ("2w", 1_209_600),
     ("1d12h", 129_600), ("1.5h", 5400)],
)  # fmt: skip
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
