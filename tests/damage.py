"""Damaging a Parquet file the way a disk, a copy or a network does: cut short, or one bit flipped where a reader
that trusts the file would decode other values (a data page's payload) or another layout (the footer)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def footer_length(raw: bytes) -> int:
    """Bytes of the footer: its metadata, its length and the closing magic."""
    return int.from_bytes(raw[-8:-4], "little") + 8


def truncate(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def flip(raw: bytes, at: int) -> bytes:
    return raw[:at] + bytes([raw[at] ^ 0x04]) + raw[at + 1:]


def flip_in_page(raw: bytes, column: str) -> bytes:
    """One bit of `column`'s last data page in the first row group (the last byte of its column chunk, which is that
    page's payload), the footer intact."""
    metadata = pq.ParquetFile(pa.BufferReader(raw)).metadata
    index = metadata.schema.to_arrow_schema().get_field_index(column)
    chunk = metadata.row_group(0).column(index)
    return flip(raw, (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size - 1)


def flip_in_footer(raw: bytes) -> bytes:
    return flip(raw, len(raw) - footer_length(raw) // 2)


def damage(path: Path, how: Callable[[bytes], bytes]) -> None:
    """Rewrite the file at `path` as `how` alters its bytes."""
    raw = path.read_bytes()
    altered = how(raw)
    assert altered != raw
    path.write_bytes(altered)
