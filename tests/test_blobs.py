"""The file-system blob store: layout, dedup, atomic writes, and refusal of foreign paths."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from lossless.config import Config
from lossless.errors import InputError, StoreError
from lossless.ports import BlobStore
from lossless.stores import blob_store_for
from lossless.stores.blobs import FileBlobStore

pytestmark = pytest.mark.anyio


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def blobs(tmp_path: Path) -> FileBlobStore:
    return FileBlobStore(tmp_path / "files")


async def test_put_then_get_round_trips_exact_bytes(blobs: FileBlobStore, tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000
    uri = await blobs.put(7, data, content_hash=sha(data), suffix="bin")
    assert uri == f"fs:7/{sha(data)}.bin"
    assert await blobs.get(uri) == data
    assert (tmp_path / "files" / "7" / f"{sha(data)}.bin").read_bytes() == data
    assert isinstance(blobs, BlobStore)


async def test_same_bytes_are_stored_once_per_conversation(blobs: FileBlobStore, tmp_path: Path) -> None:
    data = b"same content pasted twice\n" * 100
    first = await blobs.put(1, data, content_hash=sha(data), suffix="txt")
    path = blobs.path_for(first)
    written = path.stat().st_mtime_ns
    again = await blobs.put(1, data, content_hash=sha(data), suffix="txt")
    assert again == first
    assert path.stat().st_mtime_ns == written  # not rewritten
    other = await blobs.put(2, data, content_hash=sha(data), suffix="txt")
    assert other != first  # each conversation owns its folder
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == ["1", "2"]
    assert [p.name for p in (tmp_path / "files" / "1").iterdir()] == [path.name]  # no temp file left


async def test_files_and_folders_are_private(blobs: FileBlobStore) -> None:
    uri = await blobs.put(3, b"secret", content_hash=sha(b"secret"))
    path = blobs.path_for(uri)
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert uri == f"fs:3/{sha(b'secret')}"


@pytest.mark.parametrize(
    "uri",
    [
        "fs:1/../../etc/passwd",
        "fs:../1/" + "a" * 64,
        "/etc/passwd",
        "file:///etc/passwd",
        "fs:1/" + "A" * 64,
        "fs:1/" + "a" * 64 + ".TXT",
        "fs:1/" + "a" * 64 + "/x",
        "fs:01/" + "a" * 64,
        "fs:1/" + "a" * 64 + ".txt\x00.png",
        "fs:1/CON",
    ],
)
async def test_foreign_uris_are_refused(blobs: FileBlobStore, uri: str) -> None:
    with pytest.raises(InputError, match="not a storage URI"):
        await blobs.get(uri)


async def test_bad_put_arguments_are_refused(blobs: FileBlobStore) -> None:
    data = b"x"
    with pytest.raises(InputError, match="SHA-256"):
        await blobs.put(1, data, content_hash="../../etc/passwd")
    with pytest.raises(InputError, match="is not the SHA-256"):
        await blobs.put(1, data, content_hash=sha(b"other"))
    with pytest.raises(InputError, match="suffix"):
        await blobs.put(1, data, content_hash=sha(data), suffix="../x")
    with pytest.raises(InputError, match="conversation_id"):
        await blobs.put(-1, data, content_hash=sha(data))
    with pytest.raises(InputError, match="conversation_id"):
        await blobs.put("1", data, content_hash=sha(data))  # type: ignore[arg-type]


async def test_missing_blob_and_unwritable_root_are_store_errors(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "files")
    with pytest.raises(StoreError, match="missing"):
        await blobs.get("fs:1/" + "a" * 64)
    (tmp_path / "not-a-folder").write_text("x")
    broken = FileBlobStore(tmp_path / "not-a-folder")
    with pytest.raises(StoreError, match="large_files_dir"):
        await broken.put(1, b"x", content_hash=sha(b"x"))


async def test_a_truncated_blob_is_rewritten(blobs: FileBlobStore) -> None:
    data = b"0123456789" * 10
    uri = await blobs.put(1, data, content_hash=sha(data))
    blobs.path_for(uri).write_bytes(data[:5])
    await blobs.put(1, data, content_hash=sha(data))
    assert await blobs.get(uri) == data
    await blobs.close()


def test_default_location_follows_the_settings(tmp_path: Path) -> None:
    # Beside a SQLite database (the default one in the data directory, or one named by URL) ...
    assert repr(blob_store_for(Config(data_dir=tmp_path))) == repr(FileBlobStore(tmp_path / "lcm.db-files"))
    named = Config(database_url=f"sqlite:///{tmp_path}/other/agent.db")
    assert repr(blob_store_for(named)) == repr(FileBlobStore(tmp_path / "other" / "agent.db-files"))
    # ... else in the data directory; large_files_dir always wins.
    assert repr(blob_store_for(Config(data_dir=tmp_path, database_url="postgresql://h/db"))) == repr(
        FileBlobStore(tmp_path / "files")
    )
    chosen = Config(data_dir=tmp_path, large_files_dir=tmp_path / "elsewhere")
    assert repr(blob_store_for(chosen)) == repr(FileBlobStore(tmp_path / "elsewhere"))
