"""A file system that fills up, or turns read-only, in the middle of a run: every file opened for writing under one
folder draws on one byte allowance, and the write that goes past it writes what fits and then fails with ENOSPC
(or EROFS), naming the file, as the kernel's write(2) does. Files opened by Python (`open`, `io.open`, `os.fdopen`,
pathlib) are covered. More lenient than a real full disk: native writers (pyarrow, safetensors) and metadata (new
folders, renames) never fail, and reads go on; a stage that writes only natively is not exercised by it.

    with FillingDisk(tmp_path / "out", allowance=4096):          # in-process
        run_the_stage()

    python tests/doubles/filling_disk.py FOLDER BYTES ENOSPC -- report --iter 0 --output FOLDER/report
                                                                 # `burnqed ARGS` in a process whose disk fills
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

WRITE_MODES = set("wax+")


class _Limited:
    """A file object whose writes draw on the disk's allowance; everything else is the file's own."""

    def __init__(self, handle: Any, disk: FillingDisk, name: str) -> None:
        self._handle = handle
        self._disk = disk
        self._name = name

    def write(self, data: Any) -> int:
        size = len(data.encode() if isinstance(data, str) else data)
        fits = self._disk.take(size)
        if fits < size:
            if fits:
                self._handle.write(data[:fits])
            raise OSError(self._disk.code, os.strerror(self._disk.code), self._name)
        return int(self._handle.write(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __enter__(self) -> _Limited:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._handle.close()

    def __iter__(self) -> Any:
        return iter(self._handle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


class FillingDisk:
    """Installs itself over `open`, `io.open` and `os.fdopen` while active (see the module docstring)."""

    def __init__(self, folder: Path, allowance: int, code: int = errno.ENOSPC) -> None:
        self.folder = str(Path(folder).resolve())
        self.left = allowance
        self.code = code
        self.refused: list[str] = []  # the files whose write failed
        self._saved: tuple[Any, Any, Any] | None = None

    def take(self, size: int) -> int:
        """How many of `size` bytes fit (all of them, or what is left); the allowance shrinks by that."""
        fits = max(0, min(size, self.left))
        self.left -= fits
        return fits

    def _path_of(self, file: Any) -> str | None:
        if isinstance(file, int):
            try:
                return os.readlink(f"/proc/self/fd/{file}")
            except OSError:
                return None
        if isinstance(file, str | bytes | os.PathLike):
            return os.path.abspath(os.fsdecode(file))
        return None

    def _wrap(self, real: Any) -> Any:
        """`real` (open, io.open or os.fdopen: a file or descriptor, then the mode), its writes under the folder
        limited."""
        def opener(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            handle = real(file, mode, *args, **kwargs)
            path = self._path_of(file)
            if WRITE_MODES & set(mode) and path is not None and (path + "/").startswith(self.folder + "/"):
                return _Limited(handle, self, path)
            return handle

        return opener

    def __enter__(self) -> FillingDisk:
        self._saved = (builtins.open, io.open, os.fdopen)
        builtins.open = self._wrap(builtins.open)
        io.open = self._wrap(io.open)
        os.fdopen = self._wrap(os.fdopen)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._saved is not None
        builtins.open, io.open, os.fdopen = self._saved


def main(argv: list[str]) -> None:
    """`FOLDER BYTES ERRNO_NAME -- ARGS…`: run `burnqed ARGS` with the disk under FOLDER filling after BYTES."""
    folder, allowance, code, separator, *args = argv
    assert separator == "--"
    from burnqed import cli

    sys.argv = ["burnqed", *args]
    with FillingDisk(Path(folder), int(allowance), getattr(errno, code)):
        cli.main()


if __name__ == "__main__":
    main(sys.argv[1:])
