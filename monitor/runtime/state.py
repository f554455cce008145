"""The runtime's durable state: ``<state_dir>/state.json`` (counters, standardizers, references, windows and the
applied offsets) and ``<state_dir>/inflight.json`` (the records being processed).

:class:`StateStore` reads and writes the state file; :class:`InFlight` the marker; :func:`restore_model` puts one model's saved part back when it still
describes the model that was loaded, and :func:`model_state` is that part as the pipeline saves it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from monitor.errors import DataError
from monitor.model.standardize import Standardizer
from monitor.rolling.reference import EncodedJSON
from monitor.runtime.models import ModelRuntime

log = logging.getLogger("monitor.runtime.state")
STATE_FILE = "state.json"
STATE_VERSION = 1
INFLIGHT_FILE = "inflight.json"
#: per model, ``<state_dir>/baselines-<hash of the model name>.json``: its per-segment baselines (large, and they
#: change only when a segment gets one: written then, not at every checkpoint)
BASELINES_VERSION = 1


class StateStore:
    """``<state_dir>/state.json``, written durably: temp file, fsync, rename, fsync of the directory.

    A state directory that cannot be written (read-only, full, gone) never stops the sidecar: :meth:`save` returns
    False, removes its temp file (a full volume is not filled further), and :attr:`degraded` says what to fix until a
    save succeeds again. The pipeline commits offsets only after a save that returned True.
    """

    def __init__(self, state_dir: Path) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE
        #: None while saves succeed; else what is wrong and what to fix (``harmonic_degraded{reason="state_dir"}``)
        self.degraded: str | None = None
        self.failed_saves_total = 0

    def load(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("version") == STATE_VERSION:
                check_state(data)
        except (OSError, ValueError) as exc:  # ValueError: bad JSON, bad UTF-8, or not the shape persist() writes
            # a corrupt state file must not keep the sidecar down: start fresh, keep the bad file for inspection
            bad = self.path.with_suffix(f".corrupt-{int(time.time())}")
            try:
                self.path.rename(bad)
            except OSError as move_error:  # a read-only directory: leave it; the next good save replaces it
                log.error(
                    "state file unreadable and cannot be moved aside; starting fresh",
                    extra={"path": str(self.path), "error": str(exc), "move_error": str(move_error)},
                )
                return {}
            log.error("state file unreadable; starting fresh", extra={"moved_to": str(bad), "error": str(exc)})
            return {}
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            log.warning("state file has an unknown version; ignoring it", extra={"path": str(self.path)})
            return {}
        return data

    def save(self, data: dict[str, Any]) -> bool:
        """Write ``data`` durably; False (and :attr:`degraded` set) when the directory cannot take it."""
        tmp = self.path.with_suffix(".tmp")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            body = encode_state({"version": STATE_VERSION, **data}).encode("utf-8")
            with open(tmp, "wb") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            _fsync_dir(self.dir)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            self.failed_saves_total += 1
            self.degraded = (
                f"state directory '{self.dir}' cannot be written ({exc.strerror or exc}); state is not saved and "
                "offsets are not committed until it can. Free space or make it writable by the sidecar's user."
            )
            return False
        if self.degraded is not None:
            log.warning("state directory writable again; state saved", extra={"path": str(self.path)})
        self.degraded = None
        return True


#: what stands for an :class:`EncodedJSON` while the rest of a document is encoded (no cleaned text holds a NUL)
_FRAGMENT = "\x00encoded:"


def encode_state(doc: dict[str, Any]) -> str:
    """``doc`` as JSON, as ``json.dumps(doc, default=float)`` would write it, with each :class:`EncodedJSON` in it
    written as its text (encoded before, once)."""
    fragments: list[str] = []

    def default(value: Any) -> Any:
        if isinstance(value, EncodedJSON):
            fragments.append(value.text)
            return f"{_FRAGMENT}{len(fragments) - 1}"
        return float(value)

    body = json.dumps(doc, default=default)
    for i, text in enumerate(fragments):
        body = body.replace(json.dumps(f"{_FRAGMENT}{i}"), text, 1)
    return body


def baselines_path(state_dir: Path, model: str) -> Path:
    """Where a model's per-segment baselines are kept."""
    return Path(state_dir) / f"baselines-{hashlib.sha256(model.encode('utf-8')).hexdigest()[:16]}.json"


def save_baselines(state_dir: Path, model: str, fingerprint: dict[str, Any], segments: dict[str, Any]) -> bool:
    """Write a model's per-segment baselines durably (temp file, fsync, rename); False when the directory cannot
    take it (the state's own save reports the fault)."""
    path = baselines_path(state_dir, model)
    tmp = path.with_suffix(".tmp")
    doc = {"version": BASELINES_VERSION, "model": model, "fingerprint": fingerprint, "segments": segments}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(json.dumps(doc, default=float).encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def load_baselines(state_dir: Path, model: str, fingerprint: dict[str, Any]) -> dict[str, Any] | None:
    """A model's saved per-segment baselines (``{segment: reference dict}``), or None: none saved, unreadable, or
    computed with another model, reference or scoring settings (``fingerprint`` differs: they are rebuilt)."""
    path = baselines_path(state_dir, model)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("saved segment baselines unreadable; ignoring them", extra={"path": str(path), "error": str(exc)})
        return None
    if (
        not isinstance(doc, dict)
        or doc.get("version") != BASELINES_VERSION
        or not isinstance(doc.get("segments"), dict)
    ):
        log.warning("saved segment baselines of an unknown shape; ignoring them", extra={"path": str(path)})
        return None
    if doc.get("fingerprint") != fingerprint:
        log.warning(
            "saved segment baselines were computed with another model, reference or scoring settings; rebuilding them",
            extra={"model": model},
        )
        return None
    segments: dict[str, Any] = doc["segments"]
    return segments


#: an in-flight marker up to this long is written in place, in one write (:class:`InFlight`)
IN_PLACE_BYTES = 4096


class InFlight:
    """``<state_dir>/inflight.json``: the records being processed, so that a crash can be traced to a record.

    Written before a poll's records are processed and removed once they are applied, so a marker found at start-up
    means the previous process died with those records in flight (an OOM kill, a kill -9, or a record that crashes
    the process). The pipeline then re-processes that range one record at a time, each under a marker of its own
    (``careful``); a record in flight at a crash and alone in flight at the two crashes after it is dead-lettered
    with reason ``crashed_processing`` instead of being processed a fourth time (``strikes`` counts those crashes).
    Written without fsync: it must survive the process, not the machine. ``ranges`` maps "topic/partition" to [first, last] offsets.

    A marker of at most a page is written over the file's start in one ``pwrite`` (padded with spaces to the file's
    length): a kill leaves the previous marker or the new one whole, as a rename would, in ~5 µs a poll. A rename over
    the file made ext4 start writing the new file back (its ``auto_da_alloc``): 0.1–2 ms a poll, ~1 s of a drain of
    1.2 million events on 2 cores (docs/BENCHMARKS.md, *Ingest vs raw client*). A bigger marker goes through a
    temporary file and a rename. A kill between creating the file and writing it (after a clear) leaves it empty:
    read as unreadable, i.e. as no marker, as the rename's missing file was.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / INFLIGHT_FILE
        self._written = False

    def load(self) -> dict[str, Any] | None:
        """The marker left by a process that did not stop cleanly, or None."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("in-flight marker unreadable; ignoring it", extra={"path": str(self.path), "error": str(exc)})
            return None
        if not isinstance(data, dict) or not isinstance(data.get("ranges"), dict):
            return None
        return data

    def write(self, marker: dict[str, Any]) -> None:
        data = json.dumps(marker).encode("utf-8")
        try:
            if len(data) <= IN_PLACE_BYTES and self._write_in_place(data):
                self._written = True
                return
            tmp = self.path.with_suffix(".tmp")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
            self._written = True
        except OSError:  # the state directory's own problem, reported by StateStore.save
            self._written = False

    def _write_in_place(self, data: bytes) -> bool:
        """``data`` over the file's start in one write of at most a page; False (nothing written) when the file or
        its folder is missing, or the file is longer than a page."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        except FileNotFoundError:
            return False
        try:
            size = os.fstat(fd).st_size
            if size > IN_PLACE_BYTES:
                return False
            padded = data.ljust(size, b" ")  # JSON reads the spaces after the marker as nothing
            return os.pwrite(fd, padded, 0) == len(padded)
        finally:
            os.close(fd)

    def clear(self) -> None:
        if self._written:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self._written = False


def _fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (POSIX: fsync the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_state(data: dict[str, Any]) -> None:
    """Raise ValueError when a parsed state file does not have the shape :meth:`StateStore.save` is given by the pipeline."""
    counters, models = data.get("counters", []), data.get("models", {})
    if not isinstance(counters, list) or not all(
        isinstance(row, dict)
        and isinstance(row.get("name"), str)
        and isinstance(row.get("labels"), list)
        and isinstance(row.get("value"), int | float)
        for row in counters
    ):
        raise ValueError("state 'counters' is not a list of {name, labels, value} objects")
    if not isinstance(models, dict) or not all(
        isinstance(m, dict) and all(isinstance(m.get(k, {}), dict) for k in ("standardizer", "watch"))
        for m in models.values()
    ):
        raise ValueError("state 'models' is not an object of per-model objects")
    positions = data.get("positions", [])
    if not isinstance(positions, list) or not all(
        isinstance(row, list)
        and len(row) == 3
        and isinstance(row[0], str)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in row[1:])
        for row in positions
    ):
        raise ValueError("state 'positions' is not a list of [topic, partition, offset] rows")
    # label values are written sanitised; a file from elsewhere may hold values exposition cannot encode: drop them
    usable = [row for row in counters if _encodable(row["name"], *row["labels"])]
    if len(usable) < len(counters):
        log.warning(
            "state counters with unencodable label values dropped", extra={"dropped": len(counters) - len(usable)}
        )
        data["counters"] = usable


def _encodable(*values: object) -> bool:
    try:
        for v in values:
            str(v).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def restore_model(rt: ModelRuntime, saved: dict[str, Any]) -> None:
    """Re-install a model's saved standardizer (when none is configured) and reference, if they fit the model.

    The saved reference and windows are dropped (and the reference rebuilt from the file or a new warm-up)
    when the model file, the reference file or the scoring settings changed since they were written: their γ
    and flicker are not comparable with what this process computes. A saved warm-up standardizer is kept (it
    describes the traffic, not the model) unless a reference file is configured now.
    """
    assert rt.watch is not None
    n = rt.model.n_features
    current = rt.fingerprint()
    saved_fingerprint = saved.get("fingerprint")
    if "watch" in saved and saved_fingerprint != current:
        changed = (
            ["state written by a version without fingerprints"]
            if not isinstance(saved_fingerprint, dict)
            else [key.removesuffix("_sha256") for key in current if saved_fingerprint.get(key) != current[key]]
        )
        log.warning(
            "saved reference and windows were computed with another model, reference or scoring settings; "
            "rebuilding them",
            extra={"model": rt.name, "changed": changed},
        )
        saved = {k: v for k, v in saved.items() if k != "watch"}
    if rt.standardizer is None and "standardizer" in saved:
        std = Standardizer.from_dict(saved["standardizer"])
        if std.n_features != n:
            raise DataError(f"saved standardizer has {std.n_features} features; model '{rt.name}' expects {n}")
        rt.activate(std)
        log.info("standardizer restored from state", extra={"model": rt.name})
    if "watch" in saved:
        rt.watch.restore(saved["watch"])
        ref = rt.watch.reference
        if ref is not None and ref.n_features != n:
            raise DataError(f"saved reference has {ref.n_features} features; model '{rt.name}' expects {n}")


def model_state(rt: ModelRuntime) -> dict[str, Any]:
    """One model's part of the state file: its standardizer, and its watch with the fingerprint it was built on."""
    entry: dict[str, Any] = {}
    if rt.standardizer is not None:
        entry["standardizer"] = rt.standardizer.to_dict()
    if rt.watch is not None:
        # the baselines go to their own file (save_baselines); the reference as its JSON text, encoded once
        entry["watch"] = rt.watch.dump(segments=False, encoded=True)
        entry["fingerprint"] = rt.fingerprint()
    return entry
