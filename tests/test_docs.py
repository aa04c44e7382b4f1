"""The docs match the code: every configuration key is in docs/operations.md."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from conveyor.config import Settings

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _keys(section: str, model: type[BaseModel]) -> list[tuple[str, str, object]]:
    """(section, key, default) of every key, sub-sections (``[transcription.openai]``) included."""
    keys: list[tuple[str, str, object]] = []
    for name, sub in model.model_fields.items():
        if isinstance(sub.annotation, type) and issubclass(sub.annotation, BaseModel):
            keys += _keys(f"{section}.{name}", sub.annotation)
        else:
            keys.append((section, name, sub.default))
    return keys


def test_every_config_key_is_documented_with_its_default() -> None:
    text = (DOCS / "operations.md").read_text()
    for section, field in Settings.model_fields.items():
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for where, name, default in _keys(section, model):
            assert f"`[{where}] {name}`" in text, f"[{where}] {name} is not documented"
            if default is not None:
                assert f"`{default}`" in text
