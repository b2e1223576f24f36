"""What `--theorems PATH` reads on every command that takes it (eval, search, lean check; docs/data.md).

    index = load_theorems("MiniF2F/Test.lean", store=store)     # a benchmark as users have it, read on the fly
    index = load_theorems("runs/iter_0/data", store=store)      # a prepared-data folder: its theorems.json
    index = load_theorems("s3://bucket/minif2f.json", store=store)  # a theorem index
    benchmark = pipeline_benchmark(cfg.pipeline.benchmark, cfg.data.world_seed, store=store,
                                   world_sketches=cfg.data.world_sketches)  # what the evals evaluate
    index = rl_index(None, None, cfg, store=store)       # what `burnqed rl` trains on without --theorems/--split
    line = check_rl_theorems(index, cfg, store=store)   # refuses test and benchmark theorems by name (InputError)

A benchmark is converted on the fly exactly as a `benchmark` source is (`benchmark_index`), without Lean and writing
nothing; its declarations that are none of its theorems come with it (`TheoremIndex.skipped`). `pipeline_benchmark`
reads `pipeline.benchmark` the same way (unset: the embedded test split) and refuses a missing or empty one
(`InputError`, exit 2) before any stage runs. The training stages read their theorems here too: `rl_index` (without
--split, the train split), and `check_rl_theorems` / `check_training_inputs` refuse a test or benchmark theorem among
what rl, sft or train-ebm would train on (docs/data.md, "Decontamination").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from burnqed.config import Config, DataConfig, SourceSpec
from burnqed.data.collect import collect
from burnqed.data.data_report import summary_line
from burnqed.data.decontaminate import (
    ROUTE_PIPELINE,
    Benchmark,
    check_training_theorems,
    held_out_names,
    held_out_theorems,
)
from burnqed.data.index import (
    NOT_AN_INDEX,
    OtherDocumentError,
    embedded_index,
    load_local_theorem_index,
    load_theorem_index,
    not_an_index,
    prepare_hint,
    refuse_empty,
    select_split,
)
from burnqed.data.pairs import THEOREMS_FILE
from burnqed.errors import InputError
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.storage import Store, is_remote, join, local_path

BENCHMARK_KEY = "pipeline.benchmark"


def load_index(theorems: str | None, split: str | None, default_split: str | None = None, *, store: Store,
               world_seed: int = 0, world_sketches: bool = False) -> TheoremIndex:
    """The theorems of `burnqed search|eval --theorems THEOREMS --split SPLIT`, as the command and the local runner's
    reuse check (`burnqed.runner.reuse`) both read them: `load_theorems(THEOREMS)`, else the embedded index
    (`default_split` of it: eval's is the test split), then only the `split` theorems. `theorems is not None`: an
    empty --theorems (an unset variable) is refused, never read as the embedded benchmark."""
    index = (load_theorems(theorems, store=store) if theorems is not None
             else embedded_index(default_split, world_seed, world_sketches))
    return select_split(index, split) if split else index


def pipeline_benchmark(benchmark: str | None, world_seed: int, *, store: Store,
                       world_sketches: bool = False) -> Benchmark:
    """What the iteration's evals evaluate: `pipeline.benchmark` read as `eval --theorems` reads it (every theorem of
    it: the evals take no --split), else the embedded test split of `world_seed` (and `world_sketches`; what `eval`
    without --theorems
    evaluates). `InputError` naming pipeline.benchmark when it is set and missing, or holds no theorem."""
    if benchmark is None:
        index = embedded_index("test", world_seed, world_sketches)
        return Benchmark(ROUTE_PIPELINE, index.name, tuple(index.theorems))
    if not is_remote(benchmark) and not local_path(benchmark).exists():
        raise InputError(f"{BENCHMARK_KEY} {benchmark} does not exist (the benchmark the evals evaluate and the "
                         "training data is decontaminated against): give an existing .lean file or folder, jsonl, "
                         "theorem index or prepared-data folder, or leave it unset for the embedded test split")
    index = load_setting_theorems(benchmark, BENCHMARK_KEY, store=store)
    return Benchmark(ROUTE_PIPELINE, index.name, tuple(index.theorems), uri=benchmark)


def load_setting_theorems(path: str, key: str, *, store: Store) -> TheoremIndex:
    """The theorems a setting (`key`: pipeline.benchmark, pipeline.search_theorems) names, read as `--theorems`
    reads them; every refusal names the setting first (an index that lists no theorem, a file no reader takes)."""
    try:
        return load_theorems(path, store=store, option=key)
    except InputError as exc:
        text = str(exc)
        raise InputError(text if text.startswith(key) else f"{key}: {text}") from None


# What --theorems reads, as a refusal of something else says it (the module docstring, docs/data.md).
TAKES = ("--theorems takes a theorem index (a JSON object with a `theorems` list, as the theorems.json `burnqed data "
         "prepare` writes), a prepared-data folder, or a benchmark as you have it: a .lean file or a folder of them, "
         "a DeepSeek/miniF2F .jsonl (formats: docs/data.md)")


def load_theorems(path: str, *, store: Store, option: str = "--theorems") -> TheoremIndex:
    """The theorems `--theorems PATH` names (see the module docstring): an index file (path or URI), a
    prepared-data folder, or a benchmark converted on the fly (`benchmark_index`). A JSON object that is none (an
    eval result, a report) is refused saying what it is and what --theorems takes. `option` names the setting in
    messages."""
    try:
        return _load_theorems(path, store=store, option=option)
    except OtherDocumentError as exc:
        raise InputError(f"{option} {path} is {exc.other}, not theorems: {TAKES}") from None


def _load_theorems(path: str, *, store: Store, option: str) -> TheoremIndex:
    refuse_empty(path)
    suffix = PurePosixPath(path.rstrip("/")).suffix.lower()
    if is_remote(path):
        if suffix in NOT_AN_INDEX:
            return benchmark_index(path, store=store, option=option)
        if store.exists(path) and not store.is_file(path):  # a folder: a prepared-data folder or a benchmark's
            index_file = join(path, "theorems.json")
            if store.exists(index_file):
                return load_theorem_index(index_file, store=store)
            return benchmark_index(path, store=store, option=option)
        return load_theorem_index(path, store=store)
    local = local_path(path)
    if local.is_dir():
        prepared = local / "theorems.json"
        if prepared.is_file():
            return load_local_theorem_index(prepared)
        return benchmark_index(path, store=store, option=option)
    if local.is_file() and suffix in NOT_AN_INDEX:
        return benchmark_index(path, store=store, option=option)
    try:
        return load_local_theorem_index(local, shown=path)
    except InputError as exc:
        if isinstance(exc, OtherDocumentError) or not (local.is_file() and not_an_index(local)):
            raise  # an object of other keys is no list of benchmark rows either
        refusal = exc
    try:  # JSON of another shape (a list of DeepSeek rows): a benchmark too, if it reads as one
        return benchmark_index(path, store=store, option=option)
    except InputError:
        raise refusal from None


def benchmark_index(path: str, *, store: Store, option: str = "--theorems") -> TheoremIndex:
    """The theorems of the benchmark at `path` (a `.lean` file or folder, a jsonl, …, local or remote), read as
    `burnqed data prepare --source benchmark=PATH` reads them (`burnqed.data.collect`: names, statements, signatures,
    headers, docstrings, splits), without Lean and without writing anything. `InputError` saying what was read and
    naming the command that prepares it, with its report, when no theorem results."""
    try:
        collection = collect(DataConfig(sources=[SourceSpec(kind="benchmark", path=path)], replay=False), store=store)
    except InputError as exc:  # a folder with no benchmark file, a file type no source has
        raise InputError(f"{option}: {exc}") from None
    if not collection.candidates:
        found = "; ".join([summary_line(report) for report in collection.reports] + collection.warnings)
        raise InputError(f"{option} {path}: no theorem could be read from it ({found}); a theorem index is a "
                         f"theorems.json: {prepare_hint(path)}")
    name = PurePosixPath(path.rstrip("/")).stem or "theorems"
    return TheoremIndex(name=name, theorems=[candidate.theorem for candidate in collection.candidates],
                        skipped=sorted(collection.skipped, key=lambda skipped: (skipped.file, skipped.line or 0)))


# ------------------------------------------------------------------------------ what the training stages read

TRAIN_SPLIT = "train"  # what RL trains on when --split is not given


def rl_index(theorems: str | None, split: str | None, cfg: Config, *, store: Store) -> TheoremIndex:
    """The theorems `burnqed rl --theorems THEOREMS --split SPLIT` reads (the command and the local runner's reuse
    check alike): `load_index`'s, and without --split the train split of them (the embedded index's without
    --theorems; an index whose theorems name no split: all of them). InputError when the index has splits but no
    train one. Which of them are test or benchmark theorems is `check_rl_theorems`'."""
    index = load_index(theorems, split, None if split else TRAIN_SPLIT, store=store, world_seed=cfg.data.world_seed,
                       world_sketches=cfg.data.world_sketches)
    if theorems is None or split or all(theorem.split is None for theorem in index.theorems):
        return index
    return select_split(index, TRAIN_SPLIT)


def check_rl_theorems(index: TheoremIndex, cfg: Config, *, store: Store) -> str:
    """The `decontamination:` line of RL's theorems (none is a test or benchmark theorem: the index's test split, a
    theorem of what the evals evaluate by name or by statement, `pipeline.benchmark` or the embedded test split);
    InputError naming them when some are (docs/training.md, "GRPO stage")."""
    benchmark = pipeline_benchmark(cfg.pipeline.benchmark, cfg.data.world_seed, store=store,
                                   world_sketches=cfg.data.world_sketches)
    return check_training_theorems("rl", held_out_theorems(index.theorems, benchmark),
                                   len(index.theorems), benchmark)


def check_training_inputs(stage: str, cfg: Config, store: Store, *, data: str | None = None,
                          trajectories: Sequence[str] = ()) -> str:
    """The `decontamination:` line of a training stage's inputs (`sft`, `train-ebm`): the train split of --data's
    theorems.json and the theorems the searches of --trajectories recorded, compared with the benchmark the evals
    evaluate (pipeline.benchmark; unset, the embedded test split): by name, and a data theorem also by statement.
    InputError naming every one that is a test or benchmark theorem (docs/data.md, "Decontamination")."""
    from burnqed.trajectory.reader import read_results

    benchmark = pipeline_benchmark(cfg.pipeline.benchmark, cfg.data.world_seed, store=store,
                                   world_sketches=cfg.data.world_sketches)
    trained: list[Theorem] = []
    if data is not None and store.exists(join(data, THEOREMS_FILE)):
        trained = [theorem for theorem in load_theorem_index(join(data, THEOREMS_FILE), store=store).theorems
                   if theorem.split == "train"]  # what SFT trains on: the train split's pairs and proofs
    searched = [result.name for uri in trajectories for result in read_results(uri, store=store)]
    held = held_out_theorems(trained, benchmark)
    held += [h for h in held_out_names(searched, benchmark) if h.theorem not in {k.theorem for k in held}]
    inputs = " and ".join((["--data"] if data is not None else []) + (["--trajectories"] if trajectories else []))
    compared = len({theorem.name for theorem in trained} | set(searched))
    return check_training_theorems(f"{stage} {inputs}".strip(), held, compared, benchmark)
