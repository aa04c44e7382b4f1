"""The S3 store under an object store's faults: 5xx answers, reset connections, slow answers.

A proxy (``http_fault_proxy``) stands between the store and the real S3-compatible server and
spoils a share of the requests. Whatever it does: an object the store says it stored holds
exactly the bytes given; a put that failed left either nothing or the whole object (never a
part or other bytes); reads and local copies return exactly the stored bytes. The time the
faults cost is measured and reported.
"""

from __future__ import annotations

import hashlib
import io
import random
import time
from pathlib import Path

import pytest

from conveyor.config import StorageSettings
from conveyor.objects import ObjectStore, open_store
from tests.support.fault_report import record
from tests.support.http_fault_proxy import HttpFaultProxy
from tests.support.s3server import S3Server

PART = 5 * 1024 * 1024


def _store(server: S3Server, endpoint: str, bucket: str, work: Path) -> ObjectStore:
    keys = {**server.storage_settings(bucket, "faults"), "endpoint": endpoint}
    return open_store(StorageSettings(**keys, work_dir=work, part_size=PART))


@pytest.mark.parametrize(
    ("fault", "error_rate", "reset_rate", "delay"),
    [("5xx", 0.25, 0.0, 0.0), ("resets", 0.0, 0.25, 0.0), ("slow", 0.0, 0.0, 0.3)],
)
def test_the_s3_store_keeps_whole_objects_under_faults(
    s3_server: S3Server,
    tmp_path: Path,
    fault: str,
    error_rate: float,
    reset_rate: float,
    delay: float,
) -> None:
    proxy = HttpFaultProxy(s3_server.endpoint)
    bucket = s3_server.bucket()
    store = _store(s3_server, proxy.endpoint, bucket, tmp_path / "work")
    direct = _store(s3_server, s3_server.endpoint, bucket, tmp_path / "direct")
    rng = random.Random(fault)
    payloads = {
        f"uploads/small-{i}.bin": rng.randbytes(rng.randint(1, 64 * 1024)) for i in range(16)
    }
    payloads["uploads/large.bin"] = rng.randbytes(2 * PART + 12345)  # three parts
    proxy.error_rate, proxy.reset_rate, proxy.delay = error_rate, reset_rate, delay
    started = time.monotonic()
    stored, failed = set(), {}
    try:
        for key, data in payloads.items():
            try:
                result = store.put(
                    key, io.BytesIO(data), size=len(data), sha256=hashlib.sha256(data).hexdigest()
                )
            except Exception as exc:  # the store gave up: recorded, checked below
                failed[key] = repr(exc)
                continue
            assert result.size == len(data)
            stored.add(key)
        # Reads under the same faults return exactly the bytes (or fail, never other bytes).
        for key in sorted(stored):
            with store.open(key, 3, 1000) as part:
                assert part.read() == payloads[key][3:1000]
        with store.local_copy("uploads/large.bin") as copy:
            assert copy.read_bytes() == payloads["uploads/large.bin"]
    finally:
        elapsed = time.monotonic() - started
        proxy.error_rate = proxy.reset_rate = proxy.delay = 0.0
        proxy.close()
    # Counted without the proxy: whole objects only.
    listed = {o.key for o in direct.list("uploads")}
    assert stored <= listed
    for key in listed:
        with direct.open(key) as whole:
            assert whole.read() == payloads[key], f"{key}: not the bytes that were put"
    assert set(failed) <= set(payloads)
    record(
        {
            "fault": f"object_store_{fault}",
            "summary": (
                f"S3 requests: {proxy.counts['forwarded']} forwarded, {proxy.counts['error']} "
                f"answered 503, {proxy.counts['reset']} reset, delay {delay:.1f} s each: "
                f"{len(stored)} of {len(payloads)} puts succeeded ({len(failed)} gave up), "
                f"every stored object whole, {elapsed:.1f} s"
            ),
            "measured": {"counts": dict(proxy.counts), "seconds": elapsed, "failed": failed},
            "drain_seconds": elapsed,
            "tally": {
                "records": len(payloads),
                "done": len(stored),
                "halted": {},
                "provider_operations": 0,
                "objects": len(listed),
                "orphans_swept": 0,
                "violations": [],
            },
        }
    )
    # With five attempts per request, a 30 % fault rate leaves few puts failed.
    assert len(stored) >= len(payloads) - 2, failed
    assert proxy.counts["error"] + proxy.counts["reset"] > 0 or delay > 0
