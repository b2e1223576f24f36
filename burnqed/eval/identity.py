"""What an eval is: the settings the eval stage reads from the configuration (`EvalJobSettings`, its budgets:
`parse_budgets`, `eval_budgets`), the theorems a mode evaluates (`evaluable`) and the identity each pass prefix
records before its first search (`EvalIdentity`, `_EVAL.json`), which a resume must match (`eval.resume`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from burnqed.config import Config, PipelineConfig
from burnqed.config.identity import default_values, identity_values
from burnqed.config.search import MAX_BUDGET
from burnqed.errors import InputError
from burnqed.eval.metadata import config_digest
from burnqed.eval.pass_at import validate_budgets
from burnqed.lean.backend import lean_backend_label
from burnqed.lean.comparator import ComparatorSettings
from burnqed.provenance import IDENTITY_NAME, StageInputs
from burnqed.records.enums import SearchMode
from burnqed.records.theorem import SkippedDeclaration, Theorem, TheoremIndex
from burnqed.search.judge import JudgeSettings
from burnqed.search.modes import MODES
from burnqed.stages.search import JobSettings
from burnqed.storage import Store, is_remote, join, normalize

log = logging.getLogger(__name__)


OPEN_ANSWER = "open_answer"  # a not-evaluated theorem's reason: its answer is open and the mode cannot produce it


@dataclass(frozen=True, slots=True)
class EvalJobSettings:
    """What the eval stage reads from the configuration, built once by the command layer
    (`EvalJobSettings.from_config`): the search job's settings at the eval's budgets, and the facts its result
    records."""

    budgets: tuple[int, ...]  # sorted, distinct (validated)
    job: JobSettings  # search settings with the largest budget, usage marked at every budget, verify=True
    backend: str  # policy.backend
    seed: int | None  # policy.seed (None: unseeded)
    lean_backend: str  # lean_backend_label(lean.command)
    config_digest: str  # of the whole configuration the eval ran with
    identity: dict[str, object]  # search_identity(config, "eval"): the keys that shape its results, by value
    judge: JudgeSettings = dataclasses.field(default_factory=JudgeSettings)  # who has the last word (lean.judge)

    @classmethod
    def from_config(cls, config: Config, budgets: Sequence[int], *, defer_judge: bool = False) -> EvalJobSettings:
        """The eval's settings; warns that search.verify=false does not apply here (eval compiles every proof it
        counts). `defer_judge`: comparator judges in a later step (`search.judge.JudgeSettings.of`). `ValueError`
        unless the budgets are non-empty, positive, unique and ascending."""
        budgets = validate_budgets(budgets)
        if not config.search.verify:
            log.warning("eval compiles every proof it counts: search.verify=false is ignored here")
        return cls(
            budgets=tuple(budgets),
            job=JobSettings.from_config(config.search, config.policy, config.lean, budgets[-1], marks=budgets,
                                        planner=config.planner,
                                        verify=True),
            backend=config.policy.backend,
            seed=config.policy.seed,
            lean_backend=lean_backend_label(config.lean.command),
            config_digest=config_digest(config),
            identity=search_identity(config, "eval"),
            judge=JudgeSettings.of(config.lean.judged_by(), ComparatorSettings.of(config.lean),
                                   lean_backend_label(config.lean.command), deferred=defer_judge),
        )


def theorem_digest(theorems: Sequence[Theorem]) -> str:
    """SHA-256 of the theorems as the stage reads them, in order: a theorem set by content. Each entry is its index
    record as read (`records.theorem.Theorem.record`: name, statement, signature, header, docstring, source, split,
    answer slot), so a header, a docstring or an answer that changes changes the set."""
    digest = hashlib.sha256()
    for theorem in theorems:
        digest.update(theorem.record.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def evaluable(index: TheoremIndex, mode: SearchMode) -> TheoremIndex:
    """`index` less the theorems `mode` refuses (`Mode.refusal`: step and sketch mode, an open answer), each moved
    to `skipped` with its reason, so the eval lists it as not evaluated and leaves it out of every rate. The same
    index when the mode refuses none."""
    refused = [(theorem, why) for theorem in index.theorems if (why := MODES[mode].refusal(theorem)) is not None]
    if not refused:
        return index
    names = {theorem.name for theorem, _ in refused}
    skipped = [SkippedDeclaration(name=theorem.name, file=theorem.source or index.name, line=None,
                                  reason=OPEN_ANSWER, detail=why, split=theorem.split) for theorem, why in refused]
    return TheoremIndex(name=index.name, theorems=[t for t in index.theorems if t.name not in names],
                        skipped=[*index.skipped, *skipped])


def search_identity(config: Config, stage: Literal["search", "eval"]) -> dict[str, object]:
    """The configuration keys that shape what `stage` finds in `search.mode`, by value (`config.identity`: the keys
    whose mark names the stage, those marked `read_by_mode` when the mode reads them, `Mode.reads`), with
    `policy.prompt_format` as the format the mode sends."""
    identity = identity_values(config, stage, MODES[config.search.mode].reads())
    return {**identity, "policy.prompt_format": str(MODES[config.search.mode].fmt(config.policy))}


def parse_budgets(text: str) -> list[int]:
    """`--budgets`: comma-separated whole numbers from 1 to `MAX_BUDGET` (ASCII digits; spaces around them are
    fine), returned sorted and without repeats (they are rungs of one search); InputError naming the bad part."""
    budgets = []
    for part in text.split(","):
        if re.fullmatch(r"\s*-?[0-9]+\s*", part) is None:
            shown = f"{part.strip()!r} is not a whole number" if part.strip() else "a budget is missing"
            raise InputError(f"--budgets {text!r}: {shown}; give comma-separated budgets, e.g. 100,300,600")
        budget = int(part)
        if not 1 <= budget <= MAX_BUDGET:
            raise InputError(f"--budgets {text!r}: {budget} is out of range; a budget is 1 to {MAX_BUDGET:,} "
                             "(expansions or proofs), e.g. 100,300,600")
        budgets.append(budget)
    return sorted(set(budgets))


def eval_budgets(text: str | None, pipeline: PipelineConfig) -> list[int]:
    """The budgets of `burnqed eval --budgets TEXT`; without it `pipeline.eval_budgets`, the budgets `burnqed
    iterate` evaluates at (one default for a user's eval and the iteration's)."""
    return parse_budgets(text) if text is not None else list(pipeline.eval_budgets)


class EvalIdentity(BaseModel):
    """What makes an eval's results comparable: the theorem set, the budgets and mode, and the settings that change
    what a search finds. Recorded in every pass prefix (`_EVAL.json`) before the first search; a resume must match
    it field by field (`describe_difference`). Worker counts and concurrency are not part of it: a resume may
    use more or fewer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str = Field(description="The theorem index' name.")
    theorems: int = Field(ge=0, description="How many theorems the benchmark has.")
    theorem_digest: str = Field(description="SHA-256 of the theorems' index records as read, in order "
                                "(`theorem_digest`).")
    mode: str = Field(description="search.mode.")
    budgets: list[int] = Field(description="The budgets scored.")
    pass_n: int = Field(ge=1, description="Independent searches per theorem.")
    iteration: int = Field(ge=0, description="--iter.")
    ebm: str | None = Field(description="The value model, if any.")
    seed: int | None = Field(description="policy.seed.")
    lean_backend: str = Field(description="The Lean backend label.")
    search: dict[str, object] = Field(description="The configuration keys that shape what the eval finds in its "
                                      "mode, by value (search_identity).")
    not_evaluated: list[str] = Field(default_factory=list, description="The benchmark's declarations that are none "
                                     "of its theorems, `WHERE: REASON` each (what the result lists as not evaluated; "
                                     "not compared on resume, where the result lists them afresh).")

    @classmethod
    def of(cls, index: TheoremIndex, settings: EvalJobSettings, *, pass_n: int, iteration: int,
           ebm: str | None) -> EvalIdentity:
        """The identity of an eval of `index` with `settings` (a value model at a local path as its absolute URI,
        so that the same folder named from another working folder is the same). The theorems the mode refuses
        (`evaluable`) are among the declarations not evaluated."""
        index = evaluable(index, settings.job.mode)
        return cls(benchmark=index.name, theorems=len(index.theorems), theorem_digest=theorem_digest(index.theorems),
                   mode=str(settings.job.mode), budgets=list(settings.budgets), pass_n=pass_n, iteration=iteration,
                   ebm=_recorded_path(ebm), seed=settings.seed, lean_backend=settings.lean_backend,
                   search=settings.identity,
                   not_evaluated=[f"{skipped.where}: {skipped.reason}" for skipped in index.skipped])

    def describe_difference(self, other: EvalIdentity) -> str | None:
        """The first field where `other` (this run) differs from `self` (the interrupted run), or None. A search key
        `self` lacks (recorded before it entered eval's identity) is compared with its default
        (`provenance.StageInputs.difference`)."""
        mine, theirs = self.model_dump(mode="json"), other.model_dump(mode="json")
        for key in ("benchmark", "theorems", "theorem_digest", "mode", "budgets", "pass_n", "iteration", "ebm",
                    "seed", "lean_backend"):
            if mine[key] != theirs[key]:
                if key == "theorem_digest":
                    return "the theorem set differs (same name and count, other theorems or statements)"
                return f"{key} was {mine[key]!r}, now {theirs[key]!r}"
        return StageInputs(settings=mine["search"]).difference(StageInputs(settings=theirs["search"],
                                                                           defaults=default_values(Config)))


def _recorded_path(uri: str | None) -> str | None:
    """`uri` as an identity records it: a local path that exists as its absolute file:// URI, else as given."""
    if uri is None or is_remote(uri) or not Path(uri.removeprefix("file://")).expanduser().exists():
        return uri
    return normalize(uri)


def read_identity(uri: str, *, store: Store) -> EvalIdentity | None:
    """The identity recorded under the pass prefix `uri`, or None when there is none."""
    path = join(uri, IDENTITY_NAME)
    if not store.exists(path):
        return None
    return store.read_model(path, EvalIdentity, "eval identity")


def record_identity(uri: str, identity: EvalIdentity, *, store: Store) -> None:
    """Write `identity` under `uri` (after `resume_state` accepted it: the same as the one there, if any)."""
    store.write_bytes(join(uri, IDENTITY_NAME), identity.model_dump_json(indent=1).encode())
