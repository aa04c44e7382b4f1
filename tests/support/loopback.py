"""Loopback HTTP servers that speak the providers' published APIs, for the adapters' tests.

Real HTTP on 127.0.0.1 (stdlib ``ThreadingHTTPServer``), written from the public API references
(Yandex SpeechKit v3 REST: recognizeFileAsync, Operation, getRecognition; OpenAI
``POST /v1/audio/transcriptions`` with ``verbose_json``), not from our client. Each server counts
the operations it started (what a provider would bill) and can be told to misbehave the way real
services do: lose the answer after accepting, answer 429 with ``Retry-After``, go down (the port
really closes), finish without a result, forget a result, send a malformed stream.
"""

from __future__ import annotations

import base64
import contextlib
import email.parser
import email.policy
import io
import json
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import av

KEY = "sk-loopback-secret-0123456789"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.open_sockets: set[socket.socket] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        self.open_sockets.add(request)
        super().process_request(request, client_address)

    def close_connections(self) -> None:
        """Drop kept-alive connections too: a server that is down answers nothing."""
        for sock in list(self.open_sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.open_sockets.clear()


class Loopback:
    """Runs a handler class on a fixed loopback port; :meth:`down` really closes the port."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], state: Any) -> None:
        self._handler = handler
        self.state = state
        self._server: _Server | None = None
        self.port = 0
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        server = _Server(("127.0.0.1", self.port), self._handler)
        server.app = self  # type: ignore[attr-defined]
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_connections()
            self._server = None

    def close(self) -> None:
        self.down()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def app(self) -> Any:
        return self.server.app  # type: ignore[attr-defined]

    def body(self) -> bytes:
        length = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(length)

    def send(
        self,
        status: int,
        payload: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def send_json(self, status: int, document: Any, headers: dict[str, str] | None = None) -> None:
        self.send(status, json.dumps(document).encode(), headers=headers)

    def lose_answer(self) -> None:
        """Close the connection without answering (the request was read and acted on)."""
        self.close_connection = True
        self.connection.shutdown(2)


# -- SpeechKit v3 -------------------------------------------------------------------------------


@dataclass
class SpeechKitOp:
    id: str
    request: dict[str, Any]
    polls: int = 0
    cancelled: bool = False


@dataclass
class SpeechKitState:
    """What the fake SpeechKit does; tests change the fields between calls."""

    api_key: str = KEY
    polls_until_done: int = 1
    finals: list[tuple[int, int, str, str]] = field(
        default_factory=lambda: [(0, 1800, "привет мир", "ru-RU")]
    )  # (start ms, end ms, text, language) in channel "0"
    lose_next_submit_answer: bool = False
    throttle: int = 0  # answer this many requests with 429 first
    retry_after: str = "3"
    error_before_done: bool = False
    done_without_result: bool = False
    result_expired: bool = False
    malformed_stream: bool = False
    two_channels: bool = False
    # Words of final i (SpeechKit's ``{"text", "startTimeMs", "endTimeMs"}``), and whether a
    # normalised ``finalRefinement`` follows each final.
    words: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    refine: bool = True
    cancellable: bool = True  # False: Cancel answers FAILED_PRECONDITION, the operation runs on
    cancels: int = 0  # cancel requests received
    operations: dict[str, SpeechKitOp] = field(default_factory=dict)
    submits: int = 0  # requests that started a (billed) operation
    checks: int = 0  # operation status checks answered
    lock: threading.Lock = field(default_factory=threading.Lock)


class SpeechKitHandler(_Handler):
    def _authorized(self) -> bool:
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() not in ("api-key", "bearer") or value != self.app.state.api_key:
            self.send_json(401, {"code": 16, "message": "Unauthenticated", "details": []})
            return False
        return True

    def _throttled(self) -> bool:
        state: SpeechKitState = self.app.state
        with state.lock:
            if state.throttle <= 0:
                return False
            state.throttle -= 1
        self.send_json(
            429,
            {"code": 8, "message": "Too many requests", "details": []},
            headers={"Retry-After": state.retry_after},
        )
        return True

    def do_POST(self) -> None:
        state: SpeechKitState = self.app.state
        body = self.body()
        path = urlsplit(self.path).path
        if path.startswith("/operations/") and path.endswith(":cancel"):
            self._cancel(path.removeprefix("/operations/").removesuffix(":cancel"))
            return
        if path != "/stt/v3/recognizeFileAsync":
            self.send_json(404, {"code": 5, "message": "Not found"})
            return
        if not self._authorized() or self._throttled():
            return
        request = json.loads(body)
        if ("content" in request) == ("uri" in request):
            self.send_json(400, {"code": 3, "message": "exactly one of content or uri"})
            return
        if "content" in request:
            audio = base64.b64decode(request["content"])
            kind = request["recognitionModel"]["audioFormat"]["containerAudio"]
            assert kind["containerAudioType"] == "OGG_OPUS"
            with av.open(io.BytesIO(audio)) as container:  # it must really be Ogg Opus
                assert container.streams.audio[0].codec_context.name == "opus"
        op = SpeechKitOp(id="e03" + secrets.token_hex(8)[:17], request=request)
        with state.lock:
            state.operations[op.id] = op
            state.submits += 1
            lose = state.lose_next_submit_answer
            state.lose_next_submit_answer = False
        if lose:
            self.lose_answer()
            return
        self.send_json(200, _operation(op, done=False))

    def _cancel(self, op_id: str) -> None:
        """The Operation service's Cancel: best effort; answers the Operation as it now is."""
        state: SpeechKitState = self.app.state
        if not self._authorized() or self._throttled():
            return
        op = state.operations.get(op_id)
        if op is None:
            self.send_json(404, {"code": 5, "message": "Operation not found"})
            return
        with state.lock:
            state.cancels += 1
            if state.cancellable:
                op.cancelled = True
        if not state.cancellable:
            self.send_json(
                400, {"code": 9, "message": "Operation cannot be cancelled", "details": []}
            )
            return
        self.send_json(200, _cancelled(op))

    def do_GET(self) -> None:
        state: SpeechKitState = self.app.state
        parts = urlsplit(self.path)
        if not self._authorized() or self._throttled():
            return
        if parts.path.startswith("/operations/"):
            op = state.operations.get(parts.path.rsplit("/", 1)[1])
            if op is None:
                self.send_json(404, {"code": 5, "message": "Operation not found"})
                return
            with state.lock:
                state.checks += 1
                op.polls += 1
            if op.cancelled:
                self.send_json(200, _cancelled(op))
                return
            if state.error_before_done:
                document = _operation(op, done=False)
                document["error"] = {
                    "code": 3,
                    "message": "audio could not be decoded",
                    "details": [],
                }
                self.send_json(200, document)
                return
            done = op.polls > state.polls_until_done
            self.send_json(200, _operation(op, done=done))
            return
        if parts.path == "/stt/v3/getRecognition":
            op_id = parse_qs(parts.query).get("operation_id", [""])[0]
            op = state.operations.get(op_id)
            if op is None or state.result_expired:
                self.send_json(404, {"code": 5, "message": f"operation {op_id} not found"})
                return
            if state.done_without_result:
                self.send(200, b"")
                return
            if state.malformed_stream:
                self.send(200, b'{"result": {"final": {"alternatives": [{"text": "cut')
                return
            self.send(200, _recognition_stream(state))
            return
        self.send_json(404, {"code": 5, "message": "Not found"})


def _operation(op: SpeechKitOp, *, done: bool) -> dict[str, Any]:
    return {
        "id": op.id,
        "description": "STT v3 async recognition",
        "createdAt": "2026-11-30T08:00:00Z",
        "createdBy": "ajeloopback",
        "modifiedAt": "2026-11-30T08:00:01Z",
        "done": done,
        "metadata": None,
        **({"response": {"@type": "type.googleapis.com/google.protobuf.Empty"}} if done else {}),
    }


def _cancelled(op: SpeechKitOp) -> dict[str, Any]:
    """A cancelled Operation: done, with a google.rpc.Status error of code 1 (CANCELLED)."""
    document = _operation(op, done=True)
    del document["response"]
    document["error"] = {"code": 1, "message": "Operation cancelled", "details": []}
    return document


def _recognition_stream(state: SpeechKitState) -> bytes:
    """Concatenated JSON objects, as getRecognition sends them: partials, finals, refinements."""
    events: list[dict[str, Any]] = []
    channels = ["0", "1"] if state.two_channels else ["0"]
    for channel in channels:
        for index, (start, end, text, language) in enumerate(state.finals):
            said = text if channel == "0" else f"{text} (right)"
            alternative = {
                "words": state.words.get(index, []),
                "text": said,
                "startTimeMs": str(start),
                "endTimeMs": str(end),
                "confidence": 0,
                "languages": [{"languageCode": language, "probability": 0.98}],
            }
            events.append(
                {
                    "result": {
                        "sessionUuid": {"uuid": "s1"},
                        "channelTag": channel,
                        "partial": {
                            "alternatives": [{**alternative, "text": said[:3]}],
                            "channelTag": channel,
                        },
                    }
                }
            )
            events.append(
                {
                    "result": {
                        "channelTag": channel,
                        "final": {"alternatives": [alternative], "channelTag": channel},
                    }
                }
            )
            events.append({"result": {"channelTag": channel, "eouUpdate": {"timeMs": str(end)}}})
            if not state.refine:
                continue
            events.append(
                {
                    "result": {
                        "channelTag": channel,
                        "finalRefinement": {
                            "finalIndex": str(index),
                            "normalizedText": {
                                "alternatives": [{**alternative, "text": said.capitalize() + "."}]
                            },
                        },
                    }
                }
            )
    # Objects back to back, some on one line, some pretty-printed: neither NDJSON nor an array.
    return b"".join(
        json.dumps(e, ensure_ascii=False, indent=2 if i % 3 == 0 else None).encode()
        for i, e in enumerate(events)
    )


def speechkit_server() -> Loopback:
    return Loopback(SpeechKitHandler, SpeechKitState())


# -- OpenAI-compatible ----------------------------------------------------------------------------


@dataclass
class OpenAIState:
    """What the fake transcription server does."""

    api_key: str | None = KEY
    max_bytes: int = 26_214_400
    lose_next_answer: bool = False
    throttle: int = 0
    retry_after: str = "2"
    error_on_200: bool = False
    language: str = "english"
    # Extra segments per chunk, flagged by the response's own fields.
    flagged: bool = True
    recognise: Callable[[bytes], list[dict[str, Any]]] | None = None
    uploads: list[dict[str, Any]] = field(default_factory=list)  # every accepted (billed) call
    lock: threading.Lock = field(default_factory=threading.Lock)


class OpenAIHandler(_Handler):
    def do_POST(self) -> None:
        state: OpenAIState = self.app.state
        body = self.body()
        if urlsplit(self.path).path != "/v1/audio/transcriptions":
            self.send_json(404, _openai_error("Not found"))
            return
        if (
            state.api_key is not None
            and self.headers.get("Authorization") != f"Bearer {state.api_key}"
        ):
            self.send_json(401, _openai_error("Incorrect API key provided", "invalid_api_key"))
            return
        with state.lock:
            if state.throttle > 0:
                state.throttle -= 1
                throttled = True
            else:
                throttled = False
        if throttled:
            self.send_json(
                429,
                _openai_error("Rate limit reached", "rate_limit_exceeded"),
                headers={"Retry-After": state.retry_after},
            )
            return
        if len(body) > state.max_bytes:
            self.send_json(413, _openai_error("Maximum content size limit exceeded"))
            return
        fields, upload = _multipart(self.headers.get("Content-Type", ""), body)
        if upload is None or "model" not in fields:
            self.send_json(400, _openai_error("file and model are required"))
            return
        name, content_type, audio = upload
        if not name.endswith((".ogg", ".oga", ".wav", ".mp3", ".flac", ".webm", ".m4a")):
            self.send_json(400, _openai_error("Invalid file format."))
            return
        with av.open(io.BytesIO(audio), "r") as container:
            stream = container.streams.audio[0]
            samples = sum(frame.samples for frame in container.decode(stream))
            duration = samples / stream.codec_context.sample_rate
        if state.error_on_200:
            self.send_json(200, {"error": "failed to read audio"})
            return
        segments = (
            state.recognise(audio)
            if state.recognise is not None
            else [
                {
                    "start": 0.0,
                    "end": round(duration, 3),
                    "text": f" Chunk of {duration:.1f} seconds.",
                }
            ]
        )
        if state.flagged:
            segments = [
                *segments,
                {
                    "start": duration,
                    "end": duration,
                    "text": " Thank you for watching.",
                    "no_speech_prob": 0.95,
                    "avg_logprob": -1.4,
                },
                {
                    "start": duration,
                    "end": duration,
                    "text": " and so and so and so and so",
                    "compression_ratio": 3.1,
                },
                {"start": duration, "end": duration, "text": " [BLANK_AUDIO]"},
            ]
        full = [
            {
                "id": i,
                "seek": 0,
                "tokens": [],
                "temperature": 0.0,
                "avg_logprob": -0.2,
                "compression_ratio": 1.2,
                "no_speech_prob": 0.01,
                **s,
            }
            for i, s in enumerate(segments)
        ]
        with state.lock:
            state.uploads.append(
                {
                    **fields,
                    "bytes": len(audio),
                    "duration": duration,
                    "filename": name,
                    "content_type": content_type,
                }
            )
            lose = state.lose_next_answer
            state.lose_next_answer = False
        if lose:
            self.lose_answer()
            return
        text = "".join(s["text"] for s in full).strip()
        # Word times, when asked for, are one list for the whole response (as OpenAI's API
        # gives them); a segment made by ``recognise`` may carry its own ``words``.
        words = [w for s in full for w in s.pop("words", [])]
        if fields.get("response_format") == "verbose_json":
            document: dict[str, Any] = {
                "task": "transcribe",
                "language": state.language,
                "duration": duration,
                "text": text,
                "segments": full,
                "usage": {"type": "duration", "duration": round(duration)},
            }
            if "word" in fields.get("timestamp_granularities[]", "").split(","):
                document["words"] = words
        else:
            document = {"text": text}
        self.send_json(200, document)


def _openai_error(message: str, code: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }


def _multipart(
    content_type: str, body: bytes
) -> tuple[dict[str, str], tuple[str, str, bytes] | None]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields: dict[str, str] = {}
    upload = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        raw = part.get_payload(decode=True)
        payload = raw if isinstance(raw, bytes) else b""
        if filename is not None:
            upload = (filename, part.get_content_type(), payload)
        elif isinstance(name, str):
            # A repeated field (``timestamp_granularities[]``) keeps every value, comma-joined.
            value = payload.decode()
            fields[name] = f"{fields[name]},{value}" if name in fields else value
    return fields, upload


def openai_server() -> Loopback:
    return Loopback(OpenAIHandler, OpenAIState())
