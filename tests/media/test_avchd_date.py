"""The capture date AVCHD camcorders keep inside the H.264 stream (issue 21): the MDPM entries
of an SEI "user data unregistered" message, read from PyAV's packets. The stream is made here:
libx264 through PyAV into MPEG-TS (as an .MTS is), each keyframe's packet carrying the SEI
message a camcorder writes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from sqlalchemy import Engine

from conveyor.media.albums import item_view
from conveyor.media.video import probe_video
from conveyor.media.video.avchd import MDPM_UUID, mdpm_capture_time, parse_mdpm
from conveyor.objects import LocalStore, WorkFolder
from conveyor.testing import FakeClock
from tests.support.media import add, album


def _bcd(n: int) -> int:
    return ((n // 10) << 4) | (n % 10)


def mdpm(zone: int, when: datetime) -> bytes:
    """The MDPM user data of a recording started at local time ``when``, zone byte ``zone``."""
    time_code = [0x13, 0, 0, 0, 0]  # an entry before the date, as cameras write
    year_month = [0x18, zone, _bcd(when.year // 100), _bcd(when.year % 100), _bcd(when.month)]
    day_time = [0x19, _bcd(when.day), _bcd(when.hour), _bcd(when.minute), _bcd(when.second)]
    entries = bytes([*time_code, *year_month, *day_time])
    return MDPM_UUID + b"MDPM" + bytes([3]) + entries


def camcorder_stream(path: Path, zone: int, when: datetime) -> Path:
    """Two seconds of H.264 in MPEG-TS, each keyframe led by an SEI NAL unit with the MDPM."""
    payload = mdpm(zone, when)
    sei = b"\x00\x00\x00\x01\x06" + bytes([5, len(payload)]) + payload + b"\x80"
    with av.open(str(path), "w", format="mpegts") as out:
        stream: Any = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"

        def mux(packets: Any) -> None:
            for packet in packets:
                if packet.is_keyframe:
                    led = av.Packet(sei + bytes(packet))
                    led.pts, led.dts, led.time_base = packet.pts, packet.dts, packet.time_base
                    led.stream, led.is_keyframe = packet.stream, True
                    packet = led
                out.mux(packet)

        for index in range(50):
            rgb = np.full((240, 320, 3), index * 4, np.uint8)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts = index
            mux(stream.encode(frame))
        mux(stream.encode(None))
    return path


TAKEN = datetime(2019, 3, 21, 11, 4, 5)


@pytest.mark.parametrize(
    ("zone", "offset"),
    [
        (0x20 | (5 << 1), -300),  # UTC-05:00
        ((5 << 1) | 0x01, 330),  # UTC+05:30 (the half-hour bit)
        (0x40 | (1 << 1), 120),  # UTC+01:00 with summer time in force: +02:00
        (0x80, None),  # no zone: the local time, taken as UTC
    ],
)
def test_the_mdpm_date_and_zone_are_read(zone: int, offset: int | None) -> None:
    found = parse_mdpm(mdpm(zone, TAKEN))
    assert found is not None
    instant, zone_minutes = found
    assert zone_minutes == offset
    local = TAKEN.replace(tzinfo=UTC).timestamp() - 60 * (offset or 0)
    assert instant.timestamp() == local


def test_no_date_where_the_entries_are_not_one() -> None:
    assert parse_mdpm(b"\0" * 40) is None
    unset = bytearray(mdpm(0x80, TAKEN))
    unset[-4:] = b"\xff\xff\xff\xff"  # an unset clock: not BCD
    assert parse_mdpm(bytes(unset)) is None


def test_an_avchd_streams_capture_time_comes_from_its_h264_packets(
    engine: Engine, clock: FakeClock, tmp_path: Path
) -> None:
    path = camcorder_stream(tmp_path / "00001.MTS", 0x20 | (5 << 1), TAKEN)
    assert mdpm_capture_time(path) == (datetime(2019, 3, 21, 16, 4, 5, tzinfo=UTC), -300)
    info = probe_video(path)
    assert info.container == "mpegts" and info.video_codec == "h264"
    assert (info.captured_at, info.captured_offset) == (
        datetime(2019, 3, 21, 16, 4, 5, tzinfo=UTC),
        -300,
    )
    store = LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))
    item_id = add(engine, store, clock, album(engine, clock), path)
    with engine.connect() as conn:
        assert item_view(conn, item_id)["captured_local"] == "2019-03-21T11:04:05-05:00"
    # A stream without the message has no capture time from it.
    plain = tmp_path / "plain.MTS"
    with av.open(str(plain), "w", format="mpegts") as out:
        stream: Any = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(5):
            frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
            frame = frame.reformat(format="yuv420p")
            frame.pts = index
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    assert mdpm_capture_time(plain) == (None, None)
