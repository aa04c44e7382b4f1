"""A real S3-compatible server for tests: ``moto`` in server mode on a free loopback port.

:func:`start_s3_server` runs ``python -m moto.server`` as a child process (a real HTTP server;
no in-process mock of boto3) and returns its endpoint and credentials; :meth:`S3Server.bucket`
makes a fresh bucket, :meth:`S3Server.storage_env` the ``CONVEYOR_STORAGE__*`` variables a
Conveyor process (or ``Settings``) needs to use it. ``conftest.py`` starts one per session
(fixture ``s3_server``); tests that need their own (a fault proxy in front, a restart) call
:func:`start_s3_server` themselves.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.needs import need
from tests.support.servers import free_port

__all__ = ["PART", "S3Server", "start_s3_server"]

#: The smallest part S3 allows: tests set it as ``[storage] part_size`` so that multipart
#: uploads are exercised with small objects.
PART = 5 * 1024 * 1024


@dataclass
class S3Server:
    """A running moto server.

    Attributes:
        endpoint: ``http://127.0.0.1:<port>``.
        access_key_id, secret_access_key, region: what clients sign with (moto accepts any).
    """

    endpoint: str
    access_key_id: str = "conveyor-test"
    secret_access_key: str = "conveyor-test-secret"
    region: str = "us-east-1"
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def client(self) -> Any:
        """A boto3 S3 client for this server (path-style addressing)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            config=Config(s3={"addressing_style": "path"}),
        )

    def bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name when None) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:20]}"
        self.client().create_bucket(Bucket=name)
        return name

    def storage_settings(self, bucket: str, prefix: str = "") -> dict[str, Any]:
        """``[storage]`` keys for ``s3://bucket/prefix`` on this server (credentials included)."""
        return {
            "url": f"s3://{bucket}/{prefix}".rstrip("/"),
            "endpoint": self.endpoint,
            "region": self.region,
            "path_style": True,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
        }

    def storage_env(self, bucket: str, prefix: str = "") -> dict[str, str]:
        """The same as ``CONVEYOR_STORAGE__*`` environment variables, for child processes."""
        return {
            f"CONVEYOR_STORAGE__{k.upper()}": str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in self.storage_settings(bucket, prefix).items()
        }

    def stop(self) -> None:
        """Stop the server (its buckets are gone)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _ready(endpoint: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def start_s3_server(*, port: int | None = None) -> Iterator[S3Server]:
    """Run a moto S3 server on 127.0.0.1 (a free port unless ``port``) until the block ends.

    A missing ``moto[server]`` skips locally and fails under ``CI=true`` (:func:`needs.need`).
    """
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:
        need(False, f"moto[server] (pip install -e '.[dev]'): {exc}")
    for _ in range(5):
        chosen = port or free_port()
        endpoint = f"http://127.0.0.1:{chosen}"
        env = {**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"}
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(chosen)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        server = S3Server(endpoint=endpoint, process=process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            if _ready(endpoint):
                break
            time.sleep(0.1)
        if process.poll() is None and _ready(endpoint):
            try:
                yield server
            finally:
                server.stop()
            return
        server.stop()  # the port was taken meanwhile: try another
    raise RuntimeError("could not start the moto S3 server")
