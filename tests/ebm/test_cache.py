"""The embedding cache: chunked Parquet, resumable after a kill, keyed by the encoder identity, on any fsspec URI."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burnqed import storage
from burnqed.ebm.cache import EmbeddingCache, Matrix, embed_texts, text_key
from burnqed.ebm.formats import EmbedReport, EncoderIdentity
from burnqed.errors import InputError
from burnqed.policy.fingerprint import model_fingerprint
from burnqed.storage import Store
from tests.damage import damage, flip_in_footer, flip_in_page, truncate
from tests.doubles.ebm_doubles import CountingEncoder, vector

TEXTS = [f"⊢ goal number {k} ≤ ℝ" for k in range(20)]
ROOT = Path(__file__).parents[2]


def identity(digest: str = "aaaa", pooling: Literal["mean", "last"] = "mean") -> EncoderIdentity:
    return EncoderIdentity(backend="burnqed", model="m", digest=digest, verified=True, layer=-1, pooling=pooling,
                           normalize=False, max_tokens=2048, text="prompt-v1", dtype="float32", probe=[1, 320, 278])


def embed(texts: list[str], encoder: CountingEncoder, cache: EmbeddingCache,
          batch: int = 2, chunk: int = 4) -> tuple[Matrix, EmbedReport]:
    return asyncio.run(embed_texts(texts, encoder, cache, batch=batch, chunk=chunk))


def test_a_killed_run_resumes_without_recomputing_finished_chunks(tmp_path: Path, store: Store) -> None:
    cache = EmbeddingCache(str(tmp_path / "cache"), identity(), store=store)
    crashing = CountingEncoder(fail_after=5)  # 5 calls × 2 texts = 10 embedded; chunks of 4 → 2 written, 2 lost
    with pytest.raises(RuntimeError, match="killed"):
        embed(TEXTS, crashing, cache)
    assert len(cache.chunk_names()) == 2 and crashing.texts == 10
    again = CountingEncoder()
    matrix, report = embed(TEXTS, again, cache)
    assert (report.cached, report.computed, report.chunks_written) == (8, 12, 3)
    assert len(again.calls) == 6 and again.texts == 12  # only what no finished chunk held
    assert not {text for call in again.calls for text in call} & set(TEXTS[:8])
    assert np.array_equal(matrix, np.array([vector(t) for t in TEXTS], dtype=np.float32))
    assert len(cache.chunk_names()) == 5
    third = CountingEncoder()
    matrix3, report3 = embed(TEXTS + TEXTS[:3], third, cache)
    assert third.calls == [] and (report3.cached, report3.computed, report3.texts) == (20, 0, 20)
    assert np.array_equal(matrix3[20:], matrix[:3])  # duplicates map to the same row content


def test_chunks_are_keyed_by_the_encoder_identity(tmp_path: Path, store: Store) -> None:
    uri = str(tmp_path / "cache")
    embed(TEXTS[:6], CountingEncoder(), EmbeddingCache(uri, identity("aaaa"), store=store))
    for other_encoder in (identity("bbbb"), identity("aaaa", pooling="last")):
        other = CountingEncoder()
        _, report = embed(TEXTS[:6], other, EmbeddingCache(uri, other_encoder, store=store))
        assert report.computed == 6 and other.texts == 6  # another model or pooling never reuses embeddings
    keys = {identity("aaaa").key(), identity("bbbb").key(), identity("aaaa", pooling="last").key()}
    assert {p.name for p in (tmp_path / "cache").iterdir()} == keys and len(keys) == 3
    stored = (tmp_path / "cache" / identity("aaaa").key() / "encoder.json").read_text()
    assert EncoderIdentity.model_validate_json(stored) == identity("aaaa")
    # Where the identity is recorded but not compared (`model`, `via`), a copy of the model shares the cache.
    same = identity("aaaa").model_copy(update={"model": "s3://elsewhere/m", "via": "http://127.0.0.1:30001"})
    assert EmbeddingCache(uri, same, store=store).root == EmbeddingCache(uri, identity("aaaa"), store=store).root


def test_a_cache_folder_written_by_another_encoder_is_refused(tmp_path: Path, store: Store) -> None:
    uri = str(tmp_path / "cache")
    embed(TEXTS[:4], CountingEncoder(), EmbeddingCache(uri, identity("aaaa", pooling="last"), store=store))
    # The last-token folder put where the mean-pooled encoder looks (a copied cache, a renamed folder):
    (tmp_path / "cache" / identity("aaaa", pooling="last").key()).rename(tmp_path / "cache" / identity("aaaa").key())
    encoder = CountingEncoder()
    with pytest.raises(InputError) as refused:
        embed(TEXTS[:4], encoder, EmbeddingCache(uri, identity("aaaa"), store=store))
    message = str(refused.value)
    assert "\n" not in message and encoder.calls == []
    assert "last-pooled" in message and "mean-pooled" in message and "(pooling last vs mean)" in message
    assert text_key("x") == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"


@pytest.mark.slow
def test_the_cache_works_on_s3(s3_root: str, store: Store) -> None:
    cache = EmbeddingCache(s3_root + "/ebm-cache", identity(), store=store)
    with pytest.raises(RuntimeError):
        embed(TEXTS, CountingEncoder(fail_after=3), cache)
    assert len(cache.chunk_names()) == 1
    again = CountingEncoder()
    _, report = embed(TEXTS, again, cache)
    assert (report.cached, report.computed) == (4, 16) and again.texts == 16


def test_the_model_fingerprint_reads_content_and_ignores_markers(tmp_path: Path, store: Store) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 64}')
    (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    first = model_fingerprint(str(folder), store=store)
    (folder / storage.MARKER_NAME).write_text("{}")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "x").write_text("y")
    assert model_fingerprint(str(folder), store=store) == first
    assert model_fingerprint("file://" + str(folder), store=store) == first
    (folder / "model.safetensors").write_bytes(b"\0" * 999 + b"\1")  # fine-tuned: same size, new bytes
    assert model_fingerprint(str(folder), store=store) != first


def test_large_weight_files_are_fingerprinted_by_sampled_blocks(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, store: Store) -> None:
    from burnqed.policy import fingerprint as ident

    monkeypatch.setattr(ident, "FULL_HASH_LIMIT", 100)
    monkeypatch.setattr(ident, "BLOCK", 16)  # 64 blocks of 16 bytes, the first at 0, the second at 158
    folder = tmp_path / "model"
    folder.mkdir()
    data = bytearray(10_000)
    (folder / "model.safetensors").write_bytes(bytes(data))
    first = model_fingerprint(str(folder), store=store)
    data[100] = 1  # between two sampled blocks: not seen (the documented limit of sampling)
    (folder / "model.safetensors").write_bytes(bytes(data))
    assert model_fingerprint(str(folder), store=store) == first
    data[5] = 1  # inside the first block
    (folder / "model.safetensors").write_bytes(bytes(data))
    assert model_fingerprint(str(folder), store=store) != first


@pytest.mark.parametrize("how", [truncate, lambda raw: flip_in_page(raw, "vector"), flip_in_footer],
                         ids=["truncated", "bit flipped in the vectors", "bit flipped in the footer"])
def test_a_damaged_chunk_is_refused_naming_it_before_anything_is_encoded(
    tmp_path: Path, store: Store, how: Callable[[bytes], bytes]
) -> None:
    cache = EmbeddingCache(str(tmp_path / "cache"), identity(), store=store)
    embed(TEXTS[:8], CountingEncoder(), cache)
    first = cache.chunk_names()[0]
    damage(tmp_path / "cache" / identity().key() / first, how)
    encoder = CountingEncoder()
    with pytest.raises(InputError) as refused:
        embed(TEXTS, encoder, cache)
    message = str(refused.value)
    assert message.startswith(f"embedding cache chunk {cache.root}/{first} is damaged (") and "\n" not in message
    assert message.endswith("): delete it and re-run (only its embeddings are computed again)")
    assert encoder.calls == []
    (tmp_path / "cache" / identity().key() / first).unlink()  # as the message says: only its 4 are encoded again
    _, report = embed(TEXTS[:8], encoder, cache)
    assert (report.cached, report.computed) == (4, 4)


def test_a_chunk_of_other_columns_is_refused(tmp_path: Path, store: Store) -> None:
    cache = EmbeddingCache(str(tmp_path / "cache"), identity(), store=store)
    embed(TEXTS[:4], CountingEncoder(), cache)
    name = cache.chunk_names()[0]
    pq.write_table(pa.table({"key": [text_key(TEXTS[0])], "vector": [[1.0, 2.0]]}),
                   tmp_path / "cache" / identity().key() / name)
    with pytest.raises(InputError) as refused:
        embed(TEXTS[:4], CountingEncoder(), cache)
    assert str(refused.value) == (
        f"embedding cache chunk {cache.root}/{name} is damaged (columns key: string, vector: list<element: double>, "
        "not key: string, vector: fixed_size_list<float>): delete it and re-run (only its embeddings are computed "
        "again)")


KILLED_EMBEDDER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from burnqed.ebm import cache as c
    from burnqed.storage import Store
    from tests.doubles.ebm_doubles import CountingEncoder
    from tests.ebm.test_cache import TEXTS, identity

    real = c.EmbeddingCache.write_chunk
    def write_chunk(self, seq, keys, vectors):
        name = real(self, seq, keys, vectors)
        print(f"chunk {seq}", flush=True)
        if seq == 1:
            time.sleep(60)  # SIGKILLed here: two chunks published, the rest never encoded
        return name
    c.EmbeddingCache.write_chunk = write_chunk
    cache = c.EmbeddingCache(sys.argv[1], identity(), store=Store(cache_dir=Path(sys.argv[1]) / "store"))
    asyncio.run(c.embed_texts(TEXTS, CountingEncoder(), cache, batch=2, chunk=4))
    """
)


@pytest.mark.slow  # a child process killed with SIGKILL
def test_a_run_killed_outright_resumes_to_the_embeddings_of_an_uninterrupted_one(tmp_path: Path, store: Store) -> None:
    uri = str(tmp_path / "cache")
    proc = subprocess.Popen([sys.executable, "-c", KILLED_EMBEDDER, uri], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        assert [proc.stdout.readline(), proc.stdout.readline()] == ["chunk 0\n", "chunk 1\n"]
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    cache = EmbeddingCache(uri, identity(), store=store)
    assert len(cache.chunk_names()) == 2
    encoder = CountingEncoder()
    matrix, report = embed(TEXTS, encoder, cache)
    assert (report.cached, report.computed) == (8, 12) and encoder.texts == 12
    uninterrupted, _ = embed(TEXTS, CountingEncoder(), EmbeddingCache(str(tmp_path / "whole"), identity(), store=store))
    assert np.array_equal(matrix, uninterrupted)
