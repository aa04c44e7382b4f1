"""The capture date AVCHD camcorders write into the H.264 stream itself (MDPM).

AVCHD files (``.MTS``/``.M2TS``) carry no container date; the camera writes the recording's
local date and time, with its zone, into the video: an SEI message of type 5 (user data
unregistered, ITU-T H.264 D.1.6) whose UUID ``17ee8c60-f84d-11d9-8cd6-0800200c9a66`` is
followed by ``MDPM`` ("modified DV pack metadata"), an entry count and 5-byte entries (a tag,
4 data bytes). Tag ``0x18`` holds the zone byte and the year and month, ``0x19`` the day and
the time, all as BCD. The zone byte: ``0x20`` west of UTC, bits 1-4 hours, bit 0 a half hour,
``0x40`` daylight saving time in force (an hour more), ``0x80`` set: no zone. The layout is
the one ExifTool documents for its H264 module.

Read with PyAV's packets (no decode): the first packets of the video stream, where cameras
repeat the message with each group of pictures.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import av

__all__ = ["MDPM_UUID", "mdpm_capture_time", "parse_mdpm"]

MDPM_UUID: Final = bytes.fromhex("17ee8c60f84d11d98cd60800200c9a66")
"""The UUID of the user data that holds the MDPM entries."""
_MDPM: Final = MDPM_UUID + b"MDPM"
_SEI: Final = 6
_USER_DATA_UNREGISTERED: Final = 5
_PACKETS: Final = 64  # the message repeats every group of pictures: it is in the first few


def mdpm_capture_time(src: Path) -> tuple[datetime | None, int | None]:
    """(UTC instant, minutes east of UTC) from the MDPM of an H.264 stream in ``src``, or
    ``(None, None)`` when its first packets carry none. Without a zone the local time is taken
    as UTC and the zone is None, as for any capture time."""
    try:
        with av.open(str(src)) as container:
            if not container.streams.video:
                return None, None
            video = container.streams.video[0]
            if video.codec_context.name != "h264":
                return None, None
            for index, packet in enumerate(container.demux(video)):
                if index >= _PACKETS:
                    break
                for nal in _nal_units(bytes(packet)):
                    if nal and nal[0] & 0x1F == _SEI:
                        for payload in _user_data(_unescape(nal[1:])):
                            found = parse_mdpm(payload)
                            if found is not None:
                                return found
    except (av.FFmpegError, OSError):
        pass
    return None, None


def parse_mdpm(payload: bytes) -> tuple[datetime, int | None] | None:
    """The capture time of one user-data payload (UUID, ``MDPM``, entries), or None."""
    if not payload.startswith(_MDPM) or len(payload) < len(_MDPM) + 1:
        return None
    count, at = payload[len(_MDPM)], len(_MDPM) + 1
    entries: dict[int, bytes] = {}
    for _ in range(count):
        if at + 5 > len(payload):
            break
        entries[payload[at]] = payload[at + 1 : at + 5]
        at += 5
    first, second = entries.get(0x18), entries.get(0x19)
    if first is None or second is None:
        return None
    try:
        zone, century, year, month = first[0], _bcd(first[1]), _bcd(first[2]), _bcd(first[3])
        day, hour, minute, sec = (_bcd(b) for b in second)
        local = datetime(century * 100 + year, month, day, hour, minute, sec)
    except ValueError:
        return None  # an unset clock, a damaged entry
    if zone & 0x80:
        return local.replace(tzinfo=UTC), None
    offset = ((zone >> 1) & 0x0F) * 60 + (30 if zone & 0x01 else 0)
    if zone & 0x20:
        offset = -offset
    if zone & 0x40:
        offset += 60  # summer time: the clock showed an hour more than the zone's standard
    return (local - timedelta(minutes=offset)).replace(tzinfo=UTC), offset


def _bcd(value: int) -> int:
    high, low = value >> 4, value & 0x0F
    if high > 9 or low > 9:
        raise ValueError(f"not a BCD digit pair: {value:#04x}")
    return high * 10 + low


def _nal_units(data: bytes) -> Iterator[bytes]:
    """The NAL units of a packet: Annex B (start codes, MPEG-TS) or 4-byte lengths (MP4)."""
    if data.startswith((b"\x00\x00\x01", b"\x00\x00\x00\x01")):
        starts: list[int] = []
        at = data.find(b"\x00\x00\x01")
        while at >= 0:
            starts.append(at + 3)
            at = data.find(b"\x00\x00\x01", at + 3)
        for index, start in enumerate(starts):
            end = starts[index + 1] - 3 if index + 1 < len(starts) else len(data)
            yield data[start:end].rstrip(b"\x00")
        return
    at = 0
    while at + 4 <= len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        yield data[at + 4 : at + 4 + length]
        at += 4 + length


def _unescape(nal: bytes) -> bytes:
    """The RBSP of a NAL unit: each emulation-prevention byte (``00 00 03``) dropped."""
    return nal.replace(b"\x00\x00\x03", b"\x00\x00")


def _user_data(rbsp: bytes) -> Iterator[bytes]:
    """The payloads of the SEI messages of type 5 (user data unregistered) in ``rbsp``."""
    at = 0
    with contextlib.suppress(IndexError):
        while at < len(rbsp) and rbsp[at] != 0x80:  # 0x80: the RBSP's trailing bits
            kind = 0
            while rbsp[at] == 0xFF:
                kind, at = kind + 255, at + 1
            kind, at = kind + rbsp[at], at + 1
            size = 0
            while rbsp[at] == 0xFF:
                size, at = size + 255, at + 1
            size, at = size + rbsp[at], at + 1
            if kind == _USER_DATA_UNREGISTERED:
                yield rbsp[at : at + size]
            at += size
