"""Every module declares its public surface with ``__all__``, and every name in it exists."""

from __future__ import annotations

import importlib
import pkgutil

import conveyor

SKIP = {"conveyor.db.migrations", "conveyor.providers.whisper_job"}


def modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(conveyor.__path__, "conveyor."):
        if any(info.name == s or info.name.startswith(s + ".") for s in SKIP):
            continue
        names.append(info.name)
    return names


def test_public_surface_names_exist() -> None:
    missing = []
    checked = []
    for name in modules():
        module = importlib.import_module(name)
        for symbol in getattr(module, "__all__", []):
            checked.append(f"{name}.{symbol}")
            if not hasattr(module, symbol):
                missing.append(f"{name}.{symbol}")
    assert missing == []
    # The walk reached the package's modules (a wrong root would check nothing).
    assert {"conveyor.pipeline.queries.claim_statement", "conveyor.api.app.create_app"} <= set(
        checked
    )


def test_pipeline_surface() -> None:
    import conveyor.pipeline as pipeline

    assert set(pipeline.__all__) >= {
        "Advance",
        "Claim",
        "Domain",
        "Executor",
        "Fail",
        "Halt",
        "Postpone",
        "Stage",
        "StepContext",
        "WorkerPool",
        "resume",
    }
