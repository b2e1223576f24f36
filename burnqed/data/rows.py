"""Rows of a data source: local JSON / JSONL / Parquet / `.lean` files or folders of them, remote URIs (s3://, via the
artifact store's download cache), or a Hugging Face hub dataset name.

    for row in read_rows("data/lean_workbook.json", split=None, limit=1000, store=store):
        row.data      # dict, or None when the row is malformed
        row.error     # why it is malformed ("invalid JSON: ...", "not a JSON object")

Local files are read here, not through `datasets`: a malformed line is one counted row, rows stream (`limit` stops
early), and the core image does not carry `datasets`. Formats, folders and the split a path names (`path_split`):
docs/data.md, "Source kinds".
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burnqed import storage
from burnqed.errors import InputError

FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".lean")
SPLIT_WORDS = {"test": "test", "valid": "valid", "validation": "valid", "train": "train"}
PARQUET_BATCH_ROWS = 1024


@dataclass(frozen=True, slots=True)
class Row:
    """One row of a source: its data, or why it could not be read. `where` names the file and line."""

    where: str
    data: dict[str, Any] | None = None
    error: str | None = None
    path_split: str | None = None  # the split the file's path names (`path_split`), if any
    file: str | None = None  # the local file, as the source's path names it (None: a hub dataset)
    line: int | None = None  # its line in `file` (a `.lean` declaration's, a JSON line's); None: a Parquet or JSON row
    imports: tuple[str, ...] | None = None  # a `.lean` file's imported modules (`leanfile.lean_file_imports`)


def read_rows(path: str, split: str | None = None, limit: int | None = None, *, store: storage.Store) -> Iterator[Row]:
    """Rows of the source at `path` (file, folder, URI or hub name), at most `limit` of them."""
    for count, row in enumerate(_rows(path, split, store)):
        if limit is not None and count >= limit:
            return
        yield row


def is_hub_name(path: str) -> bool:
    """True when `path` is read from the Hugging Face hub: a hub name's shape (`storage.hub_shaped`), and nothing
    local by that name."""
    return storage.hub_shaped(path) and not Path(path).expanduser().exists()


def local_path(path: str, *, store: storage.Store) -> Path:
    """The local file or folder of `path` (a remote URI is downloaded first); `InputError` when it is neither
    local nor remote."""
    local = _local(path, store)
    if local is None:
        raise InputError(f"data source {path} does not exist locally")
    return local


def _rows(path: str, split: str | None, store: storage.Store) -> Iterator[Row]:
    local = _local(path, store)
    if local is None:
        yield from _hub_rows(path, split)
        return
    for file in _files_of(local, split, path):
        named = path_split(local, file)
        inner = file.name if file == local else file.relative_to(local).as_posix()
        shown = path if file == local else f"{path.rstrip('/')}/{file.relative_to(local).as_posix()}"
        for row in read_file_rows(file, shown=shown, name=inner):
            yield dataclasses.replace(row, path_split=named) if named else row


def _local(path: str, store: storage.Store) -> Path | None:
    """A local path for `path` (remote URIs are downloaded into the cache); None for a hub dataset name."""
    if storage.is_remote(path):
        return store.local_input(path)
    if is_hub_name(path):
        return None
    candidate = Path(path.removeprefix("file://")).expanduser()
    if candidate.exists():
        return candidate
    raise InputError(f"data source {path} does not exist (give a JSON/JSONL/Parquet file or a folder of them)")


def _files_of(local: Path, split: str | None, shown: str) -> list[Path]:
    if local.is_file():
        if local.suffix not in FILE_SUFFIXES:
            raise InputError(f"data source {shown}: unsupported file type {local.suffix!r} "
                             f"(expected {', '.join(FILE_SUFFIXES)})")
        return [local]
    files = sorted(
        file for file in local.rglob("*")
        if file.is_file() and file.suffix in FILE_SUFFIXES
        and not any(part.startswith((".", "_")) for part in file.relative_to(local).parts)
    )
    if any(file.suffix == ".lean" for file in files):
        files = [file for file in files if file.suffix == ".lean"]  # a Lean project: its sources, not its configs
    if split is not None:
        wanted = SPLIT_WORDS.get(split.strip().lower(), split.strip().lower())
        chosen = [f for f in files if f.name.startswith(split) or split in f.relative_to(local).parts[:-1]
                  or path_split(local, f) == wanted]
        files = chosen or files
    if not files:
        raise InputError(f"data source {shown} is a folder with no {', '.join(FILE_SUFFIXES)} files")
    return files


def path_split(root: Path, file: Path) -> str | None:
    """The split a data file's path names: the deepest of the file's stem and the folders between `root` and it
    whose name, first word or last word (words split at `_`, `-`, `.`, spaces) is test, valid, validation or
    train; `root` itself counts only when its whole name is one (`MiniF2F/Valid`). None when none does."""
    parts = [file.stem] if file == root else [file.stem, *reversed(file.relative_to(root).parts[:-1])]
    for part in parts:
        words = [word for word in re.split(r"[_\-.\s]+", part.lower()) if word]
        for word in (part.lower(), *(words[:1] + words[-1:])):
            if word in SPLIT_WORDS:
                return SPLIT_WORDS[word]
    if root.is_dir():
        return SPLIT_WORDS.get(root.name.lower())
    return None


def read_file_rows(file: Path, *, shown: str | None = None, name: str | None = None) -> Iterator[Row]:
    """The rows of one local file (by suffix), each naming the file as `shown` (default: its path), a `.lean`
    declaration's row `SHOWN:LINE`; `name` is the file's name within its source (default: its own name), after
    which a `.lean` file's examples are named (`leanfile.example_name`). An unreadable file is an `InputError`; a
    bad line is a Row."""
    shown = shown or str(file)
    for row in _file_rows(file, shown, name or file.name):
        yield dataclasses.replace(row, file=shown)


def _file_rows(file: Path, shown: str, name: str) -> Iterator[Row]:
    if file.suffix == ".parquet":
        yield from _parquet_rows(file)
        return
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"data file {file} cannot be read: {exc}") from None
    if file.suffix == ".lean":
        from burnqed.data.leanfile import lean_file_declarations, lean_file_imports

        imports = lean_file_imports(text)
        for line, data in lean_file_declarations(text, name):
            yield Row(f"{shown}:{line}", data=dict(data), line=line, imports=imports)
        return
    if file.suffix == ".json":
        whole = _json_document_rows(file, text)
        if whole is not None:
            yield from whole
            return
    yield from _json_lines(file, text)


def _json_document_rows(file: Path, text: str) -> list[Row] | None:
    """Rows of a whole-document JSON file, or None when it is not one JSON document (then: JSON lines)."""
    stripped = text.lstrip()
    try:
        document = json.loads(stripped) if stripped else []
    except json.JSONDecodeError as exc:
        if stripped.startswith("["):
            raise InputError(f"data file {file} is not valid JSON: {exc}") from None
        return None
    if isinstance(document, dict):
        lists = [value for value in document.values() if isinstance(value, list)]
        if len(lists) == 1 and lists[0] and all(isinstance(item, dict) for item in lists[0]):
            document = lists[0]
        else:
            document = [document]
    if not isinstance(document, list):
        raise InputError(f"data file {file} holds a JSON {type(document).__name__}, not rows (objects)")
    return [_object_row(f"{file}[{number}]", item) for number, item in enumerate(document)]


def _json_lines(file: Path, text: str) -> Iterator[Row]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            yield Row(where, error=f"invalid JSON: {exc.msg} (column {exc.colno})", line=number)
            continue
        yield dataclasses.replace(_object_row(where, item), line=number)


def _object_row(where: str, item: object) -> Row:
    if not isinstance(item, dict):
        return Row(where, error=f"not a JSON object but a {type(item).__name__}")
    return Row(where, data=item)


def _parquet_rows(file: Path) -> Iterator[Row]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(file, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"data file {file} is not a readable Parquet file: {' '.join(str(exc).split())}") from None
    number = 0
    batches = reader.iter_batches(batch_size=PARQUET_BATCH_ROWS)
    while True:
        # A damaged page (checksum, compression) or text that is not UTF-8 fails here, naming the file, rather than
        # as a decoding traceback wherever the rows are used.
        try:
            batch = next(batches, None)
            if batch is None:
                return
            batch.validate(full=True)
            items = batch.to_pylist()
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            raise InputError(f"data file {file} is damaged after row {number} ({' '.join(str(exc).split())}): "
                             "restore it or remove it from data.sources") from None
        for item in items:
            yield Row(f"{file}#{number}", data=item)
            number += 1


def _hub_rows(name: str, split: str | None) -> Iterator[Row]:
    """Rows of a Hugging Face hub dataset, streamed; any failure is one clear `InputError`."""
    advice = (f"download its files (e.g. `huggingface-cli download --repo-type dataset {name}`) and set the "
              "source's `path` to the local file or folder")
    try:
        import datasets
    except ImportError:
        raise InputError(f"data source {name} is not a local path and the `datasets` package (burnqed[train]) "
                         f"is not installed to fetch it from the Hugging Face hub: {advice}") from None
    try:
        stream = datasets.load_dataset(name, split=split or "train", streaming=True)
        iterator = iter(stream)
        number = 0
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                return
            yield _object_row(f"{name}#{number}", item)
            number += 1
    except InputError:
        raise
    except Exception as exc:  # datasets raises many unrelated types (ConnectionError, FileNotFoundError, ...)
        first = str(exc).strip().split("\n", 1)[0][:300]
        raise InputError(f"data source {name} could not be loaded from the Hugging Face hub "
                         f"({type(exc).__name__}: {first}); the hub may be unreachable from here: {advice}") from None
