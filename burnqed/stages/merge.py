"""Merge the trajectory prefixes of search shards into one prefix (the `merge-trajectories` step).

    report = merge_trajectories(["s3://b/run/iter_0/search/shard-0", ".../shard-1"], "s3://b/run/iter_0/trajectories",
                                store=store)

Every committed part of every input is copied under consecutive new part numbers, in input order, then
`_SUCCESS.json` lists the inputs. Every part is verified before anything is written; what is refused (InputError)
and how a re-run resumes: docs/trajectories.md, "Merge". With `judge` (lean.judge = "comparator":
`stages.judge_merge`), the shards' proofs are judged after the parts are verified and before the first copy; a part
holding a search whose proof comparator refused is written again with that search un-proved and its rows relabelled,
and `_SUCCESS.json` records the judge and its alarms (`extra["judge"]`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from burnqed.base.progress import progress_bar
from burnqed.errors import InputError, StorageError
from burnqed.provenance import INPUTS_NAME, StageInputs
from burnqed.stages.judge_merge import Judge, ShardVerdicts, relabel
from burnqed.storage import Filesystem, Store
from burnqed.trajectory.reader import part_uri, read_marker, read_part, scan_prefix
from burnqed.trajectory.schema import (
    COLUMNS,
    SCHEMA_VERSION,
    SUCCESS_NAME,
    CompletionMarker,
    PartManifest,
    data_name,
    manifest_name,
)
from burnqed.trajectory.writer import copy_file, publish_bytes, publish_table, remove_orphans


class MergeReport(BaseModel):
    """What a merge produced."""

    output: str = Field(description="The merged prefix.")
    inputs: list[str] = Field(description="The shard prefixes, in merge order.")
    parts: int = Field(description="Committed parts in the output.")
    theorems: int = Field(description="Theorems recorded in the output.")
    proved: int = Field(description="Proved theorems in the output.")
    rows: int = Field(description="Rows (edges) in the output.")
    copied: int = Field(description="Parts copied by this call (0 when the output was already complete).")
    skipped: bool = Field(description="The output was already complete with these inputs: nothing was done.")
    judge: str = Field(default="burnqed", description="Who judged the shards' proofs: 'comparator' when the merge "
                       "ran it (lean.judge), else 'burnqed' (the search's own checks).")
    alarms: list[str] = Field(default_factory=list, description="One line per proof the search verified and "
                              "comparator refused (a soundness alarm): not a positive in the output.")


def _source_id(uri: str, manifest: PartManifest) -> str:
    return f"{uri.rstrip('/')}/{manifest_name(manifest.part)}"


def _load_inputs(
    inputs: Sequence[str], allow_incomplete: bool, store: Store
) -> list[tuple[str, Filesystem, str, list[PartManifest]]]:
    loaded = []
    owner: dict[tuple[str, str], str] = {}
    iterations: set[int] = set()
    for uri in inputs:
        fs, root = store.resolve(uri)
        manifests, names = scan_prefix(fs, root)
        if not manifests:
            raise InputError(f"trajectory input {uri} has no committed parts: check the path, or rerun its search")
        if SUCCESS_NAME not in names and not allow_incomplete:
            raise InputError(f"trajectory input {uri} is not complete (no {SUCCESS_NAME}): its search did not "
                             "finish; resume it, or merge anyway with --allow-incomplete")
        for manifest in manifests:
            iterations.add(manifest.iteration)
            for result in manifest.theorems:
                where = _source_id(uri, manifest)
                key = (manifest.run_id, result.name)
                if key in owner:
                    raise InputError(f"theorem {result.name!r} is recorded by two inputs of run {manifest.run_id}: "
                                     f"{owner[key]} and {where}; shards must not overlap")
                owner[key] = where
        loaded.append((uri, fs, root, manifests))
    if len(iterations) > 1:
        raise InputError(f"trajectory inputs mix iterations {sorted(iterations)}; merge one iteration at a time")
    return loaded


def verify_part(fs: Filesystem, root: str, uri: str, manifest: PartManifest) -> None:
    """InputError naming the part unless it is whole: `read_part`'s checks (its bytes hash to the SHA-256 its manifest
    records, or, for parts written before that, every page's checksum and every string), every row of every column
    decoded to the count its manifest records, and its columns exactly the schema's. A truncated or foreign file, or
    a data page damaged behind an intact footer, fails here, before a merge publishes it."""
    advice = "rerun the search that wrote it (or remove that input) and merge again"
    table = read_part(fs, root, uri, manifest, advice=advice)
    if tuple(table.column_names) != COLUMNS:
        raise InputError(f"trajectory part {part_uri(uri, manifest)} has columns {table.column_names[:4]}…, not the "
                         f"trajectory schema's: {advice}")


def _report(output: str, inputs: Sequence[str], marker: CompletionMarker, copied: int, skipped: bool) -> MergeReport:
    judged = marker.extra.get("judge")
    said = judged if isinstance(judged, dict) else {}
    alarms = said.get("alarms")
    return MergeReport(output=output, inputs=list(inputs), parts=len(marker.parts), theorems=marker.theorems,
                       proved=marker.proved, rows=marker.rows, copied=copied, skipped=skipped,
                       judge=str(said.get("judge", "burnqed")),
                       alarms=[str(a) for a in alarms] if isinstance(alarms, list) else [])


def _copy_part(uri: str, fs: Filesystem, root: str, manifest: PartManifest, out: tuple[Filesystem, str, str],
               seq: int, verdicts: ShardVerdicts | None) -> PartManifest:
    """Part `manifest` of `uri` as part `seq` of the output (`out`: its filesystem, root and URI), its manifest not
    yet published: its bytes copied, or, when it holds a search comparator refused, its rows relabelled and its
    results un-proved (`stages.judge_merge`)."""
    out_fs, out_root, output = out
    target = posixpath.join(out_root, data_name(seq))
    refused = verdicts.refused_in(uri, manifest) if verdicts is not None else {}
    update: dict[str, object] = {"part": seq, "data": data_name(seq), "source": _source_id(uri, manifest)}
    if refused:
        table = relabel(read_part(fs, root, uri, manifest), refused)
        update |= {"sha256": publish_table(out_fs, target, table), "schema_version": SCHEMA_VERSION,
                   "theorems": [refused.get((manifest.run_id, r.name), r) for r in manifest.theorems]}
        return manifest.model_copy(update=update)
    source = posixpath.join(root, manifest.data)
    copy_file(fs, source, out_fs, target)
    if out_fs.size(target) != fs.size(source):  # its manifest is not published: the part does not exist
        raise StorageError(f"copy of {uri.rstrip('/')}/{manifest.data} to {output} is {out_fs.size(target)} "
                           f"bytes, the source {fs.size(source)}: check the destination's free space and "
                           "merge again (finished parts are kept)")
    return manifest.model_copy(update=update)


def _check_judged(done: Sequence[PartManifest], loaded: Sequence[tuple[str, Filesystem, str, list[PartManifest]]],
                  verdicts: ShardVerdicts, output: str) -> None:
    """InputError when a part an interrupted earlier merge copied still counts a proof comparator refused (that merge
    ran without the judge): its rows would train."""
    sources = {_source_id(uri, m): (uri, m) for uri, _, _, manifests in loaded for m in manifests}
    for copied in done:
        uri, manifest = sources.get(copied.source or "", ("", copied))
        refused = verdicts.refused_in(uri, manifest) if uri else {}
        if any(r.proved and (copied.run_id, r.name) in refused for r in copied.theorems):
            raise InputError(f"merge output {output} holds {manifest_name(copied.part)}, copied by an earlier merge "
                             "without comparator's verdict, with a proof comparator refuses: merge again with --force")


def merge_trajectories(
    inputs: Sequence[str], output: str, *, allow_incomplete: bool = False, made_from: StageInputs | None = None,
    judge: Judge | None = None, store: Store
) -> MergeReport:
    """Copy the committed parts of `inputs` into `output` and mark it complete (see the module doc); `made_from` is
    recorded in the prefix (`_INPUTS.json`) before the first copy; `judge` judges the shards' proofs first."""
    if not inputs:
        raise InputError("no trajectory inputs to merge")
    out_fs, out_root = store.resolve(output)
    done, out_names = scan_prefix(out_fs, out_root)
    if SUCCESS_NAME in out_names:
        marker = read_marker(output, store=store)
        assert marker is not None
        if marker.sources != list(inputs):
            raise InputError(f"trajectory {output} is already complete, merged from {marker.sources}, not "
                             f"{list(inputs)}: use another output prefix or delete it")
        return _report(output, inputs, marker, copied=0, skipped=True)

    loaded = _load_inputs(inputs, allow_incomplete, store)
    expected = {_source_id(uri, m) for uri, _, _, manifests in loaded for m in manifests}
    stray = [manifest_name(m.part) for m in done if m.source not in expected]
    if stray:
        raise InputError(f"merge output {output} already holds parts not copied from these inputs ({stray[:3]}"
                         f"{'...' if len(stray) > 3 else ''}): use an empty output prefix")
    copied_sources = {m.source for m in done}
    todo = [(uri, fs, root, m) for uri, fs, root, manifests in loaded for m in manifests
            if _source_id(uri, m) not in copied_sources]
    for manifest in done:  # copied by an interrupted earlier merge
        verify_part(out_fs, out_root, output, manifest)
    for uri, fs, root, manifest in todo:
        verify_part(fs, root, uri, manifest)
    verdicts = judge([(uri, manifests) for uri, _, _, manifests in loaded]) if judge is not None else None
    if verdicts is not None:
        _check_judged(done, loaded, verdicts, output)
    remove_orphans(out_fs, out_root, out_names, {m.part for m in done})
    if made_from is not None:  # what the prefix is made from, before its first part (burnqed.runner.reuse reads it)
        publish_bytes(out_fs, posixpath.join(out_root, INPUTS_NAME), made_from.model_dump_json(indent=1).encode())
    seq = done[-1].part + 1 if done else 0
    committed = list(done)
    with progress_bar("merging trajectory parts", total=len(todo)) as advance:
        for uri, fs, root, manifest in todo:
            copy = _copy_part(uri, fs, root, manifest, (out_fs, out_root, output), seq, verdicts)
            publish_bytes(out_fs, posixpath.join(out_root, manifest_name(seq)), copy.model_dump_json(indent=1).encode())
            committed.append(copy)
            seq += 1
            advance(1)
    run_id, iteration = committed[0].run_id, committed[0].iteration
    runs = sorted({m.run_id for m in committed})
    marker = CompletionMarker(
        run_id=run_id,
        iteration=iteration,
        parts=[manifest_name(m.part) for m in committed],
        theorems=sum(len(m.theorems) for m in committed),
        proved=sum(result.proved for m in committed for result in m.theorems),
        rows=sum(m.rows for m in committed),
        written_at=datetime.now(UTC),
        sources=list(inputs),
        extra={**({"runs": runs} if len(runs) > 1 else {}),
               **({"judge": verdicts.record} if verdicts is not None else {})},
    )
    publish_bytes(out_fs, posixpath.join(out_root, SUCCESS_NAME), marker.model_dump_json(indent=1).encode())
    return _report(output, inputs, marker, copied=len(todo), skipped=False)
