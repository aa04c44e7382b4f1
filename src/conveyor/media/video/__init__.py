"""Videos: probe, poster frame and browser playback with PyAV (FFmpeg) only (NORMS M1-M3, M8).

One module per job, each on a local file:

* :mod:`~conveyor.media.video.probe`: the facts a video record needs (upright size, rotation,
  duration, codecs, capture time); refuses what is not a video or cannot be decoded;
* :mod:`~conveyor.media.video.poster`: an upright JPEG of a representative frame;
* :mod:`~conveyor.media.video.playback`: the H.264/AAC faststart MP4 browsers play, remuxed when
  the source already is one;
* :mod:`~conveyor.media.video.encode`: the frame → packet paths of that playback;
* :mod:`~conveyor.media.video.streams`: opening a file and finding its streams.
"""

from conveyor.media.video.playback import Playback, make_playback
from conveyor.media.video.poster import extract_poster
from conveyor.media.video.probe import VideoInfo, probe_video

__all__ = ["Playback", "VideoInfo", "extract_poster", "make_playback", "probe_video"]
