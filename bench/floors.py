"""The command-line tools the benchmark compares against, from Debian's packages.

They are installed only when asked (``--install-floors``: ``apt-get install``, as root); without
them the comparisons that need them are skipped and the report says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["FLOORS", "Floor", "install", "missing"]


@dataclass(frozen=True)
class Floor:
    """A tool: the binary on PATH and the Debian package that ships it."""

    binary: str
    package: str
    compares: str


FLOORS = (
    Floor("vipsthumbnail", "libvips-tools", "image variants"),
    Floor("ffmpeg", "ffmpeg", "video poster + playback, audio normalize"),
)


def missing() -> list[Floor]:
    """The floors whose binary is not on PATH."""
    return [floor for floor in FLOORS if shutil.which(floor.binary) is None]


def install(floors: list[Floor]) -> None:
    """``apt-get install`` the packages of ``floors`` (needs root and Debian's apt).

    Raises:
        SystemExit: not root, no apt-get, or apt-get failed.
    """
    if not floors:
        return
    if shutil.which("apt-get") is None:
        raise SystemExit("--install-floors needs Debian's apt-get")
    if os.geteuid() != 0:
        raise SystemExit("--install-floors needs root (apt-get install)")
    packages = sorted({floor.package for floor in floors})
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
        check=True,
        env=env,
    )
