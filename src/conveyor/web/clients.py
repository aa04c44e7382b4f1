"""Which address a request comes from, for the sign-in pause per address.

By default the client is the TCP peer: ``X-Forwarded-For`` is ignored, since anyone can send
it. Behind a reverse proxy every request would come from the proxy, so ``[api]
trusted_proxies`` names the proxies (addresses or networks): when the peer is one of them,
``X-Forwarded-For`` is read from its right end, each hop a trusted proxy vouches for, until
the first address that is not a trusted proxy — the client. Addresses a client wrote itself
further left are never reached.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import lru_cache

from fastapi import Request

__all__ = ["client_address", "from_trusted_proxy"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=16)
def _networks(trusted: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(t.strip(), strict=False) for t in trusted)


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in n for n in networks)


def client_address(request: Request, trusted_proxies: Sequence[str]) -> str:
    """The client's address: the TCP peer, or behind trusted proxies the nearest address in
    ``X-Forwarded-For`` that is not one of them ("unknown" without a peer)."""
    current = request.client.host if request.client else "unknown"
    networks = _networks(tuple(trusted_proxies))
    if not networks:
        return current
    hops = [h.strip() for v in request.headers.getlist("x-forwarded-for") for h in v.split(",")]
    for hop in reversed(hops):
        if not _trusted(current, networks):
            break
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            break  # a malformed hop: go no further than the last proxy we trust
        current = hop
    return current


def from_trusted_proxy(request: Request, trusted_proxies: Sequence[str]) -> bool:
    """True when the TCP peer is one of ``trusted_proxies`` (its forwarded headers count)."""
    networks = _networks(tuple(trusted_proxies))
    return bool(networks) and request.client is not None and _trusted(request.client.host, networks)
