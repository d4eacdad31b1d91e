"""The file-system :class:`~lossless.ports.BlobStore`: large-file bytes under ``large_files_dir``.

Layout: ``<root>/<conversation id>/<sha256 hex>[.<ext>]``, and the storage URI
is the same path relative to the root, ``fs:<conversation id>/<sha256>[.<ext>]``,
so the folder can move with the data directory.

Invariants:

* **No user text in a path.**  A path is built from an integer, 64 hex digits
  and an extension the caller picks from a fixed set (checked against
  ``[a-z0-9]{1,8}``); a file name such as ``../../etc/passwd``, ``CON`` or one
  holding NUL never reaches the file system.  :meth:`get` accepts only URIs of
  exactly that shape, so a tampered database row cannot make it read
  elsewhere.
* **Write-once and deduplicated.**  A blob that already exists with the right
  size is not written again: the same bytes pasted twice in a conversation are
  stored once (two file ids may share the blob).  Different bytes have a
  different name, so nothing is ever overwritten with other content.
* **Atomic and durable.**  Bytes go to a temporary file in the same folder,
  which is flushed, ``fsync``-ed and renamed into place, then the folder is
  ``fsync``-ed: a reader sees the whole blob or none, and a returned ``put``
  survives a crash.  A crash mid-write leaves a ``.tmp-*`` file, never a
  partial blob.
* **Removed only with their conversation.**  :meth:`FileBlobStore.remove_conversation` deletes a
  conversation's folder, and only an explicit ``lcm prune`` of that conversation calls it.
* **Private.**  Folders are created ``0700`` and blobs ``0600``.
* All file-system work runs in a worker thread; the event loop never waits
  on the disk.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import tempfile
from pathlib import Path

import anyio.to_thread

from lossless.errors import InputError, StoreError

__all__ = ["FileBlobStore", "check_put"]

_HASH = re.compile(r"[0-9a-f]{64}")
_SUFFIX = re.compile(r"[a-z0-9]{1,8}")
_URI = re.compile(r"fs:(0|[1-9][0-9]{0,18})/([0-9a-f]{64})(?:\.([a-z0-9]{1,8}))?")


class FileBlobStore:
    """Blobs as files under ``root``, one folder per conversation (see the module docstring)."""

    scheme = "fs"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"FileBlobStore({str(self.root)!r})"

    def path_for(self, storage_uri: str) -> Path:
        """The file behind ``storage_uri`` (which must be one this store made)."""
        uri: object = storage_uri  # rows come from outside: check the type too
        match = _URI.fullmatch(uri) if isinstance(uri, str) else None
        if match is None:
            raise InputError(
                f"{storage_uri!r:.120} is not a storage URI of the file blob store "
                "(expected fs:<conversation id>/<sha256>.<ext>); the large_files row may have been edited"
            )
        conversation, digest, suffix = match.groups()
        return self.root / conversation / (digest + (f".{suffix}" if suffix else ""))

    async def put(self, conversation_id: int, data: bytes, *, content_hash: str, suffix: str = "") -> str:
        check_put(conversation_id, content_hash, suffix)
        uri = f"fs:{conversation_id}/{content_hash}" + (f".{suffix}" if suffix else "")
        path = self.path_for(uri)
        await anyio.to_thread.run_sync(_write_once, path, bytes(data), content_hash)
        return uri

    async def get(self, storage_uri: str) -> bytes:
        path = self.path_for(storage_uri)
        try:
            return await anyio.to_thread.run_sync(path.read_bytes)
        except FileNotFoundError as exc:
            raise StoreError(
                f"the bytes of {storage_uri!r} are missing from {str(self.root)!r}: "
                "check the large_files_dir setting (LCM_LARGE_FILES_DIR) or restore the folder from a backup"
            ) from exc
        except OSError as exc:
            raise StoreError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc

    async def close(self) -> None:
        return None

    async def remove_conversation(self, conversation_id: int) -> int:
        """Delete the folder of a deleted conversation's blobs (``lcm prune``); returns the bytes freed."""
        value: object = conversation_id  # callers may pass anything: check the type too
        if type(value) is not int or conversation_id < 0:
            raise InputError(f"conversation_id must be a non-negative integer, got {conversation_id!r}")
        return await anyio.to_thread.run_sync(_remove_folder, self.root / str(conversation_id))


def check_put(conversation_id: object, content_hash: object, suffix: object) -> None:
    if isinstance(conversation_id, bool) or not isinstance(conversation_id, int) or conversation_id < 0:
        raise InputError(f"conversation_id must be a non-negative integer, got {conversation_id!r}")
    if not isinstance(content_hash, str) or not _HASH.fullmatch(content_hash):
        raise InputError(f"content_hash must be 64 lower-case hex digits (SHA-256), got {content_hash!r:.80}")
    if not isinstance(suffix, str) or (suffix and not _SUFFIX.fullmatch(suffix)):
        raise InputError(f"blob suffix must be 1-8 lower-case letters or digits, got {suffix!r:.40}")


def _write_once(path: Path, data: bytes, content_hash: str) -> None:
    if hashlib.sha256(data).hexdigest() != content_hash:
        raise InputError("content_hash is not the SHA-256 of the data: refusing to store it under that name")
    try:
        if path.stat().st_size == len(data):
            return  # already stored (dedup); write-once
    except OSError:
        pass  # missing (or unreadable: writing it will say why)
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    except OSError as exc:
        raise StoreError(
            f"cannot write large files under {str(folder)!r}: {exc.strerror or exc} "
            "(set large_files_dir / LCM_LARGE_FILES_DIR to a writable folder)"
        ) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            full = " (the disk is full: free some space and try again)" if exc.errno == errno.ENOSPC else ""
            raise StoreError(f"cannot write {str(path)!r}: {exc.strerror or exc}{full}") from exc
        raise
    _fsync_folder(folder)


def _remove_folder(folder: Path) -> int:
    freed = 0
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise StoreError(f"cannot list {str(folder)!r}: {exc.strerror or exc}") from exc
    for entry in entries:
        if entry.is_file() and not entry.is_symlink():
            freed += entry.stat().st_size
            entry.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
    return freed


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable (POSIX); a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
