"""The judge of the search's proofs before they train (`lean.judge = "comparator"`; docs/trajectories.md, "Merge"
and "The judge"): `merge-trajectories` judges the proof each search shard recorded for each proved theorem with Lean's
comparator (batched per header, as eval's judge is) before it merges them, and a proof comparator refuses is never a
positive in the merged trajectories: its theorem's result is un-proved (`judge_refused`, comparator's reason in its
detail, its sketches unverified) and every row of that search relabelled as an unproved theorem's
(`trajectory.labels.unproved_label`: no row positive, on a proof path or a proof's end). The refusal is a soundness
alarm, listed in the merged prefix's `_SUCCESS.json` (`extra["judge"]`) and by the command, which exits
SOUNDNESS_ALARM_EXIT.

    verdicts = await judge_shards(loaded, index.theorems, settings)     # settings: search.judge.JudgeSettings
    merge_trajectories(inputs, output, verdicts=verdicts, store=store)

What it judges is what the manifests keep: each search's counted proof (`TheoremResult.proof`). A search that found
more proofs of a theorem (search.max_proofs > 1) has their rows judged with the counted one: a refusal un-positives
every proof of that search, an acceptance leaves the others as burnqed verified them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from burnqed.base.signals import run_async
from burnqed.config.loader import Config
from burnqed.errors import InputError
from burnqed.lean.backend import lean_backend_label
from burnqed.lean.comparator import ComparatorSettings
from burnqed.records.results import EdgeOutcome, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.judge import JudgeSettings, check_definition_holes, check_judge, judge_passes
from burnqed.storage import Store
from burnqed.trajectory.labels import unproved_label
from burnqed.trajectory.schema import PartManifest

Key = tuple[str, str, str]  # (input prefix, run id, theorem)


@dataclass(frozen=True, slots=True)
class ShardVerdicts:
    """comparator's verdicts on the shards' proofs: the results it refused (un-proved), one alarm line each, and the
    record the merged prefix keeps."""

    refused: dict[Key, TheoremResult] = field(default_factory=dict)
    alarms: list[str] = field(default_factory=list)
    record: dict[str, object] = field(default_factory=dict)

    def refused_in(self, uri: str, manifest: PartManifest) -> dict[tuple[str, str], TheoremResult]:
        """The refused results of `manifest`'s part of `uri`, by (run id, theorem)."""
        return {(run, name): result for (at, run, name), result in self.refused.items()
                if at == uri and run == manifest.run_id and any(r.name == name for r in manifest.theorems)}


Judge = Callable[[list[tuple[str, list[PartManifest]]]], ShardVerdicts]  # the shards' manifests → their verdicts


def alarm_line(name: str, run_id: str, detail: str | None) -> str:
    """The soundness alarm of a search proof comparator refused."""
    said = detail or "comparator refused it"
    return f"soundness alarm: {name}: burnqed verified its proof in search {run_id}, {said}; no positive in the merge"


async def judge_shards(loaded: Sequence[tuple[str, Sequence[PartManifest]]], theorems: Sequence[Theorem],
                       settings: JudgeSettings) -> ShardVerdicts:
    """Every proof the shards `loaded` ((prefix, its manifests), in merge order) recorded judged by
    `settings.comparator` (see the module docstring); nothing judged with burnqed as the judge. InputError naming
    them when a proved theorem is not among `theorems` (another index than the search's)."""
    if settings.comparator is None:
        return ShardVerdicts(record={"judge": settings.name, "why": settings.why})
    known = {t.name for t in theorems}
    keys = [(uri, m.run_id, r.name) for uri, manifests in loaded for m in manifests for r in m.theorems if r.proved]
    results = [r for _, manifests in loaded for m in manifests for r in m.theorems if r.proved]
    missing = sorted({name for _, _, name in keys if name not in known})
    if missing:
        raise InputError(f"{', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}: proved in the search and not "
                         "among the theorems given (--theorems, --split): judge the shards against the search's index")
    judged, records = await judge_passes(theorems, [results], settings)
    refused: dict[Key, TheoremResult] = {}
    for key, result in zip(keys, judged[0], strict=True):
        if not result.proved:
            refused[key] = result.model_copy(update={
                "sketches": [s.model_copy(update={"verified": False}) for s in result.sketches]})
    alarms = [alarm_line(name, run, result.detail) for (_, run, name), result in refused.items()]
    unjudged = sorted({name for _, _, name in keys if records[name].accepted is None})
    base = settings.comparator.record(settings.toolchain)
    return ShardVerdicts(refused, alarms, {
        "judge": "comparator", "toolchain": base.toolchain, "command": base.command, "paranoid": base.paranoid,
        "sandboxed": base.sandboxed, "judged": len(keys) - sum(1 for k in keys if k[2] in unjudged),
        "refused": len(refused), "alarms": alarms, "not_judged": unjudged})


def judges_merge(config: Config) -> bool:
    """Whether comparator judges the shards' proofs in `merge-trajectories` (lean.judge, decided; never on the
    embedded Lean), as `merge_judge`'s settings say."""
    return config.lean.judged_by()[0] == "comparator" and lean_backend_label(config.lean.command) not in (
        "minilean", "replay")


def merge_judge(config: Config, theorems: str | None, split: str | None, *, store: Store
                ) -> tuple[JudgeSettings, Callable[[], Judge]]:
    """Who judges the shards' proofs in `merge-trajectories` (`config`'s lean.judge) and the judge to hand the merge,
    made when the merge runs (the search's index, `theorems` and `split` as `burnqed search` reads them, loaded and
    checked: positive evidence that comparator judges, `search.judge.check_judge`, and definition holes for its
    answer slots, `check_definition_holes`, each a ConfigError in one line before anything is copied)."""
    from burnqed.data.theorems import load_index

    settings = JudgeSettings.of(config.lean.judged_by(), ComparatorSettings.of(config.lean),
                                lean_backend_label(config.lean.command))

    def made() -> Judge:
        index = load_index(theorems, split, store=store, world_seed=config.data.world_seed,
                           world_sketches=config.data.world_sketches)
        check_definition_holes(index.theorems, settings, config.lean.lean_version())
        run_async(check_judge(settings))
        return lambda loaded: run_async(judge_shards(loaded, index.theorems, settings))

    return settings, made


def relabel(table: pa.Table, refused: Mapping[tuple[str, str], TheoremResult]) -> pa.Table:
    """`table` (one part's rows) with the rows of the `refused` searches ((run id, theorem)) labelled as an unproved
    theorem's: no row positive, on a proof path or a proof's end."""
    runs, names = table.column("run_id").to_pylist(), table.column("theorem").to_pylist()
    outcomes = table.column("outcome").to_pylist()
    mine = [(run, name) in refused for run, name in zip(runs, names, strict=True)]
    columns = {
        "label": [unproved_label(EdgeOutcome(o)).value if m else v
                  for m, o, v in zip(mine, outcomes, table.column("label").to_pylist(), strict=True)],
        "on_proof_path": [False if m else v for m, v in zip(mine, table.column("on_proof_path").to_pylist(),
                                                             strict=True)],
        "proof_complete": [False if m else v for m, v in zip(mine, table.column("proof_complete").to_pylist(),
                                                              strict=True)],
    }
    for name, values in columns.items():
        at = table.schema.get_field_index(name)
        table = table.set_column(at, table.schema.field(at), pa.array(values, type=table.schema.field(at).type))
    return table


__all__ = ["Judge", "ShardVerdicts", "alarm_line", "judge_shards", "judges_merge", "merge_judge", "relabel"]
