"""Reading a trajectory prefix (layout in `burnqed.trajectory.schema`): only committed parts count, i.e. data files
with a manifest; orphan data files and temp files are ignored.

    finished_theorems(uri, store=store)      names to skip when a search resumes (empty for a missing prefix)
    read_results(uri, store=store)           the TheoremResult of every recorded theorem
    read_edges(uri, columns, store=store)    one Arrow table of the committed rows, in a canonical order
    read_theorem(uri, name, store=store)     one theorem's searches: its result and rows, per run
    require_trajectories(uri, store=store)   the manifests, or an InputError for commands that need data

Every row read goes through `read_part`, which checks the part's bytes against the SHA-256 its manifest records
before decoding them: a truncated or altered part is one InputError naming it (docs/trajectories.md, "Reading and
summaries").
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem
from pydantic import ValidationError

from burnqed.errors import InputError
from burnqed.records.results import TheoremResult
from burnqed.storage import Filesystem, Store
from burnqed.trajectory.schema import (
    ADDED_IN,
    COLUMNS,
    PART_RE,
    SCHEMA,
    SUCCESS_NAME,
    CompletionMarker,
    PartManifest,
    column_default,
    empty_table,
    manifest_name,
)


def list_names(fs: Filesystem, root: str) -> set[str]:
    """Base names of the files directly under `root`; empty when it does not exist."""
    try:
        entries = fs.ls(root, detail=False, refresh=True) if fs.isdir(root) else []
    except FileNotFoundError:
        return set()
    return {posixpath.basename(str(entry).rstrip("/")) for entry in entries}


def _load_manifest(fs: Filesystem, path: str) -> PartManifest:
    try:
        raw = json.loads(fs.cat_file(path))
        return PartManifest.model_validate(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"trajectory manifest {path} is not valid JSON: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        raise InputError(f"trajectory manifest {path}: {where}: {first['msg']}") from None


def scan_prefix(fs: Filesystem, root: str) -> tuple[list[PartManifest], set[str]]:
    """The committed parts in order, and the names of every file under `root`.

    Raises InputError for a malformed manifest, a manifest whose data file is missing, or a theorem
    recorded by two parts of one run (a merged prefix may hold several runs of an iteration, e.g. the
    search and its noise pass, each with its own record of a theorem).
    """
    names = list_names(fs, root)
    manifests: list[PartManifest] = []
    for name in names:
        match = PART_RE.match(name)
        if match is None or match.group(2) != "json":
            continue
        path = posixpath.join(root, name)
        manifest = _load_manifest(fs, path)
        if manifest.part != int(match.group(1)):
            raise InputError(f"trajectory manifest {path} says it is part {manifest.part}; "
                             "manifests must not be renamed")
        if manifest.data not in names:
            raise InputError(f"trajectory manifest {path} names data file {manifest.data}, which is missing")
        manifests.append(manifest)
    manifests.sort(key=lambda m: m.part)
    seen: dict[tuple[str, str], int] = {}
    for manifest in manifests:
        for result in manifest.theorems:
            key = (manifest.run_id, result.name)
            if key in seen:
                raise InputError(
                    f"theorem {result.name!r} is recorded twice under {root}: in part-{seen[key]:06d}.json "
                    f"and part-{manifest.part:06d}.json; delete one of the two parts (data and manifest)"
                )
            seen[key] = manifest.part
    return manifests, names


def committed_parts(uri: str, *, store: Store) -> list[PartManifest]:
    """Manifests of the committed parts, in part order; empty when the prefix does not exist."""
    fs, root = store.resolve(uri)
    return scan_prefix(fs, root)[0]


def require_trajectories(uri: str, *, store: Store) -> list[PartManifest]:
    """`committed_parts`, but an InputError when there are none (for commands that need data)."""
    parts = committed_parts(uri, store=store)
    if not parts:
        raise InputError(f"no trajectory data under {uri}: no committed part-*.json manifest there; "
                         "check the path, or run the search (or merge-trajectories) that writes it first")
    return parts


def read_results(uri: str, *, store: Store) -> list[TheoremResult]:
    """The TheoremResult of every recorded theorem, in commit order."""
    return [result for part in committed_parts(uri, store=store) for result in part.theorems]


def finished_theorems(uri: str, *, store: Store) -> set[str]:
    """Names of the theorems already recorded (a resumed search skips them)."""
    return {result.name for result in read_results(uri, store=store)}


def is_complete(uri: str, *, store: Store) -> bool:
    """The writer (or a merge) finished: `_SUCCESS.json` exists."""
    fs, root = store.resolve(uri)
    return SUCCESS_NAME in list_names(fs, root)


def read_marker(uri: str, *, store: Store) -> CompletionMarker | None:
    """The completion marker, or None when the prefix is not complete."""
    fs, root = store.resolve(uri)
    path = posixpath.join(root, SUCCESS_NAME)
    try:
        return CompletionMarker.model_validate_json(fs.cat_file(path))
    except FileNotFoundError:
        return None
    except ValidationError as exc:
        raise InputError(f"trajectory completion marker {path} is malformed: {exc.errors()[0]['msg']}") from None


def is_local(fs: Filesystem) -> bool:
    """Whether `fs` is the local filesystem (atomic rename, native paths for pyarrow)."""
    return isinstance(fs, LocalFileSystem)


# What a reader of a prefix can do about a damaged part: the prefix stops being complete without it, and the stage that
# wrote it redoes exactly its theorems (a search with --resume; a merge copies the missing part again).
DAMAGED_ADVICE = ("restore it from a copy, or delete it, its manifest and _SUCCESS.json and rerun the search (with "
                  "--resume) or the merge that wrote the prefix")


def part_uri(uri: str, manifest: PartManifest) -> str:
    """The URI of a part's data file, as error messages name it."""
    return f"{uri.rstrip('/')}/{manifest.data}"


def read_part(fs: Filesystem, root: str, uri: str, manifest: PartManifest, columns: Sequence[str] | None = None, *,
              use_threads: bool = False, advice: str = DAMAGED_ADVICE) -> pa.Table:
    """The rows of one committed part (only `columns`, when given), decoded from bytes that were checked first.

    The data file is read once, whole (parts are small), and hashed: bytes that do not hash to the SHA-256 its
    manifest records (a truncated copy, a flipped bit, another file) are never decoded. Parts written before the
    digest was recorded are decoded with page checksums verified and every string checked to be UTF-8. Either way a
    damaged part is one InputError naming it and ending in `advice`, never altered rows (and never a decode error
    from whoever reads the rows later). Faults of the storage itself (a refused read) propagate as OSError.

    A part of an older schema version (its manifest's `schema_version`) reads with the columns it lacks filled with
    their defaults (`schema.column_default`), in the schema's order.

    Decoded on this thread unless `use_threads`: parts are small, and once Arrow's thread pool has run, a process
    that exits soon after (a command refusing the next part) can abort in the pool's teardown instead of exiting
    with its code (apache/arrow#34314; 3 of 42 `train-ebm` refusals here, none of 24 without the pool)."""
    where = part_uri(uri, manifest)
    data = fs.cat_file(posixpath.join(root, manifest.data))
    if manifest.sha256 is not None and hashlib.sha256(data).hexdigest() != manifest.sha256:
        raise InputError(f"trajectory part {where} is damaged (its SHA-256 is not the one its manifest "
                         f"{manifest_name(manifest.part)} records): {advice}")
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
        found = parquet.schema_arrow
        wanted = COLUMNS if columns is None else tuple(columns)
        absent = [name for name in wanted if ADDED_IN.get(name, 1) > manifest.schema_version]
        for name in wanted:
            if name in absent:
                continue
            if name not in found.names:
                raise InputError(f"trajectory part {where} lacks the column {name} of the trajectory schema: {advice}")
            if found.field(name).type != SCHEMA.field(name).type:
                raise InputError(f"trajectory part {where} holds column {name} as {found.field(name).type}, not the "
                                 f"trajectory schema's {SCHEMA.field(name).type}: {advice}")
        read = None if columns is None else [name for name in columns if name not in absent]
        table = parquet.read(columns=read, use_threads=use_threads)
        if manifest.sha256 is None:
            table.validate(full=True)  # no digest to trust: at least no string that is not UTF-8 leaves here
        if absent:
            table = _with_defaults(table, wanted, absent)
    except (OSError, pa.ArrowException) as exc:
        reason = " ".join(str(exc).split())  # pyarrow's messages span lines; the error is one
        raise InputError(f"trajectory part {where} is damaged ({reason}): {advice}") from None
    if table.num_rows != manifest.rows:
        raise InputError(f"trajectory part {where} holds {table.num_rows} rows, its manifest "
                         f"{manifest_name(manifest.part)} records {manifest.rows}: {advice}")
    return table


def _with_defaults(table: pa.Table, wanted: Sequence[str], absent: Sequence[str]) -> pa.Table:
    """`table` with the `absent` columns added as their defaults: `wanted` in order, then any column the part holds
    beyond them (a merge refuses such a part)."""
    held = [name for name in table.column_names if name not in wanted]
    names = [*wanted, *held]
    arrays = [column_default(name, table.num_rows) if name in absent else table.column(name) for name in names]
    fields = [SCHEMA.field(name) if name in absent else table.schema.field(name) for name in names]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


# The canonical order of the rows: by search (run id, then theorem name), each search's rows as it wrote them.
SEARCH_ORDER = ("run_id", "theorem")


def read_edges(uri: str, columns: Sequence[str] | None = None, *, store: Store) -> pa.Table:
    """The committed rows under `uri` (only `columns`, when given), by run id, then theorem, each search's rows in
    the order it wrote them.

    Parts hold theorems in the order their searches finished, which depends on timing (concurrency, shards, load);
    this order does not, so what is built from the rows (SFT examples, the value model's states and its sampled
    negatives) is the same for the same searches, as a seeded run must be. A damaged part is an InputError naming
    it (`read_part`)."""
    if columns is not None:
        unknown = [name for name in columns if name not in SCHEMA.names]
        if unknown:
            raise InputError(f"unknown trajectory columns {unknown}; the columns are {SCHEMA.names}")
    fs, root = store.resolve(uri)
    selected = list(columns) if columns is not None else None
    read = None if selected is None else list(dict.fromkeys([*selected, *SEARCH_ORDER]))
    tables = []
    for manifest in scan_prefix(fs, root)[0]:
        tables.append(read_part(fs, root, uri, manifest, read))
    if not tables:
        return empty_table(selected)
    table = pa.concat_tables(tables)
    written = pa.array(range(table.num_rows), type=pa.int64())  # the tie-break: a search's own row order
    keys = table.select(list(SEARCH_ORDER)).append_column("written", written)
    order = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name in (*SEARCH_ORDER, "written")])
    table = table.take(order)
    return table if selected is None else table.select(selected)


@dataclass(frozen=True, slots=True)
class TheoremSearch:
    """One search of one theorem as a prefix records it: its result (from the manifest) and its rows."""

    uri: str
    run_id: str
    result: TheoremResult
    rows: pa.Table  # every column, in the order the search wrote them


def read_theorem(uri: str, name: str, *, store: Store) -> list[TheoremSearch]:
    """Every recorded search of the theorem `name` under `uri`, one per run (a merged prefix holds the search and its
    noise pass), in part order; empty when the prefix does not record it. Only the parts whose manifest names it are
    read (each checked against its digest, `read_part`), however many the prefix holds."""
    fs, root = store.resolve(uri)
    found: list[TheoremSearch] = []
    for manifest in scan_prefix(fs, root)[0]:
        result = next((r for r in manifest.theorems if r.name == name), None)
        if result is None:
            continue
        table = read_part(fs, root, uri, manifest)
        found.append(TheoremSearch(uri, manifest.run_id, result, table.filter(pc.equal(table.column("theorem"), name))))
    return found
