"""Prometheus metrics of the engine, by domain, stage and outcome; never by worker (D13)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = ["CLAIMS_LOST", "STEP_OUTCOMES", "STEP_SECONDS"]

STEP_OUTCOMES = Counter(
    "conveyor_step_outcomes",
    "Steps finished, by domain, stage left from, and outcome.",
    ["domain", "stage", "outcome"],
)

CLAIMS_LOST = Counter(
    "conveyor_claims_lost",
    "Step results refused because the claim token no longer held (P6).",
    ["domain", "stage"],
)

STEP_SECONDS = Histogram(
    "conveyor_step_seconds",
    "Wall time of one step, by domain and stage.",
    ["domain", "stage"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800),
)
