"""``python -m bench``: Conveyor's media and audio steps beside their floors, in one run.

Sections (``--only`` picks some): ``images``, ``video``, ``audio``, ``pipeline``. Every number is
the best of ``--repeat`` runs (runs of the methods interleave, so background load hits them alike);
peak RSS is the highest seen. Ratios compare speeds: "×2.0 vs pillow" means Conveyor took half
Pillow's time. See docs/performance.md for the targets and how to read the report.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import floors
from bench.measure import ROOT, Run, best, load_average, python_worker, run

CORPUS = ROOT.parent / "shared" / "corpus"
JPEGS = [
    *(f"exif-samples__landscape_{n}.jpg" for n in range(1, 9)),
    "exif-samples__Canon_40D.jpg",
    "exif-samples__DSCN0010.jpg",
    "lychee__mongolia",
    "pillow__app13-multiple.jpg",
    "pillow__pil_sample_cmyk.jpg",
]
HDR_AVIF = "immich-test-assets__10bit-HDR-P3-nclx.avif"
HEIC = "immich-test-assets__IMG_2682.heic"
VIDEOS = ["moviepy__fire2.mp4", "lychee__train.mov", "file-type__fixture.mov"]
SIZES = (320, 1280, 2560)


@dataclass
class Row:
    """One line of the report: a method on an input."""

    section: str
    subject: str
    method: str
    seconds: float | None
    peak_rss_mb: float | None
    note: str = ""
    cpu: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    targets: list[tuple[str, str, bool | None]] = field(default_factory=list)

    def add(
        self, section: str, subject: str, method: str, result: Run | None, note: str = ""
    ) -> Row:
        if result is None:
            row = Row(section, subject, method, None, None, note or "failed")
        else:
            row = Row(
                section,
                subject,
                method,
                result.seconds,
                result.peak_rss_mb,
                note,
                extra=result.answer,
                cpu=result.cpu,
            )
        self.rows.append(row)
        seconds = f"{row.seconds:.3f} s" if row.seconds is not None else "-"
        cpu = f"{row.cpu:.3f} s CPU" if row.cpu is not None else "-"
        peak = f"{row.peak_rss_mb:.0f} MiB" if row.peak_rss_mb is not None else "-"
        print(f"    {subject} | {method} | {seconds} | {cpu} | {peak} {note}", file=sys.stderr)
        return row

    def target(self, text: str, measured: str, met: bool | None) -> None:
        self.targets.append((text, measured, met))


def _repeat(methods: dict[str, Callable[[], Run]], times: int) -> dict[str, Run | None]:
    """Run every method ``times``, interleaved; best of each."""
    runs: dict[str, list[Run]] = {name: [] for name in methods}
    errors: dict[str, str] = {}
    for _ in range(times):
        for name, call in methods.items():
            result = call()
            runs[name].append(result)
            if result.error:
                errors[name] = result.error
    for name, error in errors.items():
        print(f"    {name} failed: {error}", file=sys.stderr)
    return {name: best(found) for name, found in runs.items()}


def _sum_runs(results: list[Run]) -> Run:
    error = next((r.error for r in results if r.error), None)
    return Run(
        sum(r.seconds for r in results),
        sum(r.wall for r in results),
        sum(r.cpu for r in results),
        max(r.peak_rss_mb for r in results),
        {},
        error,
    )


def _ratio(mine: Row | None, other: Row | None) -> float | None:
    if mine is None or other is None or not mine.seconds or not other.seconds:
        return None
    return other.seconds / mine.seconds


def _cpu_ratio(mine: Row | None, other: Row | None) -> float | None:
    if mine is None or other is None or not mine.cpu or not other.cpu:
        return None
    return other.cpu / mine.cpu


# --------------------------------------------------------------------------- images


def images(report: Report, args: argparse.Namespace) -> None:
    media = CORPUS / "media"
    sets: dict[str, list[Path]] = {
        "jpeg corpus": [media / n for n in JPEGS],
        "hdr avif 20 MP": [media / HDR_AVIF],
        "heic 12 MP": [media / HEIC],
        "12 MP jpeg (generated)": [Path(p) for p in _generated("phone_jpegs", args.cache, media)],
    }
    if args.photos:
        sets["your photos"] = [Path(p) for p in args.photos]
    vips_cli = shutil.which("vipsthumbnail")
    for name, files in sets.items():
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            report.skipped.append(f"images/{name}: missing {', '.join(missing)}")
            continue
        listed = [str(f) for f in files]
        methods: dict[str, Callable[[], Run]] = {
            "conveyor": lambda listed=listed: python_worker("images_conveyor", files=listed),
            "pyvips floor": lambda listed=listed: python_worker("images_pyvips", files=listed),
            "pillow": lambda listed=listed: python_worker("images_pillow", files=listed),
        }
        if vips_cli:
            methods["vipsthumbnail"] = lambda listed=listed: _vipsthumbnail(vips_cli, listed)
        print(f"  images: {name} ({len(files)} files)", file=sys.stderr)
        results = _repeat(methods, args.repeat)
        rows = {m: report.add("images", name, m, r, _failure(r, m)) for m, r in results.items()}
        mine = rows["conveyor"]
        for method, row in rows.items():
            ratio, cpu = _ratio(mine, row), _cpu_ratio(mine, row)
            if method != "conveyor" and ratio is not None:
                row.note = f"conveyor ×{ratio:.2f}" + (f" (CPU ×{cpu:.2f})" if cpu else "")
        if name == "jpeg corpus":
            vs_pillow = _ratio(mine, rows["pillow"])
            cpu_pillow = _cpu_ratio(mine, rows["pillow"])
            report.target(
                "JPEG variants ≥ 2× Pillow",
                f"×{vs_pillow:.2f} (CPU ×{cpu_pillow:.2f})" if vs_pillow and cpu_pillow else "n/a",
                None if vs_pillow is None else vs_pillow >= 2.0,
            )
            if vips_cli:
                vs_cli = _ratio(mine, rows["vipsthumbnail"])
                report.target(
                    "JPEG variants ≥ 0.8× vipsthumbnail",
                    f"×{vs_cli:.2f}" if vs_cli else "n/a",
                    None if vs_cli is None else vs_cli >= 0.8,
                )
            else:
                report.target("JPEG variants ≥ 0.8× vipsthumbnail", "skipped (no floor)", None)
        if name == "hdr avif 20 MP":
            _media_add(report, files[0], args, pillow=rows["pillow"])


def _failure(result: Run | None, method: str) -> str:
    if result is not None:
        return ""
    return "failed (this libvips has no HEVC decoder)" if method == "pyvips floor" else "failed"


def _vipsthumbnail(binary: str, files: list[str]) -> Run:
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as out:
        return _sum_runs(
            [
                # "N>": shrink only, as Conveyor does (vipsthumbnail enlarges by default).
                run(
                    [
                        binary,
                        "--size",
                        f"{size}>",
                        "-o",
                        f"{out}/%s-{size}.webp[Q=80,strip]",
                        *files,
                    ]
                )
                for size in SIZES
            ]
        )


def _media_add(report: Report, photo: Path, args: argparse.Namespace, *, pillow: Row) -> None:
    """The whole ``conveyor media add`` process on one photo: wall time and peak RSS."""
    conveyor = shutil.which("conveyor", path=str(Path(sys.executable).parent)) or "conveyor"
    results = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as tmp:
            env = {
                "CONVEYOR_DATABASE__URL": f"sqlite:///{tmp}/conveyor.db",
                "CONVEYOR_STORAGE__ROOT": f"{tmp}/store",
                "CONVEYOR_CONFIG": f"{tmp}/none.toml",
            }
            Path(tmp, "none.toml").write_text("")
            setup = [
                run([conveyor, "db", "upgrade"], env=env),
                run([conveyor, "albums", "create", "bench", "--owner", "bench"], env=env),
            ]
            failed = next((r.error for r in setup if r.error), None)
            if failed:
                report.skipped.append(f"conveyor media add: set-up failed: {failed}")
                return
            results.append(
                run([conveyor, "media", "add", "bench", str(photo), "--owner", "bench"], env=env)
            )
    result = best(results)
    row = report.add("images", "hdr avif 20 MP", "conveyor media add (process)", result)
    if result is None:
        report.target("HDR AVIF `media add` ≤ 300 MiB peak RSS", "failed", False)
        return
    row.seconds = result.wall
    report.target(
        "HDR AVIF `media add` ≤ 300 MiB peak RSS",
        f"{result.peak_rss_mb:.0f} MiB",
        result.peak_rss_mb <= 300,
    )
    if pillow.seconds:
        report.target(
            "HDR AVIF `media add` no slower than Pillow",
            f"{result.wall:.2f} s vs Pillow {pillow.seconds:.2f} s",
            result.wall <= pillow.seconds,
        )


# --------------------------------------------------------------------------- video


def video(report: Report, args: argparse.Namespace) -> None:
    inputs = [CORPUS / "media" / n for n in VIDEOS]
    if args.clip_seconds > 0:
        print(f"  video: generating a {args.clip_seconds} s 1080p clip (cached)", file=sys.stderr)
        inputs.append(Path(_generated("clip_1080p", args.cache, args.clip_seconds)))
    inputs += [Path(p) for p in args.videos]
    ffmpeg = shutil.which("ffmpeg")
    worst: float | None = None
    worst_cpu: float | None = None
    for src in inputs:
        if not src.is_file():
            report.skipped.append(f"video: missing {src}")
            continue
        print(f"  video: {src.name}", file=sys.stderr)
        probe = python_worker("video_conveyor", src=str(src))
        if probe.error:
            report.add("video", src.name, "conveyor", None, probe.error)
            continue
        methods: dict[str, Callable[[], Run]] = {
            "conveyor": lambda src=src: python_worker("video_conveyor", src=str(src))
        }
        if ffmpeg:
            remuxed = bool(probe.answer["remuxed"])
            methods["ffmpeg"] = lambda src=src, remuxed=remuxed: _ffmpeg_video(
                ffmpeg, src, remuxed=remuxed
            )
        results = _repeat(methods, args.repeat)
        mine = report.add("video", src.name, "conveyor", results["conveyor"])
        mine.note = "remuxed" if probe.answer["remuxed"] else "transcoded"
        if ffmpeg:
            theirs = report.add("video", src.name, "ffmpeg", results["ffmpeg"])
            if mine.seconds and theirs.seconds:
                factor = mine.seconds / theirs.seconds
                theirs.note = f"conveyor takes {factor:.2f}× ffmpeg's time"
                if mine.cpu and theirs.cpu:
                    theirs.note += f", {mine.cpu / theirs.cpu:.2f}× its CPU"
                    worst_cpu = max(worst_cpu or 0.0, mine.cpu / theirs.cpu)
                worst = factor if worst is None else max(worst, factor)
    cpu_note = f" (CPU: worst {worst_cpu:.2f}×)" if worst_cpu is not None else ""
    report.target(
        "video poster + playback ≤ 1.1× ffmpeg",
        f"worst {worst:.2f}×{cpu_note}" if worst is not None else "skipped (no ffmpeg)",
        None if worst is None else worst <= 1.1,
    )


def _ffmpeg_video(ffmpeg: str, src: Path, *, remuxed: bool) -> Run:
    """The commands a user would type for the same poster and playback."""
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as out:
        base = [ffmpeg, "-nostdin", "-v", "error", "-y"]
        poster = run([*base, "-i", str(src), "-frames:v", "1", "-q:v", "2", f"{out}/poster.jpg"])
        streams = ["-map", "0:v:0", "-map", "0:a:0?"]
        if remuxed:
            codec = ["-c", "copy"]
        else:
            codec = [
                "-vf",
                "scale=-2:'min(1080,ih)'",
                "-c:v",
                "libx264",
                "-preset",
                "veryfast",
                "-profile:v",
                "high",
                "-crf",
                "23",
                "-maxrate",
                "5000000",
                "-bufsize",
                "10000000",
                "-pix_fmt",
                "yuv420p",
                "-c:a",
                "aac",
                "-b:a",
                "128k",
            ]
        playback = run(
            [*base, "-i", str(src), *streams, *codec, "-movflags", "+faststart", f"{out}/p.mp4"]
        )
        return _sum_runs([poster, playback])


# --------------------------------------------------------------------------- audio


def audio(report: Report, args: argparse.Namespace) -> None:
    inputs: list[tuple[str, Path]] = []
    for hours in args.hours:
        print(f"  audio: generating a {hours:g} h recording (cached)", file=sys.stderr)
        inputs.append(
            (f"{hours:g} h AAC stereo 48 kHz", Path(_generated("recording", args.cache, hours)))
        )
    inputs += [(Path(p).name, Path(p)) for p in args.recordings]
    ffmpeg = shutil.which("ffmpeg")
    rtf: list[float] = []
    per_cpu: list[float] = []
    rss: list[tuple[float, float]] = []
    for name, src in inputs:
        if not src.is_file():
            report.skipped.append(f"audio: missing {src}")
            continue
        print(f"  audio: {name}", file=sys.stderr)
        methods: dict[str, Callable[[], Run]] = {
            "conveyor": lambda src=src: python_worker("audio_conveyor", src=str(src)),
            "pyav floor": lambda src=src: python_worker("audio_pyav", src=str(src)),
        }
        if ffmpeg:
            methods["ffmpeg -ac 1 -ar 16000"] = lambda src=src: _ffmpeg_audio(ffmpeg, src)
        results = _repeat(methods, args.audio_repeat)
        mine = report.add("audio", name, "conveyor", results["conveyor"])
        duration = float(mine.extra.get("duration", 0.0))
        for method, result in results.items():
            row = mine if method == "conveyor" else report.add("audio", name, method, result)
            if row.seconds and duration:
                row.note = f"{duration / row.seconds:.0f}× real time"
                if row.cpu:
                    row.note += f", {duration / row.cpu:.0f}× per CPU second"
        if mine.seconds and duration and mine.peak_rss_mb:
            rtf.append(duration / mine.seconds)
            rss.append((duration / 3600, mine.peak_rss_mb))
            if mine.cpu:
                per_cpu.append(duration / mine.cpu)
    if rtf:
        cpu_note = f" ({min(per_cpu):.0f}× per CPU second)" if per_cpu else ""
        report.target(
            "normalize ≥ 300× real time", f"worst {min(rtf):.0f}×{cpu_note}", min(rtf) >= 300
        )
    if rss:
        longest = max(rss)
        report.target(
            "normalize peak RSS independent of duration, 6 h ≤ 150 MiB",
            ", ".join(f"{h:g} h: {mb:.0f} MiB" for h, mb in sorted(rss)),
            longest[1] <= 150 and max(mb for _, mb in rss) - min(mb for _, mb in rss) < 20,
        )


def _ffmpeg_audio(ffmpeg: str, src: Path) -> Run:
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as out:
        argv = [ffmpeg, "-nostdin", "-v", "error", "-y", "-i", str(src)]
        return run([*argv, "-ac", "1", "-ar", "16000", "-c:a", "pcm_s16le", f"{out}/out.wav"])


# --------------------------------------------------------------------------- pipeline


def pipeline(report: Report, args: argparse.Namespace) -> None:
    photo = CORPUS / "media" / "exif-samples__Canon_40D.jpg"
    print(f"  pipeline: {args.items} items through the engine", file=sys.stderr)
    result = best(
        [python_worker("pipeline", photo=str(photo), items=args.items) for _ in range(args.repeat)]
    )
    row = report.add("pipeline", f"{args.items} small photos, SQLite", "engine vs direct", result)
    if result is not None:
        a = result.answer
        per_item = (a["engine_seconds"] - a["direct_seconds"]) / args.items * 1000
        row.note = (
            f"engine {a['engine_seconds'] / args.items * 1000:.1f} ms/item, direct "
            f"{a['direct_seconds'] / args.items * 1000:.1f} ms/item: overhead {per_item:.1f} ms"
        )


# --------------------------------------------------------------------------- report


SECTIONS: dict[str, Callable[[Report, argparse.Namespace], None]] = {
    "images": images,
    "video": video,
    "audio": audio,
    "pipeline": pipeline,
}


def _versions() -> str:
    code = (
        "import av, PIL, pyvips; "
        "vips = '.'.join(str(pyvips.version(i)) for i in range(3)); "
        "print(f'libvips {vips}, PyAV {av.__version__} (libavcodec "
        '{av.library_versions["libavcodec"]}), Pillow {PIL.__version__}\')'
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return f"Python {platform.python_version()}, {found.stdout.strip() or found.stderr.strip()}"


def _generated(kind: str, *args: Any) -> Any:
    """Call ``bench.generate.<kind>`` in a child process and return its result (paths as str).

    The parent never loads PyAV, pyvips or NumPy: a child's peak RSS as the kernel reports it
    (``wait4``) starts from its parent's at spawn time, which would hide small tools' own.
    """
    code = (
        "import json, sys; from pathlib import Path; from bench import generate; "
        "args = json.loads(sys.argv[1]); args[0] = Path(args[0]); "
        f"result = generate.{kind}(*[Path(a) if isinstance(a, str) else a for a in args]); "
        "print(json.dumps([str(p) for p in result] if isinstance(result, list) else str(result)))"
    )
    argv = [sys.executable, "-c", code, json.dumps([str(args[0]), *map(_plain, args[1:])])]
    found = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(found.stdout.strip().splitlines()[-1])


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def _print(report: Report) -> None:
    section = None
    for row in report.rows:
        if row.section != section:
            section = row.section
            print(f"\n## {section}\n")
            print(
                f"{'input':28} {'method':30} {'seconds':>9} {'CPU s':>9} {'peak RSS MiB':>12}  note"
            )
        seconds = f"{row.seconds:9.3f}" if row.seconds is not None else f"{'-':>9}"
        cpu = f"{row.cpu:9.3f}" if row.cpu is not None else f"{'-':>9}"
        peak = f"{row.peak_rss_mb:12.0f}" if row.peak_rss_mb is not None else f"{'-':>12}"
        print(f"{row.subject[:28]:28} {row.method[:30]:30} {seconds} {cpu} {peak}  {row.note}")
    if report.targets:
        print("\n## targets\n")
        for text, measured, met in report.targets:
            mark = {True: "met", False: "MISSED", None: "n/a"}[met]
            print(f"{mark:7} {text}: {measured}")
    if report.skipped:
        print("\n## skipped\n")
        for line in report.skipped:
            print(f"- {line}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--repeat", type=int, default=3, help="runs per method (best is kept)")
    parser.add_argument("--audio-repeat", type=int, default=1, help="runs per audio method")
    parser.add_argument("--hours", type=float, nargs="*", default=[1, 6], help="recordings")
    parser.add_argument("--clip-seconds", type=int, default=60, help="generated 1080p clip")
    parser.add_argument("--items", type=int, default=50, help="pipeline items")
    parser.add_argument("--photos", nargs="*", default=[], help="more photos (one set)")
    parser.add_argument("--videos", nargs="*", default=[], help="more videos")
    parser.add_argument("--recordings", nargs="*", default=[], help="more recordings")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "conveyor-bench",
        help="where generated inputs are kept",
    )
    parser.add_argument(
        "--install-floors",
        action="store_true",
        help="apt-get install the Debian tools compared against (libvips-tools, ffmpeg)",
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {list(SECTIONS)}")
    if args.install_floors:
        floors.install(floors.missing())
    report = Report()
    print("# Conveyor media benchmark\n")
    print(_versions())
    print(f"start: {load_average()}")
    for floor in floors.missing():
        report.skipped.append(
            f"{floor.binary} (Debian {floor.package}) is not installed: {floor.compares} "
            "not compared with it (--install-floors installs it)"
        )
    if not CORPUS.is_dir():
        report.skipped.append(f"the shared corpus is not at {CORPUS}: corpus inputs skipped")
    for name in chosen:
        SECTIONS[name](report, args)
    print(f"end: {load_average()}")
    _print(report)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in report.rows], indent=2))


if __name__ == "__main__":
    main()
