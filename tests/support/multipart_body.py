"""Multipart bodies built by hand for upload tests: the parts in the order given, so a test can
put text fields before or after the file (the upload receivers care)."""

from __future__ import annotations

__all__ = ["multipart"]


def multipart(*parts: tuple[str, str | None, bytes]) -> tuple[bytes, str]:
    """A multipart body of (name, filename, content) parts in this order, and its type."""
    body = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        body += f"--xyz\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return body + b"--xyz--\r\n", "multipart/form-data; boundary=xyz"
