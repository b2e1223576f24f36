"""The migrations of the eval result file (eval.json, `eval.result.EvalResult`): one step per schema version, read at
the edge (`EvalResult`'s validation of a document as read), so that a file of every earlier version reads as the
current record. Files of each version are kept in tests/fixtures/eval-results/ and read by tests/eval/test_versions.py.

A change of the format is a new version and one more step in `EVAL_MIGRATIONS`: a field added with a default is
`added(...)`; a configuration key of eval's identity renamed (`search.old` → `search.new`) is
`renamed({"search.old": "search.new"})`, after which a result written before reads, and is
reused, as one recording the new name.
"""

from __future__ import annotations

from typing import Any

from burnqed.records.versions import Migrations, Step, added, rename_keys

# Where an eval result records configuration keys by name: its settings' map and what it is made from.
RECORDED_KEY_MAPS = (("settings", "config"), ("made_from", "settings"))

# Schemas 8 and 9 recorded each configuration key of eval's identity in a field of `settings` named after it (its bare
# name for policy.* and search.*, `section_name` otherwise), and the effective settings in the fields below; each such
# field's key, as it was when those versions were written.
V9_RECORDED_KEYS = {
    "lean_tactic_timeout_s": "lean.tactic_timeout_s", "lean_compile_timeout_s": "lean.compile_timeout_s",
    "lean_automatic_mode": "lean.automatic_mode", "lean_deny": "lean.deny",
    "lean_max_tactic_chars": "lean.max_tactic_chars", "backend": "policy.backend",
    "prompt_format": "policy.prompt_format", "declaration_form": "policy.declaration_form", "cot": "policy.cot",
    "num_candidates": "policy.num_candidates", "temperature": "policy.temperature", "top_p": "policy.top_p",
    "max_new_tokens": "policy.max_new_tokens", "top_k": "policy.top_k", "min_p": "policy.min_p",
    "repetition_penalty": "policy.repetition_penalty", "frequency_penalty": "policy.frequency_penalty",
    "presence_penalty": "policy.presence_penalty", "seed": "policy.seed", "mode": "search.mode",
    "max_depth": "search.max_depth", "timeout_s": "search.timeout_s", "alpha": "search.alpha",
    "expand_batch": "search.expand_batch", "revisits": "search.revisits",
    "revisit_penalty": "search.revisit_penalty", "revisit_temperature": "search.revisit_temperature",
    "probe_tactics": "search.probe_tactics", "probe_logprob": "search.probe_logprob",
    "stop_at_first": "search.stop_at_first", "value_weight": "search.value_weight",
    "value_ramp_depth": "search.value_ramp_depth", "value_reference": "search.value_reference",
    "repair_rounds": "search.repair_rounds", "repair_message_tokens": "search.repair_message_tokens",
    "num_proofs": "search.num_proofs", "proof_max_tokens": "search.proof_max_tokens",
    "repair_cut_at_error": "search.repair_cut_at_error", "min_proofs": "search.min_proofs",
    "proof_min_tokens": "search.proof_min_tokens", "decay_depth": "search.decay_depth",
    "max_rounds": "search.max_rounds", "exploration": "search.exploration", "prior_weight": "search.prior_weight",
    "goal_penalty": "search.goal_penalty", "sketch_rounds": "search.sketch_rounds",
    "sketch_subgoal_mode": "search.sketch_subgoal_mode", "sketch_subgoal_share": "search.sketch_subgoal_share",
    "sketch_plans": "search.sketch_plans", "subgoal_cache_replays": "search.subgoal_cache_replays",
    "planner_backend": "planner.backend", "planner_model": "planner.model",
    "planner_prompt_format": "planner.prompt_format", "planner_temperature": "planner.temperature",
    "planner_top_p": "planner.top_p", "planner_max_new_tokens": "planner.max_new_tokens",
}
V9_ENGINE_FIELDS = (
    "backend", "prompt_format", "num_candidates", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
    "frequency_penalty", "presence_penalty", "max_new_tokens", "max_nodes", "max_proofs", "max_depth", "timeout_s",
    "alpha", "expand_batch", "probe_tactics", "verify", "stop_at_first", "value_weight", "value_ramp_depth",
    "concurrency", "repair_rounds", "repair_message_tokens", "repair_cut_at_error", "sketch_rounds",
    "sketch_subgoal_mode", "sketch_subgoal_share", "subgoal_num_candidates", "subgoal_max_new_tokens",
)


def renamed(renames: dict[str, str]) -> Step:
    """The step of a version that renamed configuration keys of eval's identity (old `section.key` → new): each is
    read under its new name in the settings' map and in what the result is made from (`RECORDED_KEY_MAPS`), so that
    the result compares, and is reused, as one that recorded the new name."""
    return rename_keys(renames, RECORDED_KEY_MAPS)


def settings_as_config(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 10 records the configuration keys in `settings.config` (`section.key` → value): a field of schema 9's
    settings that records a key (`V9_RECORDED_KEYS`) moves there under the key's name, set ones only (unset, None, was
    a key that does not shape the eval's mode); one that is also an effective setting (`temperature`,
    policy.temperature) stays beside it, as the effective settings are those of schema 10. An absent
    `probe_tactics` is the empty list schema 9 read it as."""
    settings = data.get("settings")
    if not isinstance(settings, dict):
        return data
    settings = {**{name: settings.get(name, []) for name in V9_ENGINE_FIELDS
                   if name in settings or name == "probe_tactics"}, **settings}  # in schema 9's order
    config = {V9_RECORDED_KEYS[name]: value for name, value in settings.items()
              if name in V9_RECORDED_KEYS and value is not None}
    kept = {name: value for name, value in settings.items()
            if name in V9_ENGINE_FIELDS or name not in V9_RECORDED_KEYS}  # an unknown field is refused as before
    return {**data, "settings": {**kept, "config": config}}


EVAL_MIGRATIONS = Migrations("eval result", {
    # 2 added the search mode and its budget unit (a file before them is a step search, budgets in expansions),
    # tokens and Lean calls per budget and per theorem
    1: added({"mode": "step", "budget_unit": "expansions"}, budgets={"tokens": None, "lean_calls": None},
             per_theorem={"tokens": None, "lean_calls": None}),
    # 3 added wall_s, resumed, and per theorem the failure's detail, edges and the time split
    2: added({"wall_s": None, "resumed": 0},
             per_theorem={"detail": None, "edges": None, "policy_s": None, "lean_s": None, "value_s": None}),
    # 4 added burnqed_version, pantograph_version and per theorem its source
    3: added({"burnqed_version": None, "pantograph_version": None}, per_theorem={"source": None}),
    # 5 added per theorem its usage curve, the training data check and the declarations not evaluated
    4: added({"training_check": None, "not_evaluated": []}, per_theorem={"curve": None}),
    # 6 added the answer tasks and per theorem its task and answer
    5: added({"tasks": []}, per_theorem={"task": None, "answer": None}),
    # 7 added per theorem the answer check and the reference answer
    6: added(per_theorem={"answer_check": None, "answer_check_detail": None, "reference": None,
                          "reference_at_proof": None}),
    # 8 added to settings a field per configuration key of eval's identity (absent: not recorded)
    7: added(),
    # 9 added per theorem the sha256 of the header the answer check compiled and of the proof's
    8: added(per_theorem={"answer_check_header": None, "proof_header": None}),
    # 10 moved the configuration keys of settings into its `section.key` map
    9: settings_as_config,
    # 11 added per theorem the judge that had the last word on its proofs (lean.judge)
    10: added(per_theorem={"judge": None}),
    # 12 added per theorem the lemma graph of recursive sketch search (search.sketch_depth above 1)
    11: added(per_theorem={"lemma_graph": None}),
})
