"""Reading what is linted: a file's bytes, a Python module's text, or a notebook's joined cells.

A `PythonSource` remembers how its text was encoded (a BOM, a PEP 263 coding cookie) so a fixed
file is written back the same way; line endings are never translated, so CRLF stays CRLF.
"""

from __future__ import annotations

import io
import os
import stat
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from linter._diagnostic import Diagnostic
from linter._fix import Edit, Fix, apply_edits
from linter._notebook import NOTEBOOK_SUFFIX, Notebook, NotebookError

#: Files larger than this are reported, not read: no hand-written module is this big.
MAX_FILE_BYTES = 10 * 2**20


class SourceError(Exception):
    """A file that cannot be linted; the message is the one-line reason."""


def read_source(path: str) -> bytes:
    """The file's bytes; `SourceError` for anything that is not a readable, sane-sized file."""
    try:
        # A named pipe or a device would block or never end: only regular files are read.
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise SourceError("is a folder, not a file")
        if not stat.S_ISREG(mode):
            raise SourceError("not a regular file")
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise SourceError(
                    f"file is too large ({size / 2**20:.0f} MiB; the limit is "
                    f"{MAX_FILE_BYTES // 2**20} MiB)"
                )
            return stream.read()
    except OSError as error:
        raise SourceError(f"cannot read: {error.strerror or error}") from None


def detect_encoding(data: bytes) -> str:
    """The encoding Python would read ``data`` with: a BOM, a coding cookie, or UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        # tokenize says "invalid or missing encoding declaration" for plain bad UTF-8 in the
        # first two lines too; decoding names the offending byte.
        if "missing" not in error.msg:
            raise SourceError(f"bad encoding declaration: {error.msg}") from None
        encoding = "utf-8"
    return encoding


def decode_source(data: bytes) -> str:
    """Text of a Python source file, honouring a BOM and a PEP 263 coding cookie."""
    return _decode(data, detect_encoding(data))


def _decode(data: bytes, encoding: str) -> str:
    if b"\0" in data:
        offset = data.index(b"\0")
        raise SourceError(f"source contains a NUL byte at byte offset {offset}")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        raise SourceError(
            f"cannot decode as {encoding}: {error.reason} at byte offset {error.start}"
        ) from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r}") from None


@dataclass(frozen=True, slots=True)
class PythonSource:
    """A Python module's text and how to write it back."""

    #: The decoded text (a BOM removed, line endings as in the file).
    text: str
    #: The codec that decoded it (``utf-8-sig`` when there was a BOM).
    encoding: str
    #: The bytes it was read from.
    data: bytes

    @classmethod
    def from_bytes(cls, data: bytes) -> PythonSource:
        encoding = detect_encoding(data)
        return cls(_decode(data, encoding), encoding, data)

    def present(self, diagnostic: Diagnostic) -> Diagnostic:
        """Positions in a module are already the file's."""
        return diagnostic

    def fix_fits(self, fix: Fix) -> bool:
        return True

    def apply(self, edits: Sequence[Edit]) -> PythonSource:
        text = apply_edits(self.text, edits)
        return PythonSource(text, self.encoding, self.data)

    def encode(self) -> bytes:
        """The text in the file's own encoding (the BOM and coding cookie kept)."""
        return self.text.encode(self.encoding)

    def file_text(self, data: bytes) -> str:
        """What bytes of this file read as, for a diff."""
        return data.decode(self.encoding)


#: What a lint run reads from one path.
Document = PythonSource | Notebook


def load_document(path: str, data: bytes) -> Document:
    """A notebook for ``*.ipynb``, else a Python module; `SourceError` when it is neither."""
    if path.endswith(NOTEBOOK_SUFFIX):
        try:
            return Notebook.from_bytes(data)
        except NotebookError as error:
            raise SourceError(str(error)) from None
    return PythonSource.from_bytes(data)
