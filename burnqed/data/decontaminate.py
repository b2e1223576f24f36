"""One decontamination for every route a benchmark takes into a run: a training statement with the normal form of a
benchmark statement (`leankit.normal_form`: equal up to renaming) leaves training, and the pair is reported as a
`BenchmarkOverlap` whose `route` is `sources`, `pipeline.benchmark` or `eval`.

    twins = Twins([Benchmark(ROUTE_PIPELINE, "MyBench", tuple(index.theorems), uri="MyBench.lean")])
    overlap = twins.overlap(theorem, "lean-workbook")     # the BenchmarkOverlap when it restates one, else None
    check = check_training_data(cfg.policy.model, index, store=store)   # an eval's: None when the model names no data
    held = held_out_theorems(theorems, benchmark)   # what a training stage (rl, sft, train-ebm) must refuse

The routes, and what a training theorem is on each, are docs/data.md's "Decontamination".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from burnqed.data.data_report import BenchmarkOverlap, CheckedBenchmark, TrainingDataCheck, read_report
from burnqed.data.index import load_theorem_index
from burnqed.data.pairs import REPORT_FILE, THEOREMS_FILE
from burnqed.errors import InputError
from burnqed.records.theorem import AnswerTask, Theorem, TheoremIndex
from burnqed.storage import Store, join
from leankit.answer import Slot, answer_slot, inline_answer, inlined
from leankit.normal_form import statement_normal_form, tokenize

HELD_OUT_SPLITS = ("test", "valid")
# Sources that are benchmarks: evaluated, never trained on; their split defaults to test.
BENCHMARK_KINDS = ("benchmark",)
ROUTE_SOURCES = "sources"
ROUTE_PIPELINE = "pipeline.benchmark"
ROUTE_EVAL = "eval"
MAX_HOPS = 4  # export → SFT → prepared data, with room for an SFT output evaluated directly


@dataclass(frozen=True, slots=True)
class Benchmark:
    """The theorems of one benchmark, and the route it arrived by."""

    route: str
    name: str  # its source's label, or the name of its file or index
    theorems: tuple[Theorem, ...]
    uri: str | None = None  # where it was read from (None: a data source, the embedded benchmark)

    def checked(self) -> CheckedBenchmark:
        return CheckedBenchmark(route=self.route, name=self.name, uri=self.uri,
                                theorems=sum(1 for theorem in self.theorems if theorem.statement))


def benchmark_statements(theorem: Theorem) -> list[str]:
    """The statements a training theorem must not restate: the theorem's own, and for an answer-bearing one both
    of its forms (docs/data.md, "Answer-bearing problems"), whichever the index holds: with the slot's name
    (produced) and with the reference answer written in, as `((VALUE) : TYPE)` and as `(VALUE)` (given), so a
    training row that states the answer plainly (`1 + 1 = 2`) restates it too."""
    statement, answer = theorem.statement, theorem.answer
    if not statement:
        return []
    if answer is None:
        return [statement]
    value = answer.value if answer.task is AnswerTask.GIVEN else answer.reference
    if value is None:
        return [statement]
    if answer.task is AnswerTask.GIVEN:  # the produced form: the written answer back to the slot's name
        produced = statement.replace(inlined(value, answer.type), answer.name)
    else:
        produced = statement
    slot = answer_slot(f"abbrev {answer.name} : {answer.type} := sorry", produced)
    if slot is None:
        return [statement]
    forms = [produced, inline_answer(produced, slot, value), _inline_bare(produced, slot, value)]
    return list(dict.fromkeys(forms))


def _inline_bare(statement: str, slot: Slot, value: str) -> str:
    """`statement` with the slot's name written `(VALUE)`, no type ascription."""
    ascribed = inline_answer(statement, slot, value)
    return ascribed.replace(inlined(value, slot.type), f"({' '.join(value.split())})")


def numerals(statement: str) -> tuple[str, ...]:
    """The numbers of a statement's tokens, sorted: the normal form keeps every number as written (it renames names
    and drops parentheses), so two statements with one normal form have the same numerals. Reading them costs about
    a quarter of the normal form: `Twins` forms only the statements whose numerals some benchmark statement has."""
    return tuple(sorted(token for token in tokenize(statement) if token[0].isdigit()))


class Twins:
    """Benchmark statements by normal form: the first benchmark theorem of each form, in the order given (so a
    benchmark listed earlier names the overlap when two restate one statement)."""

    def __init__(self, benchmarks: Iterable[Benchmark]) -> None:
        self.benchmarks = list(benchmarks)
        self.by_form: dict[str, tuple[Theorem, Benchmark]] = {}
        self.numerals: set[tuple[str, ...]] = set()
        for benchmark in self.benchmarks:
            for theorem in benchmark.theorems:
                for statement in benchmark_statements(theorem):
                    self.by_form.setdefault(statement_normal_form(statement), (theorem, benchmark))
                    self.numerals.add(numerals(statement))

    def overlap(self, training: Theorem, training_source: str) -> BenchmarkOverlap | None:
        """`training` with the benchmark theorem whose statement it restates, or None when it restates none."""
        if not self.by_form or not training.statement or numerals(training.statement) not in self.numerals:
            return None
        found = self.by_form.get(statement_normal_form(training.statement))
        if found is None:
            return None
        theorem, benchmark = found
        return BenchmarkOverlap(
            training=training.name, training_source=training_source, benchmark=theorem.name,
            benchmark_source=benchmark.name, benchmark_split=theorem.split or "test",
            statement=training.statement, route=benchmark.route,
        )


def training_data_of(model: str | None, *, store: Store) -> str | None:
    """The prepared data the model at `model` was trained on, as the completion markers record it: an export's
    marker names its SFT output (`--sft`), an SFT output's its prepared data (`--data`). None when the model
    records none (a hub model, the untrained base, a served name, an output made by an older burnqed)."""
    uri = model
    for _ in range(MAX_HOPS):
        if not uri:
            return None
        try:
            marker = store.read_marker(uri)
        except (InputError, OSError, ValueError):
            return None
        if marker is None or marker.made_from is None:
            return None
        if marker.stage == "prepare-data":
            return uri
        inputs = marker.made_from.inputs
        if "--data" in inputs:
            return inputs["--data"].uri
        uri = inputs["--sft"].uri if "--sft" in inputs else None
    return None


def check_training_data(model: str | None, index: TheoremIndex, *, store: Store) -> TrainingDataCheck | None:
    """The training theorems of the data `model` was trained on (`training_data_of`) that restate a theorem of
    `index` (route `eval`); None when the model names no data or its theorems.json does not exist."""
    data = training_data_of(model, store=store)
    if data is None or not store.exists(join(data, THEOREMS_FILE)):
        return None
    held_by_benchmarks: set[str] = set()
    if store.exists(join(data, REPORT_FILE)):
        report = read_report(data, store=store)
        held_by_benchmarks = {source.name for source in report.sources if source.kind in BENCHMARK_KINDS}
    training = [theorem for theorem in load_theorem_index(join(data, THEOREMS_FILE), store=store).theorems
                if not (theorem.split == "test" or (theorem.split == "valid" and theorem.source in held_by_benchmarks))]
    twins = Twins([Benchmark(ROUTE_EVAL, index.name, tuple(index.theorems))])
    overlaps = [overlap for theorem in training
                if (overlap := twins.overlap(theorem, theorem.source or "")) is not None]
    return TrainingDataCheck(data=data, training_theorems=len(training), overlaps=overlaps)


def check_lines(check: TrainingDataCheck | None, limit: int = 20) -> list[str]:
    """What an eval says about its model's training data: nothing when the model names none; else how many of the
    data's training theorems were compared and each one that restates a benchmark theorem."""
    if check is None:
        return []
    if not check.overlaps:
        return [f"decontamination: none of the {check.training_theorems} training theorems of {check.data} (the "
                "model's training data) restates a theorem of this benchmark"]
    lines = [f"warning: decontamination: {len(check.overlaps)} of the {check.training_theorems} training theorems of "
             f"{check.data} (the model's training data) restate a theorem of this benchmark; prepare the data with "
             "the benchmark as pipeline.benchmark (or a benchmark source) to drop them:"]
    lines += [f"  {o.benchmark} = {o.training} ({o.training_source})" for o in check.overlaps[:limit]]
    if len(check.overlaps) > limit:
        lines.append(f"  … {len(check.overlaps) - limit} more (eval.json's training_check lists them all)")
    return lines


# ------------------------------------------------------------------------------------- training stages' inputs

MAX_HELD_NAMED = 8  # held-out theorems a refusal names before "… and N more"


@dataclass(frozen=True, slots=True)
class HeldOut:
    """A theorem a training stage was given that never trains, and why: its index's `test` split, a theorem of the
    benchmark by name, or a statement with the normal form of one of the benchmark's."""

    theorem: str
    why: str


def held_out_theorems(theorems: Sequence[Theorem], benchmark: Benchmark) -> list[HeldOut]:
    """The theorems of `theorems` that are test or benchmark theorems (`HeldOut`), in their order: split `test`, a
    name of `benchmark` (what the evals evaluate: `theorems.pipeline_benchmark`), or a statement restating one of its
    statements (`Twins`, the normal form `data prepare` drops by)."""
    names = {theorem.name for theorem in benchmark.theorems}
    twins = Twins([benchmark])
    held: list[HeldOut] = []
    for theorem in theorems:
        if theorem.split == "test":
            held.append(HeldOut(theorem.name, "test split"))
        elif theorem.name in names:
            held.append(HeldOut(theorem.name, f"a theorem of {benchmark.name}"))
        elif (overlap := twins.overlap(theorem, theorem.source or "")) is not None:
            held.append(HeldOut(theorem.name, f"restates {overlap.benchmark} of {benchmark.name}"))
    return held


def held_out_names(names: Iterable[str], benchmark: Benchmark) -> list[HeldOut]:
    """The names among `names` (the theorems a trajectory searched) that are theorems of `benchmark`, each once."""
    theirs = {theorem.name for theorem in benchmark.theorems}
    return [HeldOut(name, f"a theorem of {benchmark.name}") for name in dict.fromkeys(names) if name in theirs]


def check_training_theorems(what: str, held: Sequence[HeldOut], compared: int, benchmark: Benchmark) -> str:
    """The `decontamination:` line of a training stage that compared `compared` training theorems with `benchmark`;
    InputError naming the held-out ones (one line, the first `MAX_HELD_NAMED`) when there is any: `what` says which
    input of which stage (`rl --theorems`, `sft --trajectories`)."""
    if held:
        named = ", ".join(f"{h.theorem} ({h.why})" for h in held[:MAX_HELD_NAMED])
        more = f" and {len(held) - MAX_HELD_NAMED} more" if len(held) > MAX_HELD_NAMED else ""
        raise InputError(f"{what}: {len(held)} of its {compared} theorems are test or benchmark theorems, which never "
                         f"train: {named}{more}")
    return (f"decontamination: {what}: none of its {compared} theorems is a test or benchmark theorem (compared with "
            f"{benchmark.name}, {len(benchmark.theorems)} theorems)")
