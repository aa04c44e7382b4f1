"""The ``conveyor`` command line (Typer)."""
