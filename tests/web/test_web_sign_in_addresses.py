"""The sign-in pause per client address, beside the pause per name; which address counts."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from conveyor.accounts import SignInPaused, address_key, check_password
from conveyor.accounts.passwords import (
    ADDRESS_FAILURES,
    ADDRESS_QUIET,
    FIRST_PAUSE,
    MAX_FAILED_SIGN_INS,
)
from conveyor.db.tables import sign_in_addresses
from conveyor.testing import FakeClock
from tests.support.web import HTML, PASSWORDS, MakeSite, login_csrf

SPRAYER = "203.0.113.9"


def _try(client: TestClient, name: str, password: str, **headers: str) -> int:
    reply = client.post(
        "/sign-in",
        data={"username": name, "password": password, "csrf_token": login_csrf(client)},
        headers={**HTML, **headers},
        follow_redirects=False,
    )
    return reply.status_code


def test_an_address_that_tries_many_names_pauses(engine: Engine, make_site: MakeSite) -> None:
    """Twenty failures from one address, each on a different name (so no name pauses, the
    names real or not): that address pauses, even for a right password; others do not. A
    right password from it does not clear its count; quiet for 15 min, the count restarts."""
    clock = FakeClock()
    make_site(clock=clock)
    names = ["alice", "bob", "root", *(f"guess-{n}" for n in range(ADDRESS_FAILURES))]
    for n in range(ADDRESS_FAILURES - 1):
        assert check_password(engine, clock, names[n], "wrong-guess", address=SPRAYER) is None
    # A right password on the way neither pauses nor clears the address's count.
    assert check_password(engine, clock, "bob", PASSWORDS["bob"], address=SPRAYER) is not None
    assert check_password(engine, clock, "zed", "wrong-guess", address=SPRAYER) is None
    with pytest.raises(SignInPaused) as paused:
        check_password(engine, clock, "alice", PASSWORDS["alice"], address=SPRAYER)
    assert paused.value.seconds == FIRST_PAUSE
    # Another address, and alice's own name, are not paused.
    assert check_password(engine, clock, "alice", PASSWORDS["alice"], address="198.51.100.7")
    clock.advance(FIRST_PAUSE)
    assert check_password(engine, clock, "alice", PASSWORDS["alice"], address=SPRAYER)
    # One more failure right after the pause: twice as long.
    assert check_password(engine, clock, "nobody", "wrong-guess", address=SPRAYER) is None
    with pytest.raises(SignInPaused) as again:
        check_password(engine, clock, "alice", PASSWORDS["alice"], address=SPRAYER)
    assert again.value.seconds == 2 * FIRST_PAUSE
    # Quiet long enough, the address starts from zero: one failure does not pause it.
    clock.advance(ADDRESS_QUIET + 1)
    assert check_password(engine, clock, "nobody", "wrong-guess", address=SPRAYER) is None
    assert check_password(engine, clock, "alice", PASSWORDS["alice"], address=SPRAYER)
    # Addresses quiet that long, with no pause running, are forgotten.
    clock.advance(ADDRESS_QUIET + 1)
    check_password(engine, clock, "nobody", "wrong-guess", address="192.0.2.1")
    with engine.connect() as conn:
        kept = conn.execute(select(sign_in_addresses.c.address)).scalars().all()
    # (Names that do not exist are counted there too, under "name:"; see test_web_accounts.)
    assert [a for a in kept if not a.startswith("name:")] == ["192.0.2.1"]


def test_the_name_pause_still_holds_from_many_addresses(
    engine: Engine, make_site: MakeSite
) -> None:
    clock = FakeClock()
    make_site(clock=clock)
    for n in range(MAX_FAILED_SIGN_INS):
        check_password(engine, clock, "alice", "wrong-guess", address=f"192.0.2.{n}")
    with pytest.raises(SignInPaused):
        check_password(engine, clock, "alice", PASSWORDS["alice"], address="192.0.2.99")


def _spray(client: TestClient, count: int, **headers: str) -> None:
    for n in range(count):
        assert _try(client, f"guess-{n}", "wrong-guess", **headers) == 401


def test_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(
    engine: Engine, make_site: MakeSite
) -> None:
    """By default the TCP peer is the client: a sprayer that varies X-Forwarded-For is still
    one address, and is paused."""
    site = make_site()
    with TestClient(site.app, client=(SPRAYER, 40000)) as client:
        for n in range(ADDRESS_FAILURES):
            forged = {"X-Forwarded-For": f"10.9.0.{n}"}
            assert _try(client, f"g{n}", "wrong-guess", **forged) == 401
        assert _try(client, "alice", PASSWORDS["alice"]) == 429
    with TestClient(site.app, client=("198.51.100.7", 40000)) as other:
        assert _try(other, "alice", PASSWORDS["alice"]) == 303
    with engine.connect() as conn:
        addresses = select(func.count()).where(~sign_in_addresses.c.address.startswith("name:"))
        count = conn.execute(addresses).scalar_one()
    assert count == 1


def test_behind_a_trusted_proxy_the_forwarded_client_is_counted(make_site: MakeSite) -> None:
    """With ``[api] trusted_proxies``, the nearest untrusted hop of X-Forwarded-For is the
    client: one client behind the proxy pauses, the others behind it do not, and addresses
    the client wrote itself further left are never believed."""
    site = make_site(api={"trusted_proxies": ["127.0.0.1", "10.0.0.0/8"]})
    with TestClient(site.app, client=("127.0.0.1", 40000)) as proxy:
        # Two proxies in a row (10.1.2.3 forwarded to us); each request forges a new left hop.
        for n in range(ADDRESS_FAILURES):
            hops = f"192.0.2.{n}, {SPRAYER}, 10.1.2.3"
            assert _try(proxy, f"g{n}", "wrong-guess", **{"X-Forwarded-For": hops}) == 401
        paused = _try(
            proxy, "alice", PASSWORDS["alice"], **{"X-Forwarded-For": f"{SPRAYER}, 10.1.2.3"}
        )
        assert paused == 429
        fine = _try(proxy, "alice", PASSWORDS["alice"], **{"X-Forwarded-For": "198.51.100.7"})
        assert fine == 303
    # Not from a trusted peer: the header is not believed, the peer is counted.
    with TestClient(site.app, client=("198.51.100.8", 40000)) as direct:
        spoof = _try(direct, "bob", PASSWORDS["bob"], **{"X-Forwarded-For": SPRAYER})
        assert spoof == 303


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("testclient", "testclient"),
        ("", "unknown"),
    ],
)
def test_address_keys(host: str, key: str) -> None:
    """An IPv6 client is counted by its /64 (one host usually holds all of it)."""
    assert address_key(host) == key


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    from pydantic import ValidationError

    from conveyor.config import Settings

    with pytest.raises(ValidationError, match="not an IP address or network"):
        Settings(api={"trusted_proxies": ["proxy.example"]})  # type: ignore[arg-type]
