"""What tests need from outside the repository, and the one rule for a need that is missing.

A test that needs the shared corpus, a service (PostgreSQL) or a browser calls :func:`need`.
Locally a missing need skips the test with its reason; under ``CI=true`` it fails, because a
CI run that skipped would be green without proving anything. ``conftest.py`` applies the same
rule to every other skip (a ``skipif`` marker, ``importorskip``): under CI a skip is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["AUDIO_CORPUS", "CORPUS", "MEDIA_CORPUS", "in_ci", "need", "need_corpus"]

CORPUS = (Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus").resolve()
AUDIO_CORPUS = CORPUS / "audio"
MEDIA_CORPUS = CORPUS / "media"


def in_ci() -> bool:
    """True when the run is a CI run (``CI=true``), where nothing may skip."""
    return os.environ.get("CI") == "true"


def need(present: bool, what: str, *, module: bool = False) -> None:
    """Go on when ``present``; else skip locally, fail under ``CI=true``.

    Args:
        present: whether the need is met.
        what: what is missing, for the message ("the shared audio corpus at …").
        module: called at module level (skips the whole module locally).
    """
    if present:
        return
    if in_ci():
        pytest.fail(f"{what} is missing, and under CI=true nothing may skip", pytrace=False)
    pytest.skip(f"{what} is missing", allow_module_level=module)


def need_corpus(folder: Path = CORPUS, *, module: bool = False) -> Path:
    """``folder`` of the shared corpus, after :func:`need` checked that it exists."""
    need(folder.is_dir(), f"the shared corpus folder {folder}", module=module)
    return folder
