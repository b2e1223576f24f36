"""A committed part that is truncated or altered (one bit flipped in a data page or in the footer) is refused by every
reader of rows, in one line naming the part, instead of being read as other rows: summary, train-ebm's dataset,
SFT's positives and proof examples, the report's facts and merge; on local files and on S3; `summary` and
`train-ebm` as a user runs them (exit 2). Parts written before manifests recorded a digest are decoded with page
checksums verified and their text checked to be UTF-8."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import fsspec  # type: ignore[import-untyped,unused-ignore]
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burnqed.config import PipelineConfig
from burnqed.errors import InputError
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import write_eval_result
from burnqed.layout import Layout
from burnqed.records.results import Edge, EdgeOutcome, FailureReason, TheoremResult
from burnqed.report.build import build_report
from burnqed.stages.merge import merge_trajectories
from burnqed.stages.summary import summarize
from burnqed.storage import Store
from burnqed.trajectory.labels import label_edges
from burnqed.trajectory.reader import DAMAGED_ADVICE, read_edges
from tests.damage import damage, flip_in_footer, flip_in_page, truncate
from tests.processes import cli
from tests.trajectory.factories import edge, result, write_trajectory

NAMES = ["a", "b", "c", "d"]


def two_step(name: str, proved: bool) -> tuple[TheoremResult, list[Edge]]:
    """Three rows: a tactic from the root, a failed sibling and, below the first, a closing tactic when `proved` (a
    proof two tactics long: the value model learns only from those)."""
    edges = [edge(1), edge(2, outcome=EdgeOutcome.ERROR),
             edge(3, 1, EdgeOutcome.CLOSED if proved else EdgeOutcome.OK, depth=2)]
    label_edges(edges, [3] if proved else [], proved)
    return result(name, proved, edges=3, depth=2 if proved else None), edges


def write_prefix(uri: str, store: Store) -> None:
    """Four theorems, two per part; `a` and `c` proved (positive rows for SFT and the value model)."""
    write_trajectory(uri, [two_step(name, proved=name in "ac") for name in NAMES], every=2, store=store)


def flip_states(raw: bytes) -> bytes:
    return flip_in_page(raw, "state_before")


DAMAGES = {"truncated": truncate, "bit flipped in a data page": flip_states, "bit flipped in the footer":
           flip_in_footer}


def sha_refusal(uri: str, part: int) -> str:
    return (f"trajectory part {uri}/part-{part:06d}.parquet is damaged (its SHA-256 is not the one its manifest "
            f"part-{part:06d}.json records): {DAMAGED_ADVICE}")


def _edges(uri: str, store: Store) -> object:
    return read_edges(uri, store=store)


def _summary(uri: str, store: Store) -> object:
    return summarize(uri, store=store)


def _sft_positives(uri: str, store: Store) -> object:
    from burnqed.sft.examples import read_positives

    return read_positives([uri], store=store)


def _sft_proofs(uri: str, store: Store) -> object:
    from burnqed.sft.examples import read_proof_examples

    return read_proof_examples([uri], store=store)


def _ebm_dataset(uri: str, store: Store) -> object:
    from burnqed.ebm.sampling import load_dataset

    return load_dataset([uri], valid_fraction=0.0, store=store)


READERS = {"read_edges": _edges, "summary": _summary, "sft positives": _sft_positives, "sft proofs": _sft_proofs,
           "ebm dataset": _ebm_dataset}


@pytest.mark.parametrize("how", DAMAGES.values(), ids=DAMAGES.keys())
@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_every_reader_refuses_a_damaged_part_naming_it(tmp_path: Path, store: Store, how: Callable[[bytes], bytes],
                                                       reader: Callable[[str, Store], object]) -> None:
    prefix = str(tmp_path / "traj")
    write_prefix(prefix, store)
    reader(prefix, store)  # whole, the prefix reads
    damage(tmp_path / "traj" / "part-000001.parquet", how)
    with pytest.raises(InputError) as refused:
        reader(prefix, store)
    assert str(refused.value) == sha_refusal(prefix, 1)


@pytest.mark.parametrize("how", DAMAGES.values(), ids=DAMAGES.keys())
def test_merge_refuses_a_damaged_part_with_its_own_advice(tmp_path: Path, store: Store,
                                                          how: Callable[[bytes], bytes]) -> None:
    prefix, out = str(tmp_path / "shard-0"), tmp_path / "trajectories"
    write_prefix(prefix, store)
    damage(tmp_path / "shard-0" / "part-000000.parquet", how)
    with pytest.raises(InputError) as refused:
        merge_trajectories([prefix], str(out), store=store)
    assert str(refused.value) == (
        f"trajectory part {prefix}/part-000000.parquet is damaged (its SHA-256 is not the one its manifest "
        "part-000000.json records): rerun the search that wrote it (or remove that input) and merge again")
    assert not out.exists()


def test_the_report_refuses_a_damaged_part_of_an_iterations_trajectories(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}"
    at = Layout(root)
    attempts = [[TheoremResult(name=name, proved=False, failure_reason=FailureReason.EXHAUSTED) for name in NAMES]]
    write_eval_result(build_eval_result(attempts, [10], benchmark="b", model="tiny", ebm=None, lean_backend="replay",
                                        iteration=0, config_digest="0" * 16, git_commit=None, theorem_names=NAMES),
                      at.eval_result(0), store=store)
    write_prefix(at.trajectories(0), store)
    assert build_report(root, 0, PipelineConfig(), store=store).iterations[0].positives == 4  # two rows on each proof
    damage(tmp_path / "iter_0" / "trajectories" / "part-000000.parquet", flip_states)
    with pytest.raises(InputError) as refused:
        build_report(root, 0, PipelineConfig(), store=store)
    assert str(refused.value) == sha_refusal(at.trajectories(0), 0)


@pytest.mark.slow  # the moto server
def test_a_damaged_part_on_s3_is_refused_naming_its_uri(s3_root: str, store: Store) -> None:
    prefix = f"{s3_root}/iter_0/trajectories"
    write_prefix(prefix, store)
    fs = fsspec.filesystem("s3")
    key = f"{prefix.removeprefix('s3://')}/part-000001.parquet"
    fs.pipe_file(key, flip_states(fs.cat_file(key)))
    with pytest.raises(InputError) as refused:
        summarize(prefix, store=store)
    assert str(refused.value) == sha_refusal(prefix, 1)


def _forget_digest(manifest: Path) -> None:
    record = json.loads(manifest.read_text())
    assert len(record.pop("sha256")) == 64
    manifest.write_text(json.dumps(record))


def test_a_part_without_a_digest_is_decoded_with_its_page_checksums_verified(tmp_path: Path, store: Store) -> None:
    prefix = tmp_path / "traj"
    write_prefix(str(prefix), store)
    _forget_digest(prefix / "part-000001.json")  # as written before manifests recorded one
    assert read_edges(str(prefix), ["theorem"], store=store).column("theorem").to_pylist() == [
        name for name in NAMES for _ in range(3)]
    damage(prefix / "part-000001.parquet", flip_states)
    # Without a digest only the pages read are checked: the summary's columns are whole, the state texts are not.
    assert summarize(str(prefix), store=store).edges == 12
    with pytest.raises(InputError, match=rf"^trajectory part {prefix}/part-000001\.parquet is damaged \(.*CRC.*\): "):
        read_edges(str(prefix), store=store)


def test_text_that_is_not_utf8_in_a_part_without_digest_or_checksums_is_refused(tmp_path: Path, store: Store) -> None:
    """What `train-ebm` met as a 63-line UnicodeDecodeError: a string column holding bytes that are not UTF-8."""
    prefix = tmp_path / "traj"
    write_prefix(str(prefix), store)
    _forget_digest(prefix / "part-000000.json")
    data = prefix / "part-000000.parquet"
    table = pq.read_table(data)
    column = table.column("state_before").combine_chunks()
    values = bytearray(column.buffers()[2].to_pybytes())
    values[0] = 0xFF  # no UTF-8 string starts with this byte
    invalid = pa.Array.from_buffers(pa.string(), len(column), [column.buffers()[0], column.buffers()[1],
                                                               pa.py_buffer(bytes(values))])
    table = table.set_column(table.schema.get_field_index("state_before"), table.schema.field("state_before"),
                             invalid)
    pq.write_table(table, data, compression="zstd")  # no page checksums: only the text check is left
    with pytest.raises(InputError, match=rf"^trajectory part {prefix}/part-000000\.parquet is damaged \(.*UTF8.*\): "):
        read_edges(str(prefix), store=store)


@pytest.mark.slow
def test_summary_and_train_ebm_refuse_a_damaged_part_in_one_line(tmp_path: Path, store: Store) -> None:
    prefix = tmp_path / "traj"
    write_prefix(str(prefix), store)
    damage(prefix / "part-000001.parquet", flip_states)
    expected = f"error: {sha_refusal(str(prefix), 1)}"
    summary = cli("summary", str(prefix), cwd=tmp_path)
    assert (summary.returncode, summary.stderr.strip(), summary.stdout) == (2, expected, "")
    out = tmp_path / "ebm"
    trained = cli("train-ebm", "--trajectories", str(prefix), "--output", str(out), "--model",
                  str(tmp_path / "no-model-needed-before-the-data"), cwd=tmp_path)
    assert (trained.returncode, trained.stderr.strip()) == (2, expected)
    assert not out.exists() and not (tmp_path / "ebm-cache").exists()
