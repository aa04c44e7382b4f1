"""Conveyor's media and audio steps measured beside their libraries and the tools people use.

Run from the repository root: ``python -m bench`` (or ``bench/run``); ``--help`` lists the
options. Every measured call runs in a fresh child process; its peak resident memory is read from
outside (``wait4``), and its time is the step's own time (imports excluded) for Python code and
the wall time of the process for command-line tools. See docs/performance.md.
"""
