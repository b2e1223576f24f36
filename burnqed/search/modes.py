"""One theorem, any search mode: the `Mode` of each mode (`burnqed.search.mode`), their registry and the call that
runs one.

    outcome = await prove_theorem(theorem, lean, policy, settings, guard, value)
    mode = MODES[search.mode]; settings = mode.settings(Sections(search, policy))     # what the stages ask

`STEP` runs step-level best-first search (`burnqed.search.step`), `WHOLE` whole-proof pass@N (`burnqed.search.whole`),
`HYBRID` hybrid search (`burnqed.search.hybrid`), `SKETCH` sketch search (`burnqed.search.sketching`; its
`planner`, None: the policy plans too). Each builds its engine's settings from the
config sections field by field, and says its budget and unit, its prompt format, the theorems it refuses, the part
of eval's record it writes and what a job or a pass attaches. Whole mode has no use for the value model. A new mode:
its module (settings, engine, its `Mode`), its line in `MODES`, its settings in `SearchSettings`, and its name in
`records.enums.SearchMode` (with its unit, `EXPANSION_MODES`, when it counts expansions); its search and eval
identities are the keys its settings read (`Mode.reads`), no mark to add.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from burnqed.config import PolicyConfig, SearchConfig
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.policy.base import Policy
from burnqed.records.enums import SearchMode
from burnqed.records.theorem import Theorem
from burnqed.search.answer import open_answer_refusal
from burnqed.search.hybrid import HybridSearch
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.lemmas import LibrarySource
from burnqed.search.mode import Engine, Mode, Recorded, Sections, complete, policy_sampling, sampling_from_config
from burnqed.search.repair import RepairSettings
from burnqed.search.sketch_settings import UNBOUNDED_PROOFS, SketchSettings, elaborates_sketches, subgoal_budget
from burnqed.search.sketching import SketchSearch
from burnqed.search.step import SearchOutcome, StepSearch, StepSettings
from burnqed.search.subgoal_cache import SubgoalCache
from burnqed.search.trie import Priority
from burnqed.search.value import ValueFn
from burnqed.search.whole import WholeSearch, WholeSettings
from burnqed.text.prompt import PromptFormat, repair_format, stop_strings


def _repair(search: SearchConfig, policy: PolicyConfig) -> RepairSettings:
    """search.repair_*: revisions of failed proofs, in the whole format's repair variant."""
    return RepairSettings(rounds=search.repair_rounds, message_tokens=search.repair_message_tokens,
                          fmt=repair_format(policy.prompt_format, cot=policy.cot), cut=search.repair_cut_at_error)


def _repair_record(repair: RepairSettings, common: dict[str, Any]) -> dict[str, Any]:
    return {**common, "repair_rounds": repair.rounds, "repair_message_tokens": repair.message_tokens if repair.on
            else None, "repair_cut_at_error": repair.cut if repair.on else None}


# ------------------------------------------------------------------------------------------------------ step


def _step_settings(sections: Sections, budget: int, fmt: PromptFormat) -> StepSettings:
    search = sections.search
    return _step(sections, budget, fmt, search.repair_message_tokens if search.repair_rounds > 0 else None)


def _step(sections: Sections, budget: int, fmt: PromptFormat, feedback_tokens: int | None) -> StepSettings:
    """Step settings at `budget`, keeping Lean's messages on a rejected tactic at `feedback_tokens` (None: not)."""
    search, policy = sections.search, sections.policy
    return complete(
        StepSettings, fmt=fmt, form=policy.declaration_form, sampling=sampling_from_config(policy, fmt),
        max_nodes=budget, max_depth=search.max_depth, timeout_s=search.timeout_s, alpha=search.alpha,
        expand_batch=search.expand_batch, probe_tactics=tuple(search.probe_tactics), probe_logprob=search.probe_logprob,
        verify=sections.verified, stop_at_first=search.stop_at_first, value_weight=search.value_weight,
        value_ramp_depth=search.value_ramp_depth, value_reference=search.value_reference, speculate=search.speculate,
        revisits=search.revisits, revisit_penalty=search.revisit_penalty,
        revisit_temperature=search.revisit_temperature, marks=sections.marks, seed=policy.seed,
        feedback_tokens=feedback_tokens)


def _step_record(settings: StepSettings, common: dict[str, Any], recorded: Recorded) -> dict[str, Any]:
    return {**common, "num_candidates": settings.sampling.n, "max_new_tokens": settings.sampling.max_new_tokens}


def _step_subgoal(sections: Sections) -> StepSettings:
    """Step search as a sketch's subgoal search: one expansion's budget until the sketch gives it its share."""
    return _step(sections, 1, STEP.fmt(sections.policy), None)


STEP = Mode(
    name=SearchMode.STEP, settings_type=StepSettings, unit="expansions", budget=lambda search: search.max_nodes,
    build=_step_settings, record=_step_record,
    engine=lambda theorem, lean, policy, settings, guard, value, _: StepSearch(theorem, lean, policy, settings, guard,
                                                                               value),
    refusal=lambda theorem: open_answer_refusal(theorem, SearchMode.STEP, "tactics"),
    as_subgoal=_step_subgoal)


# ----------------------------------------------------------------------------------------------------- whole


def _whole_settings(sections: Sections, budget: int, fmt: PromptFormat) -> WholeSettings:
    search, policy = sections.search, sections.policy
    sampling = policy_sampling(policy, n=search.num_proofs, max_new_tokens=search.proof_max_tokens,
                               stop=stop_strings(fmt))
    return complete(WholeSettings, fmt=fmt, form=policy.declaration_form, sampling=sampling, max_proofs=budget,
                    timeout_s=search.timeout_s, stop_at_first=search.stop_at_first, marks=sections.marks,
                    seed=policy.seed, repair=_repair(search, policy))


def _whole_record(settings: WholeSettings, common: dict[str, Any], recorded: Recorded) -> dict[str, Any]:
    return {**_repair_record(settings.repair, common), "num_candidates": settings.sampling.n,
            "max_new_tokens": settings.sampling.max_new_tokens, "verify": True}


WHOLE = Mode(
    name=SearchMode.WHOLE, settings_type=WholeSettings, unit="proofs", budget=lambda search: search.max_proofs,
    build=_whole_settings, record=_whole_record,
    engine=lambda theorem, lean, policy, settings, guard, value, _: WholeSearch(theorem, lean, policy, settings,
                                                                                guard))


# ---------------------------------------------------------------------------------------------------- hybrid


def _hybrid_settings(sections: Sections, budget: int, fmt: PromptFormat) -> HybridSettings:
    search = sections.search
    return _hybrid(sections, fmt, max_proofs=budget, max_rounds=search.max_rounds,
                   repair=_repair(search, sections.policy))


def _hybrid(sections: Sections, fmt: PromptFormat, *, max_proofs: int, max_rounds: int,
            repair: RepairSettings) -> HybridSettings:
    """Hybrid settings at these budgets and this repair."""
    search, policy = sections.search, sections.policy
    sampling = policy_sampling(policy, n=search.num_proofs, max_new_tokens=search.proof_max_tokens,
                               stop=stop_strings(fmt))
    return complete(
        HybridSettings, fmt=fmt, form=policy.declaration_form, sampling=sampling, num_proofs=search.num_proofs,
        min_proofs=search.min_proofs, max_tokens=search.proof_max_tokens, min_tokens=search.proof_min_tokens,
        decay_depth=search.decay_depth, max_proofs=max_proofs, max_rounds=max_rounds, max_depth=search.max_depth,
        timeout_s=search.timeout_s,
        priority=Priority(alpha=search.prior_weight, exploration=search.exploration, goal_penalty=search.goal_penalty,
                          value_weight=search.value_weight, value_ramp_depth=search.value_ramp_depth),
        verify=sections.verified, stop_at_first=search.stop_at_first, marks=sections.marks, seed=policy.seed,
        repair=repair, answer_fmt=WHOLE.fmt(policy))


def _hybrid_record(settings: HybridSettings, common: dict[str, Any], recorded: Recorded) -> dict[str, Any]:
    return {**_repair_record(settings.repair, common), "num_candidates": settings.num_proofs,
            "max_new_tokens": settings.max_tokens}


def _hybrid_subgoal(sections: Sections) -> HybridSettings:
    """Hybrid search as a sketch's subgoal search: proofs unbounded and one round until the sketch gives it its
    share, no repair (the sketch decides)."""
    return _hybrid(sections, HYBRID.fmt(sections.policy), max_proofs=UNBOUNDED_PROOFS, max_rounds=1,
                   repair=RepairSettings())


HYBRID = Mode(
    name=SearchMode.HYBRID, settings_type=HybridSettings, unit="proofs", budget=lambda search: search.max_proofs,
    build=_hybrid_settings, record=_hybrid_record,
    engine=lambda theorem, lean, policy, settings, guard, value, _: HybridSearch(theorem, lean, policy, settings,
                                                                                 guard, value),
    attach=lambda settings, journal, _: dataclasses.replace(settings, journal=journal),
    as_subgoal=_hybrid_subgoal)


# ---------------------------------------------------------------------------------------------------- sketch

# Set per subgoal by the sketch search (its share, the time left, no repair), or the planner's: left out of the
# subgoal engine's record.
_PER_SUBGOAL = frozenset({"max_nodes", "max_proofs", "timeout_s", "stop_at_first", "verify", "prompt_format",
                          "repair_rounds", "repair_message_tokens", "repair_cut_at_error", "num_candidates",
                          "max_new_tokens"})


def _subgoal(sections: Sections) -> StepSettings | HybridSettings:
    """The settings a sketch's subgoals are searched with, in search.sketch_subgoal_mode: that mode's, but the budget
    and the repair, which the sketch decides (`subgoal_budget`: the share of its budget, no repair), so that what the
    sketch reads of the sections is what its subgoals' searches use (`Mode.reads`)."""
    build = SUBGOAL_MODES[sections.search.sketch_subgoal_mode].as_subgoal
    assert build is not None  # SUBGOAL_MODES holds the modes that have one
    return build(sections)


def _sketch_settings(sections: Sections, budget: int, fmt: PromptFormat) -> SketchSettings:
    """The planner's format (`PlannerConfig.sent_format`, not `fmt`) and sampling, the subgoal mode's settings."""
    search, policy, planner = sections.search, sections.policy, sections.planner
    sent = planner.sent_format(policy.prompt_format)
    subgoal = _subgoal(Sections(search, policy, planner, verify=True))  # sketch mode refuses search.verify=false
    sampling = policy_sampling(planner.sampling_section(policy), n=search.sketch_plans,
                               max_new_tokens=planner.max_new_tokens, stop=stop_strings(sent))
    grammar = planner.grammar(sections.max_text_chars)  # planner.constrained: only sketches can be sampled
    if grammar is not None:
        sampling = dataclasses.replace(sampling, ebnf=grammar.ebnf)
    sketch = complete(SketchSettings, fmt=sent, form=policy.declaration_form, sampling=sampling, subgoal=subgoal,
                      max_nodes=budget, sketch_rounds=search.sketch_rounds,
                      sketch_subgoal_share=search.sketch_subgoal_share, timeout_s=search.timeout_s,
                      stop_at_first=search.stop_at_first, marks=sections.marks, seed=policy.seed,
                      subgoal_cache_replays=search.subgoal_cache_replays, sketch_depth=search.sketch_depth,
                      share_goals=True)  # share_goals: off only in benchmarks/sketch_depth.py's tree arm
    # A subgoal's search may spend its share of the theorem's budget (less when less is left): `subgoal_budget`.
    return dataclasses.replace(sketch, subgoal=subgoal_budget(subgoal, sketch.share))


def _sketch_engine(theorem: Theorem, lean: LeanEnv, policy: Policy, settings: SketchSettings, guard: TacticGuard,
                   value: ValueFn | None, planner: Policy | None) -> Engine:
    if not elaborates_sketches(lean):
        raise TypeError(f"sketch mode needs a Lean environment that elaborates sketches (SketchEnv), got "
                        f"{type(lean).__name__}")
    return SketchSearch(theorem, lean, policy, settings, guard, value, planner=planner)


def _sketch_record(settings: SketchSettings, common: dict[str, Any], recorded: Recorded) -> dict[str, Any]:
    """The planner's sampling; the subgoal engine's settings beside it."""
    subgoal = recorded(settings.subgoal)
    return {**{k: v for k, v in subgoal.items() if k not in _PER_SUBGOAL}, **common,
            "num_candidates": settings.sampling.n, "max_new_tokens": settings.sampling.max_new_tokens,
            "verify": True, "sketch_subgoal_mode": mode_of(settings.subgoal).name.value,
            "subgoal_num_candidates": subgoal["num_candidates"], "subgoal_max_new_tokens": subgoal["max_new_tokens"]}


def _sketch_pass(settings: SketchSettings, k: int) -> SketchSettings:
    """Eval's pass k in sketch mode: its own seeds, subgoal cache and lemma source (a library's source read afresh
    over the same frozen entries: `LibrarySource.fresh`), so the passes stay independent searches."""
    lemmas = settings.lemmas.fresh() if isinstance(settings.lemmas, LibrarySource) else settings.lemmas
    return dataclasses.replace(settings, attempt=k, cache=SubgoalCache(), lemmas=lemmas)


SKETCH = Mode(
    name=SearchMode.SKETCH, settings_type=SketchSettings, unit="expansions",  # planner requests + subgoal units
    budget=lambda search: search.max_nodes, build=_sketch_settings, engine=_sketch_engine, record=_sketch_record,
    refusal=lambda theorem: open_answer_refusal(theorem, SearchMode.SKETCH, "a sketch"),
    attach=lambda settings, _, cache: settings if cache is None else dataclasses.replace(settings, cache=cache),
    # a pass's own seeds and a subgoal cache of its own: the passes of pass@n stay independent searches
    for_pass=_sketch_pass,
    cache=lambda settings: settings.cache, lemmas=lambda settings: settings.lemmas, plans=True,
    caches_subgoals=True)


# -------------------------------------------------------------------------------------------------- registry

MODES: dict[SearchMode, Mode[Any]] = {mode.name: mode for mode in (
    STEP,
    WHOLE,
    HYBRID,
    SKETCH,
)}
# the modes a sketch's subgoals may be searched in, by search.sketch_subgoal_mode's names
SUBGOAL_MODES: dict[str, Mode[StepSettings] | Mode[HybridSettings]] = {
    mode.name.value: mode for mode in MODES.values() if mode.as_subgoal is not None}
SearchSettings = StepSettings | WholeSettings | HybridSettings | SketchSettings
_BY_SETTINGS: dict[type[Any], Mode[Any]] = {mode.settings_type: mode for mode in MODES.values()}


def mode_of(settings: Any) -> Mode[Any]:
    """The mode whose engine `settings` are for."""
    return _BY_SETTINGS[type(settings)]


def mode_refusal(theorem: Theorem, mode: SearchMode) -> str | None:
    """Why `mode` does not search `theorem` (one line, said before any work), or None (`Mode.refusal`)."""
    return MODES[mode].refusal(theorem)


async def prove_theorem(
    theorem: Theorem,
    lean: LeanEnv,
    policy: Policy,
    settings: SearchSettings,
    guard: TacticGuard,
    value: ValueFn | None = None,
    *,
    planner: Policy | None = None,
) -> SearchOutcome:
    """Search one theorem in the mode its settings are for; never raises for domain failures. A theorem the mode
    refuses (`Mode.refusal`) is a ValueError: the stages leave such theorems out before any work. `planner` writes
    sketch mode's sketches (None: the policy)."""
    mode = mode_of(settings)
    refusal = mode.refusal(theorem)
    if refusal is not None:
        raise ValueError(f"{mode.name} mode does not search {theorem.name}: {refusal}")
    return await mode.engine(theorem, lean, policy, settings, guard, value, planner).run()
