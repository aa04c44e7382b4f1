"""Show that normalize_audio's memory is flat in the length of the recording.

Generates a 2-minute and a 20-minute 44.1 kHz stereo tone (FLAC by default, so each run
resamples and downmixes), then normalizes each in a fresh subprocess and reports:

* peak RSS of that subprocess (``ru_maxrss``) before and after the call, and the growth;
* the tracemalloc peak during the call (Python and NumPy allocations; FFmpeg's own buffers are
  C allocations that only RSS sees).

A fresh process per file keeps one measurement's high-water mark out of the other's.

Usage::

    .venv/bin/python bench/bench_normalize_memory.py [--codec flac|libopus] [--minutes 2 20]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

RATE = {"flac": 44100, "libopus": 48000}
FORMAT = {"flac": "flac", "libopus": "ogg"}


def generate(path: Path, minutes: float, codec: str) -> None:
    """Encode a stereo 440/660 Hz tone one second at a time (flat memory here too)."""
    rate = RATE[codec]
    with av.open(str(path), "w", format=FORMAT[codec]) as out:
        stream = out.add_stream(codec, rate=rate, layout="stereo")
        assert isinstance(stream, av.AudioStream)
        total = round(minutes * 60 * rate)
        for start in range(0, total, rate):
            n = min(rate, total - start)
            t = (start + np.arange(n)) / rate
            planes = np.stack(
                [0.3 * np.sin(2 * np.pi * 440 * t), 0.3 * np.sin(2 * np.pi * 660 * t)]
            )
            frame = av.AudioFrame.from_ndarray(planes.astype(np.float32), "fltp", "stereo")
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))


def measure(src: Path, dst: Path) -> dict[str, float]:
    """Normalize once in this process and return the memory figures (run in a child)."""
    from conveyor.audio.normalize import normalize_audio

    rss_before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = normalize_audio(src, dst)
    elapsed = time.perf_counter() - started
    rss_after_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Second run under tracemalloc, which slows every allocation: timed by the first run only.
    tracemalloc.start()
    normalize_audio(src, dst)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "duration_s": result.duration,
        "seconds": elapsed,
        "rss_before_mib": rss_before_kib / 1024,
        "rss_peak_mib": rss_after_kib / 1024,
        "rss_growth_mib": (rss_after_kib - rss_before_kib) / 1024,
        "tracemalloc_peak_kib": traced_peak / 1024,
        "src_mib": src.stat().st_size / 2**20,
        "dst_mib": dst.stat().st_size / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codec", choices=sorted(RATE), default="flac")
    parser.add_argument("--minutes", type=float, nargs="+", default=[2.0, 20.0])
    parser.add_argument("--child", nargs=2, metavar=("SRC", "DST"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(measure(Path(args.child[0]), Path(args.child[1]))))
        return

    print(f"normalize_audio memory, {args.codec} {RATE[args.codec]} Hz stereo → 16 kHz mono")
    print(
        f"{'length':>8} {'src MiB':>8} {'dst MiB':>8} {'time s':>7} {'RSS before':>11}"
        f" {'RSS peak':>9} {'RSS growth':>11} {'tracemalloc peak':>17}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for minutes in args.minutes:
            src = Path(tmp) / f"tone_{minutes:g}min.{FORMAT[args.codec]}"
            generate(src, minutes, args.codec)
            child = subprocess.run(
                [sys.executable, __file__, "--child", str(src), str(Path(tmp) / "out.wav")],
                check=True,
                capture_output=True,
                text=True,
            )
            m = json.loads(child.stdout)
            print(
                f"{minutes:>6g} m {m['src_mib']:>8.1f} {m['dst_mib']:>8.1f} {m['seconds']:>7.2f}"
                f" {m['rss_before_mib']:>8.1f} MiB {m['rss_peak_mib']:>5.1f} MiB"
                f" {m['rss_growth_mib']:>7.1f} MiB {m['tracemalloc_peak_kib']:>13.1f} KiB"
            )
            src.unlink()


if __name__ == "__main__":
    main()
