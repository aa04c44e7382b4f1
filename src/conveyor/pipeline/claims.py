"""Claims and their fencing tokens (P1-P6).

A claim is the pair (record id, token). The token is a fresh random 128-bit value for every
claim, so a claim re-issued after expiry or a human resume never equals an earlier one and the
earlier holder's conditional writes match nothing (P2, P6).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

__all__ = ["Claim", "mint_token"]


def mint_token() -> str:
    """A new claim token: 128 random bits as 32 hex characters."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class Claim:
    """What a claim returns: the record's id and this claim's token, nothing else (P1, D7)."""

    record_id: int
    token: str
