"""Decode any audio (or the sound of a video) to 16 kHz mono 16-bit WAV, the recognisers' input.

:func:`normalize_audio` streams: it demuxes one packet at a time, decodes, resamples with
PyAV's :class:`av.AudioResampler` and appends the samples to the output, so memory stays flat
however long the recording is. Levels (RMS, peak) are accumulated on the way.

The source is identified by content (:func:`conveyor.objects.sniff.sniff`), never by its
name, and the demuxer is forced from that verdict so FFmpeg cannot guess from the extension
either. The source is opened read-only; the output is written to a temporary file beside
``dst`` and renamed over it at the end, so a crash never leaves half a ``dst``.

Failures are :class:`~conveyor.errors.MediaError` with one of the reasons in
:data:`REASONS`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import wave
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

import av
import numpy as np
import numpy.typing as npt

from conveyor.audio.halts import AudioHalt
from conveyor.audio.mp4_edits import plain_sound_edits
from conveyor.errors import MediaError
from conveyor.files import atomic_path
from conveyor.objects.sniff import SNIFF_BYTES, Sniffed, is_document, looks_like_pcm, sniff

__all__ = [
    "MAX_SAMPLE_RATE",
    "MIN_SAMPLE_RATE",
    "RAW_PCM_HINT",
    "REASONS",
    "SILENCE_DBFS",
    "TARGET_SAMPLE_RATE",
    "NormalizedAudio",
    "normalize_audio",
]

log = logging.getLogger(__name__)

#: Output rate in Hz: what Whisper and pocketsphinx models are trained on.
TARGET_SAMPLE_RATE: Final = 16_000

#: Accepted source rates in Hz. Below 8 kHz is not speech-grade; above 192 kHz no real recorder
#: writes, and absurd declared rates (awful.wav claims 1,092,676 Hz) are how crafted files
#: overflow FFT sizes downstream.
MIN_SAMPLE_RATE: Final = 8_000
MAX_SAMPLE_RATE: Final = 192_000

#: A recording whose loudest sample stays below this (dBFS) counts as silence: a quiet room
#: recorded at normal gain is around -50 dBFS, digital zero is -inf. Decided from the peak, never
#: from the mean: a long memo with quiet speech (peaks at -36 dBFS) and silence around it has a
#: mean far below -60 dBFS and is still speech.
SILENCE_DBFS: Final = -60.0

#: Reported instead of -inf for digital silence, so the value stays a finite float (JSON).
FLOOR_DBFS: Final = -120.0

#: Every ``MediaError.reason`` this module raises.
REASONS: Final = frozenset(
    {
        AudioHalt.NOT_AUDIO,
        AudioHalt.UNDECODABLE,
        AudioHalt.NO_AUDIO,
        AudioHalt.BAD_SAMPLE_RATE,
        AudioHalt.EMPTY_AUDIO,
    }
)

_FULL_SCALE: Final = 32768.0  # |min int16|: a full-scale square wave is 0 dBFS RMS

# FFmpeg demuxer for each MIME type sniff() reports with kind "audio" or "video". Forcing it
# keeps FFmpeg from probing (goforward.raw probes as an image2 stream) or trusting the name.
# Full comma-separated names, because PyAV reports back the name it was given.
_MP4_DEMUXER: Final = "mov,mp4,m4a,3gp,3g2,mj2"
_MATROSKA_DEMUXER: Final = "matroska,webm"
_DEMUXERS: Final[dict[str, str]] = {
    "audio/wav": "wav",
    "audio/aiff": "aiff",
    "audio/flac": "flac",
    "audio/mpeg": "mp3",
    "audio/aac": "aac",
    "audio/ogg": "ogg",
    "video/ogg": "ogg",
    "audio/amr": "amr",
    "audio/amr-wb": "amr",
    "audio/x-caf": "caf",
    "audio/mp4": _MP4_DEMUXER,
    "video/mp4": _MP4_DEMUXER,
    "video/quicktime": _MP4_DEMUXER,
    "video/3gpp": _MP4_DEMUXER,
    "video/3gpp2": _MP4_DEMUXER,
    "video/webm": _MATROSKA_DEMUXER,
    "video/x-matroska": _MATROSKA_DEMUXER,
    "video/x-msvideo": "avi",
    "video/x-ms-asf": "asf",
}

_RAW_FORMAT: Final = "s16le"

#: The halt text of bytes with no header that look like samples (``not_audio``).
RAW_PCM_HINT: Final = (
    "The file has no audio header, but its bytes look like headerless PCM samples. If it is "
    "16 kHz mono signed 16-bit little-endian PCM, send it again with --raw-pcm "
    "(conveyor records add) or raw_pcm=true (HTTP upload)."
)

# Output samples per resampled frame (1 s, 32 KB). Decoders give ~1024-sample frames; handling
# each of those in Python (array, levels, write) was half the cost of a long recording.
_OUT_FRAME: Final = TARGET_SAMPLE_RATE


@dataclass(frozen=True)
class NormalizedAudio:
    """What :func:`normalize_audio` read and wrote.

    Attributes:
        duration: seconds of audio written (output samples / 16000). Counts decoded samples,
            so encoder priming is excluded (jfk.m4a: 11.005 s, its container says 11.053 s).
        mime_type: sniffed MIME type of the source (``application/octet-stream`` for raw PCM).
        container: PyAV demuxer name, e.g. ``wav``, ``ogg``, ``mp3``,
            ``mov,mp4,m4a,3gp,3g2,mj2``, ``s16le`` for raw PCM.
        codec: source audio codec (canonical name: ``mp3``, not the decoder ``mp3float``).
        sample_rate: source sample rate in Hz.
        channels: source channel count.
        rms_dbfs: RMS level of the output in dBFS (0 = full-scale square wave);
            :data:`FLOOR_DBFS` for digital silence.
        peak_dbfs: peak sample level of the output in dBFS; :data:`FLOOR_DBFS` for silence.
        tracks: audio tracks heard (every decodable one; mixed, or kept apart).
        skipped_tracks: audio tracks left out because no decoder exists for their codec.
        output_channels: channels of the output: 1, or one per heard channel when
            ``separate_channels``.
        silent: the output is (near) digital silence: even its loudest sample is below
            :data:`SILENCE_DBFS` (``peak_dbfs``; the mean level is never used: quiet speech in
            a long recording has a very low mean).
        cancelled_mix: when the channels cancelled each other in the mix (the same sound in
            opposite phase), the channel (1-based, over every heard track) written alone
            instead; otherwise None.
        damaged: when decoding stopped early (a truncated or damaged file: its decoded part is
            kept), what happened, for the record's history; otherwise None.
    """

    duration: float
    mime_type: str
    container: str
    codec: str
    sample_rate: int
    channels: int
    rms_dbfs: float
    peak_dbfs: float
    silent: bool
    tracks: int = 1
    skipped_tracks: int = 0
    output_channels: int = 1
    cancelled_mix: int | None = None
    damaged: str | None = None


def normalize_audio(
    src: Path,
    dst: Path,
    *,
    raw_pcm: bool = False,
    raw_sample_rate: int = 16000,
    raw_channels: int = 1,
    separate_channels: bool = False,
) -> NormalizedAudio:
    """Decode ``src`` and write it to ``dst`` as 16 kHz mono pcm_s16le WAV, streaming.

    Memory is bounded by one packet's worth of samples whatever the length of ``src``. If
    decoding fails part-way after some audio was decoded, the audio so far is kept and a
    warning is logged.

    Args:
        src: the recording, any container PyAV demuxes (WAV, FLAC, MP3, Ogg, M4A, AMR, ...)
            or a video with an audio track (the first audio stream is used). Never modified.
        dst: the WAV file to write; replaced atomically. Must not be ``src``.
        raw_pcm: read ``src`` as headerless s16le PCM instead of sniffing a container
            (e.g. pocketsphinx's ``goforward.raw``).
        raw_sample_rate: rate of the raw PCM in Hz, 8000-192000; only with ``raw_pcm``.
        raw_channels: interleaved channels of the raw PCM, 1-64; only with ``raw_pcm``.
        separate_channels: keep every channel (of every track) apart in the output, one WAV
            channel each, for per-channel recognition; otherwise every track is mixed to mono.

    Returns:
        What was read and written, including levels of the output.

    Raises:
        MediaError: with ``reason`` and a sentence for people that names no path (``src`` is
            usually a blob-store key, meaningless to the uploader):

            * ``not_audio``: the content is no audio or video container (text, an image,
              an empty or unrecognised file);
            * ``undecodable``: a media container that cannot be opened or decoded;
            * ``no_audio``: the container has no audio stream (e.g. a silent video);
            * ``bad_sample_rate``: the declared rate is outside 8000-192000 Hz;
            * ``empty_audio``: no samples were decoded (e.g. a header-only WAV).
        ValueError: ``dst`` is ``src``, or the raw PCM parameters are out of range.
        OSError: ``src`` cannot be read or ``dst`` cannot be written.
    """
    if dst.resolve() == src.resolve():
        raise ValueError(f"normalize_audio would overwrite its source {src}")
    sniffed = sniff(src)
    if raw_pcm:
        if is_document(sniffed):
            # Said to be headerless PCM, yet it is a known non-audio format: decoding it as
            # samples would "transcribe" an image or a web page into noise.
            raise MediaError(
                AudioHalt.NOT_AUDIO,
                f"The file is {_what(sniffed)}, not headerless PCM audio; only send raw_pcm "
                "for 16-bit little-endian samples without a header.",
            )
        if not MIN_SAMPLE_RATE <= raw_sample_rate <= MAX_SAMPLE_RATE:
            raise ValueError(f"raw_sample_rate {raw_sample_rate} Hz is outside 8000-192000 Hz")
        if not 1 <= raw_channels <= 64:
            raise ValueError(f"raw_channels {raw_channels} is outside 1-64")
        demuxer: str | None = _RAW_FORMAT
        # FFmpeg 7+ dropped the pcm demuxer's "channels" option (now silently ignored);
        # "<n>c" is the layout syntax for n channels.
        options = {"sample_rate": str(raw_sample_rate), "ch_layout": f"{raw_channels}c"}
    else:
        demuxer = _demuxer_for(src, sniffed)
        options = {}
        if demuxer == _MP4_DEMUXER and plain_sound_edits(src):
            # Same samples, without the demuxer's second copy of a long file's sample index
            # (35 MB at 6 h): see conveyor.audio.mp4_edits.
            options = {"advanced_editlist": "0"}

    with atomic_path(dst) as tmp:
        with tmp.open("wb") as out, src.open("rb") as source:
            result = _transcode(src, source, out, sniffed, demuxer, options, separate_channels)
        if result.silent and not separate_channels and (result.channels > 1 or result.tracks > 1):
            # Silent once mixed, but made of several channels: they may cancel each other.
            # A rare case, so it pays a second decode rather than every recording a check.
            scratch = tmp.with_name(tmp.name + ".apart")
            try:
                with scratch.open("w+b") as apart, src.open("rb") as source:
                    kept = _transcode(src, source, apart, sniffed, demuxer, options, True)
                    result = _loudest_if_cancelled(result, kept, apart, tmp)
            finally:
                scratch.unlink(missing_ok=True)
        return result


def _loudest_if_cancelled(
    mixed: NormalizedAudio, apart: NormalizedAudio, channels: IO[bytes], dst: Path
) -> NormalizedAudio:
    """When the mix of ``channels`` (a WAV of one channel per heard channel) is silent but one
    of them is not — the same sound in opposite phase, as from a miswired microphone or a
    "stereo widened" export — write that loudest channel alone to ``dst`` as mono. Streams
    twice (peaks, then the channel); returns ``mixed`` unchanged when every channel is silent.
    """
    channels.seek(0)
    with wave.open(channels, "rb") as source:
        count = source.getnchannels()
        peaks = np.zeros(count, dtype=np.int64)
        while block := source.readframes(_OUT_FRAME * 8):
            frames = np.frombuffer(block, dtype="<i2").reshape(-1, count).astype(np.int64)
            peaks = np.maximum(peaks, np.abs(frames).max(axis=0))
        loudest = int(peaks.argmax())
        if peaks[loudest] == 0 or 20.0 * math.log10(peaks[loudest] / _FULL_SCALE) < SILENCE_DBFS:
            return mixed
        source.rewind()
        with dst.open("wb") as out:
            sink = _WavSink(out)
            try:
                while block := source.readframes(_OUT_FRAME * 8):
                    frames = np.frombuffer(block, dtype="<i2").reshape(-1, count)
                    sink.write(np.ascontiguousarray(frames[:, loudest]))
            finally:
                sink.close()
    peak_dbfs = sink.peak_dbfs()
    return dataclasses.replace(
        apart,
        rms_dbfs=sink.rms_dbfs(),
        peak_dbfs=peak_dbfs,
        silent=peak_dbfs < SILENCE_DBFS,
        output_channels=1,
        cancelled_mix=loudest + 1,
    )


def _demuxer_for(src: Path, sniffed: Sniffed) -> str | None:
    """The FFmpeg demuxer for sniffed content, or ``not_audio`` if it is no media container.

    None (let FFmpeg probe the content) only for a media MIME type missing from the table.
    """
    if sniffed.kind in ("audio", "video"):
        return _DEMUXERS.get(sniffed.mime)
    if is_document(sniffed):
        raise MediaError(AudioHalt.NOT_AUDIO, f"The file is {_what(sniffed)}, not audio.")
    if src.stat().st_size == 0:
        raise MediaError(AudioHalt.NOT_AUDIO, "The file is an empty file, not audio.")
    with src.open("rb") as head:
        pcm_like = looks_like_pcm(head.read(SNIFF_BYTES))
    if pcm_like:
        raise MediaError(AudioHalt.NOT_AUDIO, RAW_PCM_HINT)
    raise MediaError(AudioHalt.NOT_AUDIO, "The file is not in a recognised audio or video format.")


def _what(sniffed: Sniffed) -> str:
    """How a person names content we do not decode."""
    if sniffed.kind == "image":
        return f"an image ({sniffed.mime})"
    if sniffed.mime == "text/plain":
        return "text"
    return f"a document ({sniffed.mime})"


def _transcode(
    src: Path,
    source: IO[bytes],
    out: IO[bytes],
    sniffed: Sniffed,
    demuxer: str | None,
    options: dict[str, str],
    separate_channels: bool = False,
) -> NormalizedAudio:
    """Demux, decode, resample and write; returns the summary. ``out`` is left open."""
    try:
        container = av.open(
            source,
            mode="r",
            format=demuxer,
            container_options=options,
            metadata_errors="replace",
        )
    except av.FFmpegError as exc:
        raise MediaError(
            AudioHalt.UNDECODABLE,
            f"The file looks like {sniffed.mime} but cannot be opened: {_why(exc)}.",
        ) from exc
    with container:
        if not container.streams.audio:
            raise MediaError(AudioHalt.NO_AUDIO, f"The file ({sniffed.mime}) has no audio track.")
        # Every audio track is heard: a screen recorder or meeting export puts one speaker on
        # each. A track without a decoder is left out and named in ``skipped_tracks``.
        streams = [s for s in container.streams.audio if s.codec_context is not None]
        skipped = len(container.streams.audio) - len(streams)
        if not streams:
            first = container.streams.audio[0]
            raise MediaError(
                AudioHalt.UNDECODABLE, f"The file's audio codec {first.codec.name} has no decoder."
            )
        ctx = streams[0].codec_context
        rate = int(ctx.sample_rate or 0)
        if rate:
            _check_rate(rate)
        channels = int(ctx.layout.nb_channels)
        codec = str(ctx.codec.canonical_name)
        widths = [int(s.codec_context.layout.nb_channels) or 1 for s in streams]
        apart = separate_channels and (len(streams) > 1 or channels > 1)
        out_channels = sum(widths) if apart else 1

        sink = _WavSink(out, channels=out_channels)
        try:
            rate, stopped = _decode(
                src, container, streams, rate, sink, sniffed, widths=widths, apart=apart
            )
        finally:
            # Closed on every path: a WAV writer left open is closed by the garbage collector
            # after `out` is gone ("Exception ignored ... write to closed file").
            sink.close()
        container_name = str(container.format.name)
        declared = float(container.duration) / 1_000_000 if container.duration else None

    if sink.samples == 0:
        raise MediaError(AudioHalt.EMPTY_AUDIO, "The file contains no audio samples (0 s).")
    rms_dbfs = sink.rms_dbfs()
    peak_dbfs = sink.peak_dbfs()
    return NormalizedAudio(
        duration=sink.samples / TARGET_SAMPLE_RATE,
        mime_type=sniffed.mime,
        container=container_name,
        codec=codec,
        sample_rate=rate,
        channels=channels,
        rms_dbfs=rms_dbfs,
        peak_dbfs=peak_dbfs,
        silent=peak_dbfs < SILENCE_DBFS,
        tracks=len(streams),
        skipped_tracks=skipped,
        output_channels=out_channels,
        damaged=_damage(stopped, sink.samples / TARGET_SAMPLE_RATE, declared),
    )


def _damage(stopped: str | None, decoded: float, declared: float | None) -> str | None:
    """The history's words for a file whose decoding stopped early, or None."""
    if stopped is None:
        return None
    of = f" of the {declared:.2f} s its header declares" if declared and declared > decoded else ""
    return (
        f"the file is damaged or truncated: decoding stopped after {decoded:.2f} s{of} "
        f"({stopped}); the decoded part is kept"
    )


def _decode(
    src: Path,
    container: av.container.InputContainer,
    streams: list[av.AudioStream],
    rate: int,
    sink: _WavSink,
    sniffed: Sniffed,
    *,
    widths: list[int],
    apart: bool,
) -> tuple[int, str | None]:
    """Decode every stream of ``streams`` into ``sink`` (mixed to mono, or each channel apart),
    keeping a damaged recording's decoded part.

    Returns:
        The source sample rate (read from the first frame when the header has none), and why
        decoding stopped early (FFmpeg's words) or None.
    """
    mixer = _Mixer(sink, widths if apart else [1] * len(streams), mix=not apart)
    resamplers = {
        s.index: _Resampler(
            mixer.feeder(i), layout=str(s.codec_context.layout.name) if apart else "mono"
        )
        for i, s in enumerate(streams)
    }

    def drain() -> None:
        for resampler in resamplers.values():
            resampler.flush()
        mixer.finish()

    try:
        for packet in container.demux(*streams):
            resampler = resamplers[packet.stream.index]
            for frame in packet.decode():
                assert isinstance(frame, av.AudioFrame)  # demuxed from audio streams only
                if not rate:
                    rate = int(frame.sample_rate)
                    _check_rate(rate)
                resampler.push(frame)
    except av.FFmpegError as exc:
        # Keep a recording whose tail is damaged: the decoded part is still worth a
        # transcript. With nothing decoded, the file is simply undecodable.
        drain()
        if sink.samples == 0:
            raise MediaError(
                AudioHalt.UNDECODABLE, f"The file ({sniffed.mime}) cannot be decoded: {_why(exc)}."
            ) from exc
        log.warning(
            "%s: decoding stopped after %.3f s: %s; keeping the decoded part",
            src.name,
            sink.samples / TARGET_SAMPLE_RATE,
            _why(exc),
        )
        return rate, _why(exc)
    drain()
    return rate, None


def _why(exc: av.FFmpegError) -> str:
    """FFmpeg's reason without the file name PyAV appends (a temp path means nothing to users)."""
    return str(exc.strerror or exc).rstrip(".")


def _check_rate(rate: int) -> None:
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise MediaError(
            AudioHalt.BAD_SAMPLE_RATE,
            f"The file declares a sample rate of {rate} Hz, outside the accepted "
            f"{MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz.",
        )


class _WavSink:
    """Appends s16 16 kHz frames (mono, or one channel per heard channel) to a WAV file and keeps
    running levels over every channel."""

    def __init__(self, out: IO[bytes], channels: int = 1) -> None:
        self._wav = wave.open(out, "wb")  # noqa: SIM115 - closed in close(), fd owned by caller
        self._channels = channels
        self._wav.setnchannels(channels)
        self._wav.setsampwidth(2)
        self._wav.setframerate(TARGET_SAMPLE_RATE)
        self.samples = 0
        self._sum_squares = 0.0
        self._peak = 0

    def write(self, pcm: npt.NDArray[np.int16]) -> None:
        """Append int16 frames, interleaved: shape (n,) for mono, (n, channels) otherwise."""
        if pcm.size == 0:
            return
        self._wav.writeframesraw(pcm.astype("<i2", copy=False).tobytes())
        wide = pcm.astype(np.int64).reshape(-1)  # int16 overflows on squares and abs(-32768)
        self._sum_squares += float(np.dot(wide, wide))
        self._peak = max(self._peak, int(np.abs(wide).max()))
        self.samples += int(pcm.size) // self._channels

    def close(self) -> None:
        """Patch the RIFF sizes; the underlying file stays open."""
        self._wav.close()

    def rms_dbfs(self) -> float:
        if self.samples == 0 or self._sum_squares == 0.0:
            return FLOOR_DBFS
        rms = math.sqrt(self._sum_squares / (self.samples * self._channels))
        return max(FLOOR_DBFS, 20.0 * math.log10(rms / _FULL_SCALE))

    def peak_dbfs(self) -> float:
        if self._peak == 0:
            return FLOOR_DBFS
        return max(FLOOR_DBFS, 20.0 * math.log10(self._peak / _FULL_SCALE))


class _Resampler:
    """Resampling to s16/16 kHz (``layout``: mono, or the track's own channels) that survives
    format changes mid-stream; hands ``(frames, channels)`` int16 arrays to ``emit``.

    The graph is the one :class:`av.AudioResampler` builds (``abuffer`` -> ``aformat``, which
    inserts libswresample, -> ``abuffersink`` cut into one-second frames), driven directly:
    every decoded frame (~1024 samples) is pushed, but the sink is asked only when a whole
    output frame is due. Asking after each push, as ``AudioResampler.resample`` does, costs
    one FFmpeg "try again" error raised and caught in Python per decoded frame — about a
    third of the resampling time of a long recording.

    A new graph is built when the frames' format, layout or rate change (some streams, e.g.
    an MP3 concatenated from two encodes, change them part-way).
    """

    def __init__(self, emit: Callable[[npt.NDArray[np.int16]], None], layout: str = "mono") -> None:
        self._emit_pcm = emit
        self._layout = layout
        self._width = av.AudioLayout(layout).nb_channels
        self._graph: av.filter.Graph | None = None  # owns the contexts below: keep it alive
        self._source: Any = None
        self._sink: Any = None
        self._input: tuple[str, str, int] | None = None
        self._rate = 0
        self._pushed = 0  # input samples pushed into the current graph
        self._pulled = 0  # output samples taken out of it

    def push(self, frame: av.AudioFrame) -> None:
        signature = (frame.format.name, frame.layout.name, int(frame.sample_rate))
        if signature != self._input:
            self.flush()
            self._open(frame)
            self._input = signature
        self._source.push(frame)
        self._pushed += frame.samples
        # Output samples the pushed input makes, less what was taken: pull once a frame is due.
        if self._pushed * TARGET_SAMPLE_RATE // self._rate - self._pulled >= _OUT_FRAME:
            self._drain()

    def flush(self) -> None:
        """Drain samples the graph still holds (its filter delay and the last partial frame)."""
        if self._source is not None:
            self._source.push(None)
            self._drain()
            self._graph = self._source = self._sink = None
            self._input = None

    def _open(self, frame: av.AudioFrame) -> None:
        graph = av.filter.Graph()
        args = {
            "sample_rate": str(frame.sample_rate),
            "sample_fmt": frame.format.name,
            "channel_layout": frame.layout.name,
        }
        if frame.time_base is not None:
            args["time_base"] = str(frame.time_base)
        source = graph.add("abuffer", **args)
        convert = graph.add(
            "aformat",
            sample_rates=str(TARGET_SAMPLE_RATE),
            sample_fmts="s16",
            channel_layouts=self._layout,
        )
        sink = graph.add("abuffersink")
        source.link_to(convert)
        convert.link_to(sink)
        graph.configure()
        graph.set_audio_frame_size(_OUT_FRAME)
        self._graph, self._source, self._sink = graph, source, sink
        self._rate = int(frame.sample_rate)
        self._pushed = self._pulled = 0

    def _drain(self) -> None:
        while True:
            try:
                out = self._sink.pull()
            except (BlockingIOError, EOFError):
                return  # nothing more until the next push (or ever, after the end)
            self._pulled += out.samples
            # Packed s16: one plane, channels interleaved.
            pcm = out.to_ndarray().astype(np.int16, copy=False).reshape(-1, self._width)
            self._emit_pcm(pcm)


class _Mixer:
    """Lines up the tracks' 16 kHz frames and writes them: summed into one mono channel
    (``mix``), or side by side, one output channel per track channel.

    A single track passes straight through. Tracks are taken to start together; a shorter one is
    padded with silence at the end.
    """

    def __init__(self, sink: _WavSink, widths: list[int], *, mix: bool) -> None:
        self._sink = sink
        self._widths = widths
        self._mix = mix
        self._pending: list[list[npt.NDArray[np.int16]]] = [[] for _ in widths]
        self._counts = [0] * len(widths)

    def feeder(self, index: int) -> Callable[[npt.NDArray[np.int16]], None]:
        """The ``emit`` callback of track ``index``."""
        if len(self._widths) == 1:
            return self._write
        return lambda pcm: self._take(index, pcm)

    def _write(self, pcm: npt.NDArray[np.int16]) -> None:
        self._sink.write(pcm.reshape(-1) if pcm.shape[1] == 1 else pcm)

    def _take(self, index: int, pcm: npt.NDArray[np.int16]) -> None:
        self._pending[index].append(pcm)
        self._counts[index] += pcm.shape[0]
        ready = min(self._counts)
        if ready:
            self._emit(ready)

    def _pop(self, index: int, frames: int) -> npt.NDArray[np.int16]:
        joined = np.concatenate(self._pending[index]) if self._pending[index] else None
        width = self._widths[index]
        if joined is None:
            joined = np.zeros((0, width), dtype=np.int16)
        if joined.shape[0] < frames:  # a track that ended early: silence
            pad = np.zeros((frames - joined.shape[0], width), dtype=np.int16)
            joined = np.concatenate([joined, pad])
        head, rest = joined[:frames], joined[frames:]
        self._pending[index] = [rest] if rest.shape[0] else []
        self._counts[index] = rest.shape[0]
        return head

    def _emit(self, frames: int) -> None:
        parts = [self._pop(i, frames) for i in range(len(self._widths))]
        if self._mix:
            total = np.sum([p.astype(np.int32).sum(axis=1) for p in parts], axis=0)
            self._sink.write(np.clip(total, -32768, 32767).astype(np.int16))
        else:
            self._sink.write(np.concatenate(parts, axis=1))

    def finish(self) -> None:
        """Write what is left, padding the shorter tracks with silence."""
        if len(self._widths) > 1 and max(self._counts, default=0):
            self._emit(max(self._counts))
