"""A candidate's ONNX file while ``run`` runs: looked at on the clock, re-read once it was replaced and holds still.

``run`` reads its served models once, at start (a replaced served-model file is read at the next start, where the
state's fingerprint rebuilds what described the old one). A candidate (``models[].compare_with``) is the model that
changes most often, and nothing of it is kept, so its file is watched: :class:`FileWatch` looks at the file (device,
inode, size, modification time) at most once every :data:`CHECK_SECONDS` and reports a change once the file differs
from the one loaded and held still between two looks (a copy still being written is not read half-way; replacing
the file with ``mv`` is best) and its bytes differ too (the same model written again, or a mounted ConfigMap's
links swapped over the same bytes, is no change). :class:`~monitor.runtime.candidate.Candidate` then loads it again and checks it against
the served model as at start, or refuses it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: seconds between two looks at a candidate's file
CHECK_SECONDS = 1.0

#: what tells one file from another at a path: (device, inode, size, modification time in ns); None: no file
FileKey = tuple[int, int, int, int] | None


def digest(path: Path) -> str | None:
    """The SHA-256 of ``path``'s bytes, None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def file_key(path: Path) -> FileKey:
    """``path``'s :data:`FileKey`, None when nothing can be read there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class FileWatch:
    """The file at ``path`` as it was when loaded, against what is there now.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); p = d / "m.onnx"; _ = p.write_bytes(b"one")
    >>> watch = FileWatch(p, every=1.0)
    >>> watch.changed(0.0)
    False
    >>> _ = p.write_bytes(b"three"); watch.changed(1.0), watch.changed(2.0), watch.changed(3.0)
    (False, True, False)
    >>> _ = p.write_bytes(b"three!"); _ = p.write_bytes(b"three"); watch.changed(4.0), watch.changed(5.0)
    (False, False)
    """

    def __init__(self, path: Path, every: float = CHECK_SECONDS) -> None:
        self.path = path
        self.every = every
        #: the file last loaded (or refused): a change is a change from it
        self.loaded = file_key(path)
        self._seen = self.loaded
        #: the bytes last loaded (or refused)
        self.digest = digest(path)
        self._next = float("-inf")

    def changed(self, now: float) -> bool:
        """True once per change: the file differs from the one loaded, is the one seen at the previous look, and
        holds other bytes (``now``: a monotonic clock, in seconds); at most one look per ``every`` seconds."""
        if now < self._next:
            return False
        self._next = now + self.every
        key = file_key(self.path)
        settled, self._seen = key == self._seen, key
        if key == self.loaded or not settled:
            return False
        self.loaded = key  # handled: loaded or refused, it is looked at again when it changes again
        now_digest = digest(self.path)
        if key is not None and now_digest is not None and now_digest == self.digest:
            return False  # the same bytes at a new inode or time
        self.digest = now_digest
        return True
