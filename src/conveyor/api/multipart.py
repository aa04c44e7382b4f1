"""The file of a ``multipart/form-data`` upload, streamed: python-multipart parses, we choose.

python-multipart's push parser (:class:`~python_multipart.multipart.MultipartParser`) finds
the boundaries, part headers and part bytes as the body arrives, and bounds each part's
headers (:data:`_MAX_PART_HEADERS` of at most :data:`_MAX_HEADER_BYTES` each). This module
only decides what an upload may carry, and hands the ``file`` part's bytes on as they come:

* one part named ``file`` (with a ``filename``: a browser form, ``curl -F file=@x``);
* before it, text fields the route names (``title``, ``language``), each once (but a list
  field, named ``...[]``, whose values are kept comma-joined), each at most 16 KiB of UTF-8; a
  field the route does not know is ``unknown_field`` (all named together);
* at most 16 parts in all, whatever their names (5,000 parts under one name are 5,000 parts);
* in each part, each header once (two ``Content-Disposition`` headers could name two
  different things), and the body as it is (no ``Content-Transfer-Encoding`` other than the
  identity ones, which RFC 7578 §4.7 deprecates).

Anything else is refused (400) rather than dropped: a file part under another name
(``no_file`` when it comes first), a second file part, a text part after the file (the file is
streaming to storage by then; applying later fields would mean holding it back).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from conveyor.api.errors import ApiError
from conveyor.error_codes import ErrorCode
from conveyor.names import kept_name

__all__ = ["MultipartFile", "Upload", "boundary_of"]

_MAX_FIELD_BYTES = 16 * 1024
_MAX_PARTS = 16
_MAX_PART_HEADERS = 8
_MAX_HEADER_BYTES = 4 * 1024
_MAX_BOUNDARY = 200
_IDENTITY_ENCODINGS = frozenset({"", "7bit", "8bit", "binary"})


@dataclass
class Upload:
    """What came with the file: ``filename`` from the part header, text fields by name."""

    filename: str | None = None
    content_type: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


def boundary_of(content_type: str) -> bytes:
    """The boundary of a ``multipart/form-data`` Content-Type (400 when there is none usable)."""
    _kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary or len(boundary) > _MAX_BOUNDARY:
        raise ApiError(ErrorCode.BAD_MULTIPART, "multipart/form-data without a usable boundary")
    return boundary


def _refuse(message: str, code: ErrorCode = ErrorCode.BAD_MULTIPART) -> ApiError:
    return ApiError(code, message)


class MultipartFile:
    """The ``file`` part of a multipart body, parsed from ``chunks`` while it streams.

    :meth:`read_fields` parses up to the first byte of the file and returns what came before
    it; iterating then yields the file's bytes, at most one network chunk held at a time.

    Raises (from either): :class:`~conveyor.api.errors.ApiError` 400 ``bad_multipart``,
    ``no_file`` or ``unknown_field`` as the module docstring lists.
    """

    def __init__(
        self, chunks: Iterator[bytes], boundary: bytes, fields: frozenset[str] = frozenset()
    ) -> None:
        self._chunks = chunks
        self._allowed = fields
        self.upload = Upload()
        self._parts = 0
        self._unknown: list[str] = []
        self._headers: dict[str, str] = {}
        self._header = [b"", b""]  # the header line being read: name, value
        self._part: str | None = None  # "file", a text field's name, or None (skipped)
        self._text = bytearray()
        self._pending: list[bytes] = []
        self._file_seen = self._file_done = self._finished = False
        self._parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._on_part_begin,
                "on_header_field": self._on_header_field,
                "on_header_value": self._on_header_value,
                "on_header_end": self._on_header_end,
                "on_headers_finished": self._on_headers_finished,
                "on_part_data": self._on_part_data,
                "on_part_end": self._on_part_end,
            },
            max_header_count=_MAX_PART_HEADERS,
            max_header_size=_MAX_HEADER_BYTES,
        )

    # -- what the parser reports -----------------------------------------------------------
    def _on_part_begin(self) -> None:
        self._parts += 1
        if self._parts > _MAX_PARTS:
            raise _refuse(f"more than {_MAX_PARTS} parts in one multipart upload")
        self._headers, self._part, self._text = {}, None, bytearray()

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header[0] += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header[1] += data[start:end]

    def _on_header_end(self) -> None:
        name = self._header[0].decode("latin-1").strip().lower()
        value = self._header[1].decode("latin-1").strip()
        self._header = [b"", b""]
        if name in self._headers:
            raise _refuse(f"a multipart part carries the header {name!r} twice")
        self._headers[name] = value

    def _on_headers_finished(self) -> None:
        disposition, options = parse_options_header(self._headers.get("content-disposition", ""))
        if disposition != b"form-data" or b"name" not in options:
            raise _refuse("a multipart part has no form-data name")
        encoding = self._headers.get("content-transfer-encoding", "").lower()
        if encoding not in _IDENTITY_ENCODINGS:
            raise _refuse(f"a multipart part is sent as {encoding!r}; send its bytes as they are")
        name = options[b"name"].decode("utf-8", "replace")
        # A part with a filename is a file (`curl -F name=@path`, a browser's file input).
        is_file = b"filename" in options
        if name == "file":
            self._begin_file(options.get(b"filename"))
        elif self._file_seen:
            # Refused rather than dropped: the intake is still streaming the file, so the
            # refusal leaves nothing behind.
            if is_file:
                raise _refuse(
                    f"send one file per upload: a second file part {name!r} follows `file`"
                )
            raise _refuse(f"text fields must come before the file part; {name!r} came after it")
        elif is_file:
            raise _refuse(
                f"send the file as a part named `file` (this file part is named {name!r})",
                ErrorCode.NO_FILE,
            )
        elif name not in self._allowed:
            self._unknown.append(name)  # named in the 400 once the file part begins
        elif name in self.upload.fields and not name.endswith("[]"):
            # A name ending in [] is a list (``timestamp_granularities[]``): it may repeat.
            raise _refuse(f"form field {name!r} is sent twice")
        else:
            self._part = name

    def _begin_file(self, filename: bytes | None) -> None:
        self._check_unknown()
        if self._file_seen:
            raise _refuse("send one part named `file` per upload")
        self._file_seen = True
        self._part = "file"
        if filename:
            # The bytes as sent (a browser sends UTF-8; another client may not), kept as the
            # CLI keeps a path's name.
            self.upload.filename = kept_name(filename)
        self.upload.content_type = self._headers.get("content-type")

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._part == "file":
            self._pending.append(bytes(data[start:end]))
        elif self._part is not None:
            self._text += data[start:end]
            if len(self._text) > _MAX_FIELD_BYTES:
                raise _refuse(f"form field {self._part!r} is too long")

    def _on_part_end(self) -> None:
        if self._part == "file":
            self._file_done = True
        elif self._part is not None:
            try:
                value = self._text.decode("utf-8")
            except UnicodeDecodeError:
                raise _refuse(f"form field {self._part!r} is not UTF-8") from None
            earlier = self.upload.fields.get(self._part)
            # The values of a repeated list field are kept comma-joined, in order.
            self.upload.fields[self._part] = value if earlier is None else f"{earlier},{value}"
        self._part = None

    def _check_unknown(self) -> None:
        if self._unknown:
            names = ", ".join(repr(n) for n in dict.fromkeys(self._unknown))
            known = ", ".join(f"`{n}`" for n in sorted(self._allowed)) or "none"
            raise _refuse(
                f"unknown form field(s) {names}; the text fields of this upload are: {known} "
                "(then the part named `file`)",
                ErrorCode.UNKNOWN_FIELD,
            )

    # -- driving the parser ----------------------------------------------------------------
    def _feed(self, chunk: bytes | None) -> None:
        try:
            if chunk is not None:
                self._parser.write(chunk)
                return
            self._finished = True
            self._parser.finalize()
        except MultipartParseError as exc:
            raise _refuse(f"the multipart body is malformed: {exc}") from None
        self._check_unknown()
        if not self._file_seen:
            raise _refuse("the multipart body has no part named `file`", ErrorCode.NO_FILE)
        if not self._file_done:
            raise _refuse("the multipart body ends inside the file part")

    def read_fields(self) -> Upload:
        """Parse up to the start of the file part's content; the fields that came before it."""
        while not self._file_seen and not self._finished:
            self._feed(next(self._chunks, None))
        return self.upload

    def __iter__(self) -> Iterator[bytes]:
        while True:
            if self._pending:
                pending, self._pending = self._pending, []
                yield from pending
            if self._finished:
                return
            self._feed(next(self._chunks, None))
