"""Replacing a file so that a crash at any moment leaves either the old or the new contents.

The new bytes go to a temporary file in the same folder (so the rename stays on one file
system), are flushed to disk with ``fsync``, and ``os.replace`` swaps them in: one atomic rename.
A crash before the rename leaves the original untouched (and at worst a stray
``.<name>.*.amp-lint-tmp`` file); a crash after it leaves the complete new file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile

#: Suffix of the temporary files, so a stray one left by a killed run is recognisable.
TEMP_SUFFIX = ".amp-lint-tmp"


class WriteError(Exception):
    """The file was not written; the message says why, in one line, without the path."""


def write_atomically(
    path: str, data: bytes, *, expected: bytes | None = None, durable: bool = True
) -> None:
    """Replace ``path`` with ``data``, keeping its permission bits.

    With ``expected``, the file must still hold exactly those bytes (what was read and fixed):
    a file edited meanwhile — by the user's editor, by another tool — is not overwritten.
    ``durable=False`` skips the ``fsync`` calls: the rename is still atomic for other readers,
    but a power cut may lose (or, on some file systems, empty) the file — fine for a cache whose
    reader checks every entry, far too costly to pay per entry (thousands per run).
    """
    folder = os.path.dirname(path) or os.curdir
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode) if os.path.exists(path) else None
        if expected is not None:
            with open(path, "rb") as stream:
                if stream.read() != expected:
                    raise WriteError("the file changed on disk since it was read; not written")
        # Permission bits, not only os.access: root may write anything, but a file (or folder)
        # its owner marked read-only is not one a linter should change behind their back.
        if mode is not None and not mode & stat.S_IWUSR:
            raise WriteError("the file is read-only; not written")
        if not stat.S_IMODE(os.stat(folder).st_mode) & stat.S_IWUSR:
            raise WriteError("its folder is read-only; not written")
        handle, temporary = tempfile.mkstemp(
            dir=folder, prefix=f".{os.path.basename(path)}.", suffix=TEMP_SUFFIX
        )
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            if durable:
                os.fsync(stream.fileno())
        os.chmod(temporary, mode if mode is not None else _new_file_mode())
        os.replace(temporary, path)
    except BaseException as error:
        # Whatever stopped us (a full disk, Ctrl-C), the original is still in place.
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise WriteError(f"cannot write: {error.strerror or error}") from None
        raise
    if durable:
        _sync_folder(folder)


def _new_file_mode() -> int:
    """What ``open()`` would give a new file: 0o666 less the umask (mkstemp gives 0o600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _sync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
