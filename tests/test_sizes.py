"""Sizes shown to people are in binary units, from one formatter (:mod:`conveyor.sizes`).

The formatter's own cases, and a scan of the package's source: no text for people puts a number
before the word ``bytes`` (``10579 bytes``), except where the exact count is the point.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from conveyor.sizes import human_size

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "conveyor"

#: Texts that give an exact count of bytes on purpose, by module: a size that must match to the
#: byte (a checksum's file, a write that is not what its caller declared) or a protocol's own unit
#: (an HTTP byte range, S3's part size as its setting says it).
EXACT = {
    "providers/whisper_model.py",  # the joined model's size beside its SHA-256
    "objects/store.py",  # ObjectMismatch: bytes written against bytes declared
    "objects/stores/s3.py",  # part_size in bytes, as the setting is, with the binary size beside
    "api/objects.py",  # a Range outside the file: Content-Range counts bytes
}


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (10579, "10.3 KiB"),
        (16 * 1024, "16 KiB"),
        (1024 * 1024, "1 MiB"),
        (352_078, "343.8 KiB"),
        (3_300_000, "3.1 MiB"),
        (2 * 1024**3, "2 GiB"),
        (1_300_000_000, "1.2 GiB"),
        (5 * 1024**4 + 1, "5.0 TiB"),
        (3 * 1024**5, "3072 TiB"),
        (-2048, "-2 KiB"),
    ],
)
def test_sizes_are_said_in_binary_units(size: int, shown: str) -> None:
    assert human_size(size) == shown


def _raw_byte_counts(tree: ast.AST) -> list[int]:
    """Lines of f-strings and %-formats that put a value right before `` bytes``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            for before, after in itertools.pairwise(parts):
                if (
                    isinstance(before, ast.FormattedValue)
                    and isinstance(after, ast.Constant)
                    and str(after.value).startswith(" bytes")
                ):
                    lines.append(node.lineno)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and any(f"%{c} bytes" in node.value for c in "dsi")
        ):
            lines.append(node.lineno)
    return lines


def test_no_text_for_people_gives_a_size_as_raw_bytes() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in EXACT
        for line in _raw_byte_counts(ast.parse(path.read_text()))
    }
    assert found == set(), "say these sizes with conveyor.sizes.human_size"


def test_the_exact_counts_allowed_are_still_there() -> None:
    """The allowance does not outlive the text it allows."""
    for module in EXACT:
        assert _raw_byte_counts(ast.parse((PACKAGE / module).read_text())), module
