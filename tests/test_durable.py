"""`ablate.base.durable`: atomic writes, reads that treat a partial file as absent, and the disk
errors writer libraries hide in types of their own."""

from __future__ import annotations

import errno

import pytest
from safetensors import SafetensorError

from ablate.base import durable


def test_safetensors_disk_full_is_an_enospc_os_error(tmp_path):
    exc = SafetensorError(
        "Error while serializing: I/O error: No space left on device (os error 28)"
    )
    found = durable.disk_error(exc, tmp_path / "model.safetensors")
    assert isinstance(found, OSError) and found.errno == errno.ENOSPC
    assert found.filename == str(tmp_path / "model.safetensors")
    assert durable.is_disk_error(found)


def test_a_torch_short_write_is_a_disk_error_and_other_errors_are_not(tmp_path):
    short = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 662")
    found = durable.disk_error(short, tmp_path / "trainer.pt")
    assert found is not None and found.errno == errno.EIO  # this disk has room: not ENOSPC
    assert durable.disk_error(RuntimeError("shape mismatch"), tmp_path) is None
    assert durable.disk_error(SafetensorError("invalid header (os error 2)"), tmp_path) is None
    assert durable.disk_error(ValueError("No space left on device"), tmp_path) is None
    read_only = OSError(errno.EROFS, "Read-only file system")
    assert durable.disk_error(read_only, tmp_path) is read_only


def test_write_atomic_replaces_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "sub" / "state.json"
    durable.write_atomic(target, "old")
    durable.write_atomic(target, b"new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def test_read_valid_treats_empty_and_unparsable_files_as_absent(tmp_path):
    import json

    good, empty, partial = tmp_path / "good.json", tmp_path / "empty.json", tmp_path / "part.json"
    good.write_text('{"a": 1}')
    empty.write_text("")
    partial.write_text('{"a": ')
    parse = lambda p: json.loads(p.read_text())  # noqa: E731
    assert durable.read_valid(good, parse, "x") == {"a": 1}
    assert durable.read_valid(tmp_path / "missing.json", parse, "x") is None
    for bad in (empty, partial):
        with pytest.warns(durable.UnreadableFileWarning, match=f"{bad} is empty or partial"):
            assert durable.read_valid(bad, parse, "the cache") is None
