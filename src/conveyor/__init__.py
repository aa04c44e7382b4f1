"""Conveyor: a self-hosted media pipeline on a durable, record-centric pipeline engine."""

__version__ = "0.1.0"
