"""The docs match the code: every configuration key is in docs/operations.md."""

from __future__ import annotations

from pathlib import Path

from conveyor.config import Settings

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_config_key_is_documented_with_its_default() -> None:
    text = (DOCS / "operations.md").read_text()
    for section, field in Settings.model_fields.items():
        model = field.annotation
        assert isinstance(model, type)
        for name, sub in model.model_fields.items():  # type: ignore[attr-defined]
            assert f"`[{section}] {name}`" in text, f"[{section}] {name} is not documented"
            if sub.default is not None:
                assert f"`{sub.default}`" in text
