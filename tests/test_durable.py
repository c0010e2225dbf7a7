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


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EDQUOT, "over the disk quota"),
        (errno.EFBIG, "over the file-size limit (ulimit -f)"),
        (errno.EROFS, "read-only"),
    ],
)
def test_every_disk_error_is_one_and_says_what_it_asks(code, words, tmp_path):
    said = f"Error while serializing: I/O error: {errno.errorcode[code]} (os error {code})"
    found = durable.disk_error(SafetensorError(said), tmp_path / "model.safetensors")
    assert found is not None and found.errno == code and durable.is_disk_error(found)
    assert words in durable.disk_hint(found)
    assert durable.disk_hint(ValueError("x")) == ""


def test_a_torch_short_write_under_a_file_size_limit_is_efbig(tmp_path, monkeypatch):
    import resource

    short = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 662")
    monkeypatch.setattr(durable.resource, "getrlimit", lambda which: (1 << 20, 1 << 20))
    found = durable.disk_error(short, tmp_path / "trainer.pt")
    assert found is not None and found.errno == errno.EFBIG
    assert resource.RLIMIT_FSIZE  # the limit read is the file-size one (ulimit -f)


def test_a_real_file_size_limit_is_a_disk_error_in_a_subprocess(tmp_path):
    """`ulimit -f`: Python ignores SIGXFSZ, so the write fails with EFBIG, a disk error."""
    import subprocess
    import sys

    code = (
        "import resource, sys\n"
        "from ablate.base import durable\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        f"    durable.write_atomic({str(tmp_path / 'big.bin')!r}, b'x' * 10000)\n"
        "except OSError as exc:\n"
        "    print(exc.errno, durable.is_disk_error(exc), durable.disk_hint(exc))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith(f"{errno.EFBIG} True over the file-size limit (ulimit -f)"), (
        done.stdout + done.stderr
    )
    assert not list(tmp_path.iterdir())  # the temporary file is gone, no half target


def test_read_json_names_a_damaged_file_and_what_to_do(tmp_path):
    from ablate.base.errors import StoreError

    good, bad, empty = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "empty.json"
    good.write_text('{"a": 1}')
    bad.write_text('{"a": ')
    empty.write_text("")
    assert durable.read_json(good, "fix") == {"a": 1}
    assert durable.read_json(tmp_path / "none.json", "fix", missing={}) == {}
    damaged = rf"^{bad} is damaged \(JSONDecodeError: .*\): restore it$"
    with pytest.raises(StoreError, match=damaged):
        durable.read_json(bad, "restore it")
    with pytest.raises(StoreError, match=rf"^{empty} is damaged \(empty\): x$"):
        durable.read_json(empty, "x")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(StoreError, match="is damaged \\(not text"):
        durable.read_json(tmp_path / "binary.json", "x")
