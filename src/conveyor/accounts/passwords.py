"""Passwords for the web sign-in: argon2id hashes, and a pause after repeated failures.

Hashes are argon2id PHC strings from argon2-cffi's :class:`~argon2.PasswordHasher` (its
defaults follow RFC 9106's second recommended option); a hash made with weaker parameters is
replaced on the next successful sign-in. After :data:`MAX_FAILED_SIGN_INS` wrong passwords in a
row a user's sign-in is paused, :data:`FIRST_PAUSE` seconds first and twice as long on each
further failure (at most :data:`LONGEST_PAUSE`); while paused, no password is even checked. A
good password starts the count again.

Beside each name's pause, each client address has its own (:func:`check_password`'s
``address``): after :data:`ADDRESS_FAILURES` failed sign-ins from one address — wrong
passwords or names that do not exist, whichever names they tried — sign-ins from it pause the
same way (60 s, doubling, at most 15 min). A right password does not clear an address's count
(one account of one's own must not buy more guesses at others); the count starts again after
:data:`ADDRESS_QUIET` seconds without a failure.

A name that does not exist is answered exactly as a wrong password of one that does: its
failures are counted too (under a hash of the name, beside the addresses) and pause it after
:data:`MAX_FAILED_SIGN_INS` the same way, and a password is always checked against a hash,
a too-long one included, so neither the answer nor its time tells which names exist. The count
of a name that does not exist is forgotten after :data:`UNKNOWN_NAME_QUIET` without a failure
(a real name's lasts until a right password).
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import Engine

from conveyor.accounts import queries
from conveyor.clock import Clock
from conveyor.error_codes import ErrorCode
from conveyor.errors import ConveyorError, NotFound, RejectedInput

__all__ = [
    "ADDRESS_FAILURES",
    "ADDRESS_QUIET",
    "FIRST_PAUSE",
    "LONGEST_PAUSE",
    "MAX_FAILED_SIGN_INS",
    "MIN_PASSWORD",
    "UNKNOWN_NAME_QUIET",
    "SignInPaused",
    "SignedIn",
    "address_key",
    "check_new_password",
    "check_password",
    "is_admin",
    "set_admin",
    "set_password",
]

MAX_FAILED_SIGN_INS = 5
FIRST_PAUSE = 60.0
LONGEST_PAUSE = 900.0
MIN_PASSWORD = 8
ADDRESS_FAILURES = 20
ADDRESS_QUIET = 900.0
UNKNOWN_NAME_QUIET = 30 * 86400.0
_MAX_PASSWORD = 1024

# The hasher of this process (argon2-cffi's defaults: argon2id, t=3, m=64 MiB, p=4). Tests
# swap in one with a smaller cost; verifying reads the cost from each stored hash anyway.
hasher = PasswordHasher()
_dummy: dict[PasswordHasher, str] = {}


def _dummy_hash() -> str:
    # Checked against when the user does not exist, so an unknown name costs as long as a
    # wrong password and the answer's timing does not tell which names exist. Made on first
    # use, so starting the CLI does not pay for it.
    if hasher not in _dummy:
        _dummy[hasher] = hasher.hash("conveyor: no such user")
    return _dummy[hasher]


class SignInPaused(ConveyorError):
    """Too many failed sign-ins (of a name, or from an address): sign-in is paused for
    ``seconds`` more."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(1, round(seconds))
        super().__init__(f"too many failed sign-ins; try again in {self.seconds} s")


@dataclass(frozen=True)
class SignedIn:
    """A user whose password was right: ``user_id``, ``name``, ``is_admin``."""

    user_id: int
    name: str
    is_admin: bool


def check_new_password(password: str) -> None:
    """Refuse a password too short or too long before anything is written.

    Raises:
        RejectedInput: ``weak_password`` (under 8 characters) or ``bad_password``.
    """
    if len(password) < MIN_PASSWORD:
        raise RejectedInput(
            ErrorCode.WEAK_PASSWORD, f"a password has at least {MIN_PASSWORD} characters"
        )
    if len(password) > _MAX_PASSWORD:
        raise RejectedInput(
            ErrorCode.BAD_PASSWORD, f"a password has at most {_MAX_PASSWORD} characters"
        )


def set_password(engine: Engine, name: str, password: str) -> None:
    """Give ``name`` a new password (argon2id); signs out every session of theirs.

    Raises:
        RejectedInput: ``weak_password`` (under 8 characters) or ``bad_password`` (too long).
        NotFound: no such user.
    """
    check_new_password(password)
    digest = hasher.hash(password)
    with engine.begin() as conn:
        row = queries.user_by_name(conn, name.strip())
        if row is None:
            raise NotFound(f"user {name!r} does not exist")
        queries.set_password_hash(conn, int(row["id"]), digest)
        queries.delete_sessions_of(conn, int(row["id"]))


def set_admin(engine: Engine, name: str, is_admin: bool) -> None:
    """Mark ``name`` an administrator (sees the operator view) or not.

    Raises:
        NotFound: no such user.
    """
    with engine.begin() as conn:
        row = queries.user_by_name(conn, name.strip())
        if row is None:
            raise NotFound(f"user {name!r} does not exist")
        queries.set_admin(conn, int(row["id"]), is_admin)


def is_admin(engine: Engine, name: str) -> bool:
    """True when the user ``name`` exists and is an administrator."""
    with engine.connect() as conn:
        row = queries.user_by_name(conn, name.strip())
    return row is not None and bool(row["is_admin"])


def _verify(digest: str, password: str) -> bool:
    try:
        return hasher.verify(digest, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def _pause(failed: int, limit: int) -> float:
    return min(LONGEST_PAUSE, FIRST_PAUSE * 2.0 ** (failed - limit))


def _name_key(name: str) -> str:
    # Kept beside the addresses (64 characters at most); an address never starts so.
    return "name:" + hashlib.sha256(name.encode()).hexdigest()[:56]


def _failed_unknown(engine: Engine, name: str, now: float) -> None:
    """Count a failed sign-in of a name that does not exist, as a real name's is counted."""
    key = _name_key(name)
    with engine.begin() as conn:
        row = queries.lock_address(conn, key, now)
        failed = int(row["failed"]) + 1
        limit = MAX_FAILED_SIGN_INS
        paused = now + _pause(failed, limit) if failed >= limit else None
        queries.save_address_failures(conn, key, failed, now, paused)


def _failed_from(engine: Engine, address: str | None, now: float) -> None:
    """Count a failed sign-in from ``address``; pause it after :data:`ADDRESS_FAILURES`."""
    if address is None:
        return
    with engine.begin() as conn:
        row = queries.lock_address(conn, address, now)
        recent = float(row["last_failed_at"]) >= now - ADDRESS_QUIET
        failed = int(row["failed"]) + 1 if recent else 1
        paused = now + _pause(failed, ADDRESS_FAILURES) if failed >= ADDRESS_FAILURES else None
        queries.save_address_failures(conn, address, failed, now, paused)
        queries.prune_addresses(conn, now - ADDRESS_QUIET, now - UNKNOWN_NAME_QUIET, now)


def check_password(
    engine: Engine, clock: Clock, name: str, password: str, *, address: str | None = None
) -> SignedIn | None:
    """Sign-in: the user when ``password`` is theirs, None otherwise.

    Args:
        address: the client's address (:func:`address_key` of it), whose failures are
            counted and paused across names; None counts none.

    Raises:
        SignInPaused: sign-in is paused for this name or this address after repeated
            failures (the password is not checked, and the pause is not extended).
    """
    now = clock.now()
    name = name.strip()
    with engine.connect() as conn:
        address_pause = queries.address_paused_until(conn, address) if address else None
        row = queries.user_by_name(conn, name) if name else None
        unknown = row is None or row["password_hash"] is None
        name_pause = queries.address_paused_until(conn, _name_key(name)) if unknown else None
    if address_pause is not None and now < address_pause:
        raise SignInPaused(address_pause - now)
    if row is None or row["password_hash"] is None:
        if name_pause is not None and now < name_pause:
            raise SignInPaused(name_pause - now)
        _verify(_dummy_hash(), password[:_MAX_PASSWORD])
        _failed_unknown(engine, name, now)
        _failed_from(engine, address, now)
        return None
    user_id = int(row["id"])
    paused_until = row["sign_in_paused_until"]
    if paused_until is not None and now < float(paused_until):
        raise SignInPaused(float(paused_until) - now)
    digest = str(row["password_hash"])
    too_long = len(password) > _MAX_PASSWORD
    # A too-long password costs a check as well: its answer must take as long as any other.
    if not _verify(_dummy_hash() if too_long else digest, password[:_MAX_PASSWORD]) or too_long:
        with engine.begin() as conn:
            failed = queries.record_failed_sign_in(conn, user_id, None)
            if failed >= MAX_FAILED_SIGN_INS:
                queries.pause_sign_in(conn, user_id, now + _pause(failed, MAX_FAILED_SIGN_INS))
        _failed_from(engine, address, now)
        return None
    with engine.begin() as conn:
        if hasher.check_needs_rehash(digest):
            queries.set_password_hash(conn, user_id, hasher.hash(password))
        queries.clear_failed_sign_ins(conn, user_id)
    return SignedIn(user_id=user_id, name=str(row["name"]), is_admin=bool(row["is_admin"]))


def address_key(host: str) -> str:
    """The key failed sign-ins are counted under for a client address: an IPv4 address as
    is, an IPv6 one by its /64 network (one host usually holds a whole /64), an IPv4-mapped
    IPv6 one as the IPv4 address; anything else (a Unix socket's name) as given, cut to 64."""
    try:
        ip = ipaddress.ip_address(host.strip())
    except ValueError:
        return host.strip()[:64] or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)
