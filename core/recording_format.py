"""What the recording writer (outputs/recorder.py) and reader (sources/recording.py) share: the format's name and
version, the size of its gzip members, and the one-line error a bad file gives (docs/recording-format.md)."""

from __future__ import annotations

from gpuscope.core.errors import GpuscopeError

FORMAT = "gpuscope-recording"
FORMAT_VERSION = 1
MEMBER_BYTES = 256 * 1024  # text per gzip member: the writer closes a member past this, so a file seeks by member


class RecordingError(GpuscopeError):
    """A file that cannot be opened as a recording; the message is one line for the user."""
