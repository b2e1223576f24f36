"""The embedded Lean's cache on disk (`minilean.cache`), in process: where it lives, what its key covers, that an
entry that does not check is built again, and which entries the folder keeps."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import pytest

from minilean import cache
from minilean.cache import cache_folder, cached, input_key, read_entry, write_entry


def key() -> str:  # one entry's key, as `cached` calls it
    return "k"


class Counter:
    """A build that counts its calls; its value is a list, pickled."""

    def __init__(self, value: list[int]) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> list[int]:
        self.calls += 1
        return list(self.value)


def _dump(value: list[int]) -> bytes:
    return pickle.dumps(value)


def _load(payload: bytes) -> list[int] | None:
    value = pickle.loads(payload)
    return value if isinstance(value, list) else None


def test_the_cache_folder_is_under_the_user_cache() -> None:
    assert cache_folder({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/burnqed/minilean")
    assert cache_folder({"HOME": "/h"}) == Path("/h/.cache/burnqed/minilean")
    assert cache_folder({"XDG_CACHE_HOME": "", "HOME": ""}) is None


def test_a_second_call_reads_the_entry(tmp_path: Path) -> None:
    build = Counter([1, 2])
    assert cached(tmp_path / "c", key, build, _dump, _load) == [1, 2]
    assert cached(tmp_path / "c", key, build, _dump, _load) == [1, 2]
    assert build.calls == 1
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["k.pickle"]
    assert oct((tmp_path / "c").stat().st_mode & 0o777) == oct(0o700 & ~_umask())
    assert cached(None, key, build, _dump, _load) == [1, 2] and build.calls == 2  # no folder: no cache


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_key_covers_the_parts_and_every_file_but_bytecode(tmp_path: Path) -> None:
    package = tmp_path / "package"
    (package / "__pycache__").mkdir(parents=True)
    (package / "world.py").write_text("A = 1\n")
    key = input_key([b"a"], [package])
    (package / "__pycache__" / "world.cpython-311.pyc").write_bytes(b"\0")
    (package / "__pycache__" / "world.cpython-311.pyc.140234").write_bytes(b"\0")  # importlib's while it writes
    (package / "world.pyc").write_bytes(b"\0")
    assert input_key([b"a"], [package]) == key
    (package / "world.py").write_text("A = 2\n")
    changed = input_key([b"a"], [package])
    (package / "data.json").write_text("{}")
    added = input_key([b"a"], [package])
    (package / "data.json").rename(package / "other.json")
    renamed = input_key([b"a"], [package])
    assert len({key, changed, added, renamed, input_key([b"b"], [package]), input_key([b"a", b""], [package]),
                input_key([b"a"], [])}) == 7


@pytest.mark.parametrize("damage", ["flip", "truncate", "refused", "does not unpickle", "writable by others",
                                    "folder writable by others"])
def test_an_entry_that_does_not_check_is_built_again(damage: str, tmp_path: Path) -> None:
    build = Counter([1, 2])
    cached(tmp_path / "c", key, build, _dump, _load)
    entry = tmp_path / "c" / "k.pickle"
    data = entry.read_bytes()
    payload = {"refused": pickle.dumps("not a list"), "does not unpickle": b"\x80\x05junk"}.get(damage)
    if damage == "flip":
        entry.write_bytes(data[:-3] + bytes([data[-3] ^ 1]) + data[-2:])
    elif damage == "truncate":
        entry.write_bytes(data[:-1])
    elif payload is not None:
        entry.write_bytes(cache.MAGIC + hashlib.sha256(payload).digest() + payload)
    elif damage == "writable by others":
        os.chmod(entry, 0o666)
    else:
        os.chmod(entry.parent, 0o777)
    before = read_entry(entry)
    assert before is None or damage in ("refused", "does not unpickle")
    assert cached(tmp_path / "c", key, build, _dump, _load) == [1, 2]
    assert build.calls == 2
    os.chmod(entry.parent, 0o700)
    assert read_entry(entry) == _dump([1, 2])  # written again


def test_an_input_that_cannot_be_read_means_no_cache(tmp_path: Path) -> None:
    (tmp_path / "package.zip").write_bytes(b"PK")
    with pytest.raises(NotADirectoryError):
        input_key([], [tmp_path / "package.zip"])
    build = Counter([4])
    for _ in range(2):
        assert cached(tmp_path / "c", lambda: input_key([], [tmp_path / "package.zip"]), build, _dump, _load) == [4]
    assert build.calls == 2 and not (tmp_path / "c").exists()


def test_a_build_that_raises_writes_nothing(tmp_path: Path) -> None:
    def broken() -> list[int]:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        cached(tmp_path / "c", key, broken, _dump, _load)
    assert not (tmp_path / "c").exists()


def test_an_unwritable_folder_costs_only_the_write(tmp_path: Path) -> None:
    (tmp_path / "c").write_text("a file where the folder would be")
    build = Counter([3])
    assert cached(tmp_path / "c", key, build, _dump, _load) == [3]
    assert cached(tmp_path / "c", key, build, _dump, _load) == [3] and build.calls == 2


def test_the_folder_keeps_the_most_recently_used_entries(tmp_path: Path) -> None:
    for number in range(cache.MAX_ENTRIES + 2):
        write_entry(tmp_path / f"{number:02d}.pickle", b"x")
        os.utime(tmp_path / f"{number:02d}.pickle", ns=(number * 10**9, number * 10**9))
    write_entry(tmp_path / "new.pickle", b"x")
    kept = sorted(p.name for p in tmp_path.glob("*.pickle"))
    assert kept == [f"{n:02d}.pickle" for n in range(3, cache.MAX_ENTRIES + 2)] + ["new.pickle"]


def test_a_read_marks_its_entry_used(tmp_path: Path) -> None:
    build = Counter([1])
    cached(tmp_path, key, build, _dump, _load)
    os.utime(tmp_path / "k.pickle", ns=(0, 0))
    cached(tmp_path, key, build, _dump, _load)
    assert build.calls == 1 and (tmp_path / "k.pickle").stat().st_mtime_ns > 0  # the last one pruning deletes
