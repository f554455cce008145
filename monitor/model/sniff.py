"""Stage 3 (model): what a file handed in as a model holds, told from its first bytes.

Loading a CSV file or a joblib pickle as ONNX fails inside protobuf ("Wire format was corrupt"), and loading an ONNX
file with joblib fails inside pickle; neither says what the file is. :func:`sniff` names the kind of a file from its
leading bytes (and, for a file that starts like ONNX, from a parse), so the loaders' refusals can say what arrived
and how to get what they expect (:func:`not_onnx`, :func:`not_joblib`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

FileKind = Literal[
    "empty", "onnx", "onnx-damaged", "pickle", "compressed", "csv", "json", "text", "npy", "zip", "hdf5", "binary"
]

#: bytes read to tell a file's kind
_HEAD_BYTES = 4096

#: leading bytes of the compressions joblib writes (``joblib.dump(..., compress=...)``)
_COMPRESSED = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x5d\x00\x00", "lzma"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"ZF0x", "zlib"),
    (b"\x78\x01", "zlib"),
    (b"\x78\x5e", "zlib"),
    (b"\x78\x9c", "zlib"),
    (b"\x78\xda", "zlib"),
)


@dataclass(frozen=True, slots=True)
class FileGuess:
    """What a file seems to hold: ``kind`` and the same in words (``what``), e.g. ``CSV text (first line 'a,b')``."""

    kind: FileKind
    what: str


def sniff(path: Path) -> FileGuess:
    """The kind of the file at ``path``, told from its first bytes; an ONNX file is recognised by a parse.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d) / "rows.csv"
    ...     _ = p.write_text("age,income\\n31,2.5\\n")
    ...     sniff(p).kind
    'csv'
    """
    with path.open("rb") as f:
        head = f.read(_HEAD_BYTES)
    if not head:
        return FileGuess("empty", "an empty file (0 bytes)")
    if head.startswith(b"\x08"):  # ModelProto field 1 (ir_version), which every exporter writes first
        return _onnx_guess(path)
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return FileGuess("pickle", f"a Python pickle (protocol {head[1]}; what joblib.dump and pickle.dump write)")
    for magic, name in _COMPRESSED:
        if head.startswith(magic):
            return FileGuess("compressed", f"{name}-compressed data (joblib.dump(..., compress=...) writes this)")
    if head.startswith(b"\x93NUMPY"):
        return FileGuess("npy", "a NumPy array (.npy)")
    if head.startswith(b"PK\x03\x04"):
        return FileGuess("zip", "a zip archive (a PyTorch .pt checkpoint or a Keras .keras file?)")
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return FileGuess("hdf5", "an HDF5 file (a Keras .h5 model?)")
    return _text_guess(head)


def _onnx_guess(path: Path) -> FileGuess:
    import onnx

    try:
        proto = onnx.load_from_string(path.read_bytes())
    except Exception as exc:  # noqa: BLE001 - any parse failure: damaged
        return FileGuess("onnx-damaged", f"a file that starts like ONNX but does not parse (truncated? {exc})")
    if proto.graph.input or proto.graph.output:
        return FileGuess("onnx", f"an ONNX model (opset {_opset(proto)}, ir_version {proto.ir_version})")
    return FileGuess("binary", "binary data that is neither ONNX nor a pickle")


def _opset(proto: object) -> str:
    versions = [str(o.version) for o in getattr(proto, "opset_import", []) if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else "?"


def _text_guess(head: bytes) -> FileGuess:
    binary = FileGuess("binary", "binary data that is neither ONNX nor a pickle")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a multi-byte character cut at the end of the head
            return binary
        text = head[: exc.start].decode("utf-8")
    if "\x00" in text:
        return binary
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            json.loads(text)
            return FileGuess("json", "a JSON document")
        except ValueError:
            if len(head) < _HEAD_BYTES:
                return FileGuess("text", f"text (first line {_first_line(text)!r})")
            return FileGuess("json", "a JSON document")
    first = _first_line(text)
    if any(sep in first for sep in (",", ";", "\t")):
        return FileGuess("csv", f"CSV text (first line {first!r})")
    return FileGuess("text", f"text (first line {first!r})")


def _first_line(text: str, width: int = 60) -> str:
    line = text.lstrip().split("\n", 1)[0].rstrip("\r")
    return line if len(line) <= width else line[: width - 1] + "…"


def not_onnx(path: Path, guess: FileGuess) -> str:
    """The refusal for a model file that is not ONNX: what was expected, what arrived, the fix."""
    stem = path.with_suffix(".onnx").name
    if guess.kind in ("pickle", "compressed"):
        fix = (
            f"a scikit-learn model saved with joblib converts to ONNX with `harmonic-monitor convert --sklearn "
            f"{path} --out {stem}`; then pass --model {stem}"
        )
    elif guess.kind in ("csv", "npy", "json", "text"):
        fix = "that is data, not a model: pass the model's .onnx file as --model"
    elif guess.kind in ("zip", "hdf5"):
        fix = "export the model to ONNX (torch.onnx.export; tf2onnx for Keras) and pass the .onnx file"
    elif guess.kind in ("onnx-damaged", "empty"):
        fix = "copy or export the model again"
    else:
        fix = (
            "export the model to ONNX (`harmonic-monitor convert` for scikit-learn, torch.onnx.export, tf2onnx) "
            "and pass the .onnx file"
        )
    return f"model '{path}' is not an ONNX model: expected an ONNX file (.onnx), got {guess.what}; {fix}"


def not_joblib(path: Path, guess: FileGuess) -> str | None:
    """The refusal for a ``convert --sklearn`` file that is plainly no joblib file (None: it may be one)."""
    if guess.kind in ("pickle", "compressed", "binary"):
        return None
    expected = "expected a scikit-learn model saved with joblib.dump(model, path)"
    if guess.kind == "onnx":
        fix = f"it needs no conversion: pass it to the other commands as it is (--model {path})"
    elif guess.kind == "onnx-damaged":
        fix = "it looks like a damaged ONNX file: export it again; convert takes the joblib file of the model"
    elif guess.kind in ("csv", "npy", "json", "text", "empty"):
        fix = "rows are not a model: pass the file that joblib.dump wrote for the fitted estimator"
    else:
        fix = "export this model to ONNX with its own framework's exporter (torch.onnx.export, tf2onnx)"
    return f"'{path}' is not a joblib file: {expected}, got {guess.what}; {fix}"
