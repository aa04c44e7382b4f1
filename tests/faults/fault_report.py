"""What each fault run measured, collected for the report printed after the suite."""

from __future__ import annotations

from typing import Any

REPORT: list[dict[str, Any]] = []
