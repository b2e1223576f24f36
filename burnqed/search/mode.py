"""What a search mode is: one `Mode` object per mode (`burnqed.search.modes.MODES`, keyed by `search.mode`) says
everything the stages ask of it, and the engine it builds runs one theorem (`Engine.run`).

    mode = MODES[search.mode]
    settings = mode.settings(Sections(search, policy, planner, budget=64, marks=(8, 64), verify=True))
    outcome = await mode.engine(theorem, lean, policy, settings, guard, value, None).run()
    outcome.units                                   # what it spent, in `mode.unit`

A `Mode` is plain data: its name, its unit, and the functions that answer for it (no class to inherit; the defaults
are a mode that refuses no theorem, attaches nothing, gives a pass only its seeds and holds no subgoal cache).
A mode's settings are built from the config explicitly, field by field (`complete`: every field of the engine's
settings given, but the ones a stage attaches); nothing is copied from the `[search]` section by its name. Adding a
mode is one module (its settings, its engine, its `Mode`) and one line of the registry (`modes.MODES`), with its
name in `records.enums.SearchMode`. Also here: the policy's sampling as the `[policy]` section says.

    sampling = policy_sampling(policy, n=search.num_proofs, max_new_tokens=search.proof_max_tokens, stop=stop)
    sampling = sampling_from_config(policy, fmt)    # one step-mode expansion
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from burnqed.config import PlannerConfig, PolicyConfig, SearchConfig
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.policy.base import Policy, Sampling
from burnqed.records.enums import SearchMode
from burnqed.records.theorem import Theorem
from burnqed.search.goal_keys import LemmaSource
from burnqed.search.journal import RoundJournal
from burnqed.search.reads import recorded_reads
from burnqed.search.skeleton import SearchOutcome
from burnqed.search.subgoal_cache import SubgoalCache
from burnqed.search.value import ValueFn
from burnqed.text.prompt import PromptFormat, format_for, stop_strings

S = TypeVar("S")
E = TypeVar("E")
BudgetUnit = Literal["expansions", "proofs"]  # what a mode's budget counts (eval's `budget_unit`)
# The fields of an engine's settings that no mode builds from the configuration: the stage running the engine attaches
# them (`attempt`: eval's pass k, `Mode.for_pass`; `journal`, `cache`: `Mode.attach`, per job; `lemmas`: sketch's
# lemma library, per job). `complete` refuses settings built without any other field.
ATTACHED = ("attempt", "journal", "cache", "lemmas")
Recorded = Callable[[Any], dict[str, Any]]  # the eval record's settings of an engine's settings (a sketch's subgoals)


@dataclass(frozen=True, slots=True)
class Sections:
    """What a mode's settings are built from: the `[search]`, `[policy]` and `[planner]` sections, and what the
    stage sets over them: `budget` (None: the mode's own, `Mode.budget`), the budgets to record usage at (`marks`),
    `verify` (None: search.verify; eval always compiles) and `max_text_chars` (lean.max_text_chars)."""

    search: SearchConfig
    policy: PolicyConfig
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    budget: int | None = None
    marks: tuple[int, ...] = ()
    verify: bool | None = None
    max_text_chars: int = 100_000  # lean.max_text_chars: caps sketch mode's grammar (`PlannerConfig.grammar`)

    @property
    def verified(self) -> bool:
        """Whether closing paths are compiled: the stage's `verify`, else search.verify."""
        return self.search.verify if self.verify is None else self.verify


class Engine(Protocol):
    """One theorem's search, built by its mode (`Mode.engine`); `run()` once, never raising for domain failures."""

    async def run(self) -> SearchOutcome: ...


def no_refusal(theorem: Theorem) -> str | None:
    """A mode that searches every theorem."""
    return None


def nothing_attached(settings: S, journal: RoundJournal, cache: SubgoalCache | None) -> S:
    """A mode whose job attaches nothing to its settings."""
    return settings


def own_seeds(settings: S, k: int) -> S:
    """Eval's pass `k` with its own seeds (`attempt`), nothing else of its own."""
    return dataclasses.replace(settings, attempt=k)  # type: ignore[type-var]


def no_cache(settings: object) -> SubgoalCache | None:
    """A mode without a subgoal cache."""
    return None


def no_lemmas(settings: object) -> LemmaSource | None:
    """A mode without a lemma source."""
    return None


@dataclass(frozen=True, slots=True)
class Mode(Generic[S]):
    """One search mode, as plain data: everything the stages ask of it. `S` is its engine's settings type."""

    name: SearchMode  # search.mode
    settings_type: type[S]
    unit: BudgetUnit  # what its budget counts
    budget: Callable[[SearchConfig], int]  # its budget in the `[search]` section (search.max_nodes, search.max_proofs)
    # its engine's settings from the sections, at a budget, in the prompt format it sends; every field (`complete`)
    build: Callable[[Sections, int, PromptFormat], S]
    # the search of a theorem: (theorem, lean, policy, settings, guard, value, planner: a sketch's, None: the policy)
    engine: Callable[[Theorem, LeanEnv, Policy, S, TacticGuard, ValueFn | None, Policy | None], Engine]
    # the eval record's settings of its run (`eval.result.EvalSettings` fields): what every mode records (`common`)
    # with its own; `Recorded` gives another engine's (a sketch's subgoal engine)
    record: Callable[[S, dict[str, Any], Recorded], dict[str, Any]]
    refusal: Callable[[Theorem], str | None] = no_refusal  # why it does not search a theorem (said before any work)
    attach: Callable[[S, RoundJournal, SubgoalCache | None], S] = nothing_attached  # what a search job attaches
    for_pass: Callable[[S, int], S] = own_seeds  # eval's pass k: whatever keeps the passes independent
    # its settings as a sketch's subgoal search (search.sketch_subgoal_mode names it): its own but the budget and the
    # repair, which the sketch decides (`sketch_settings.subgoal_budget`: a share of its budget, no repair); None: a
    # mode that does not search subgoals
    as_subgoal: Callable[[Sections], S] | None = None
    cache: Callable[[S], SubgoalCache | None] = no_cache  # the subgoal cache its settings carry
    lemmas: Callable[[S], LemmaSource | None] = no_lemmas  # the lemma source its settings carry (a library)
    plans: bool = False  # it asks a planner for sketches (planner.*; a planner's SFT examples)
    caches_subgoals: bool = False  # its searches share a subgoal cache (search.subgoal_cache)
    prompts_as: SearchMode | None = None  # the mode whose prompt format it sends (None: its own)

    @property
    def label(self) -> str:
        """How reports and eval's tables name the mode."""
        return self.name.value

    def fmt(self, policy: PolicyConfig) -> PromptFormat:
        """The prompt format it sends the policy: its variant of policy.prompt_format's family."""
        return format_for(policy.prompt_format, self.prompts_as or self.name, cot=policy.cot)

    def settings(self, sections: Sections) -> S:
        """Its engine's settings, every field from the sections, at the stage's budget or its own."""
        budget = sections.budget if sections.budget is not None else self.budget(sections.search)
        return self.build(sections, budget, self.fmt(sections.policy))

    def reads(self) -> frozenset[str]:
        """The `section.key`s its settings read (`search.reads.recorded_reads`), as the search stage builds them (its
        own budget, search.verify), and, when it plans, those the planner is opened from (`PlannerConfig.served`,
        `PlannerConfig.client_config`): the keys marked `read_by_mode` among them enter its search and eval
        identities (`config.identity.identity_keys`)."""
        return _reads(self)


@functools.cache
def _reads(mode: Mode[Any]) -> frozenset[str]:
    def build(search: SearchConfig, policy: PolicyConfig, planner: PlannerConfig) -> None:
        mode.settings(Sections(search, policy, planner))
        if mode.plans and planner.served:
            planner.client_config(policy)

    return recorded_reads(build, SearchConfig(mode=mode.name), PolicyConfig(), PlannerConfig())


def complete(engine: type[E], **fields: Any) -> E:
    """The settings dataclass `engine` with `fields`, which give every field it declares but the attached ones
    (`ATTACHED`): a field a mode forgets would keep its default whatever the configuration says (TypeError)."""
    missing = sorted({f.name for f in dataclasses.fields(engine)} - set(fields) - set(ATTACHED))  # type: ignore[arg-type]
    if missing:
        raise TypeError(f"{engine.__name__} built without {', '.join(missing)}: each field comes from the "
                        "configuration")
    return engine(**fields)


def policy_sampling(policy: PolicyConfig, *, n: int, max_new_tokens: int, stop: tuple[str, ...]) -> Sampling:
    """`n` samples of at most `max_new_tokens` tokens, ending at `stop`, drawn as the `policy` section says (every
    sampling field of it: none is left to the server's defaults)."""
    return Sampling(
        n=n,
        temperature=policy.temperature,
        top_p=policy.top_p,
        max_new_tokens=max_new_tokens,
        stop=stop,
        top_k=policy.top_k,
        min_p=policy.min_p,
        repetition_penalty=policy.repetition_penalty,
        frequency_penalty=policy.frequency_penalty,
        presence_penalty=policy.presence_penalty,
    )


def sampling_from_config(policy: PolicyConfig, fmt: PromptFormat | None = None) -> Sampling:
    """The sampling parameters of one step-mode expansion, with the format's stop strings."""
    return policy_sampling(policy, n=policy.num_candidates, max_new_tokens=policy.max_new_tokens,
                           stop=stop_strings(fmt or policy.prompt_format))
