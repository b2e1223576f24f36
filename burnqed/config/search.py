"""The `[search]` section: the search mode, its budgets and the frontier's scoring (docs/search.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from burnqed.config.identity import neutral, read_by_mode, recorded, searched, shapes
from burnqed.config.section import Section
from burnqed.records.enums import SearchMode

# The largest budget anything accepts (search.max_nodes, max_proofs, max_rounds, eval budgets): a count of
# expansions or proofs far beyond what a search's time limit lets it spend, so a larger one is a typo.
MAX_BUDGET = 1_000_000_000


class SearchConfig(Section):
    """Proof search: step-level best-first, whole-proof pass@N, or hybrid (docs/search.md)."""

    mode: SearchMode = Field(
        default=SearchMode.STEP,
        description="'step': best-first over single tactics (budget: max_nodes expansions); 'whole': pass@N over "
        "whole proofs sampled from the statement, each compiled (budget: max_proofs); 'hybrid': whole proofs sampled "
        "from proof states, replayed tactic by tactic through a trie, best-first over the states they reach "
        "(budget: max_proofs); 'sketch': a planner writes `have NAME : P := by sorry` subgoals, each searched in "
        "search.sketch_subgoal_mode, the assembled proof compiled (budget: max_nodes, a planner request and each "
        "subgoal expansion or round counting one). The mode picks the prompt variant of policy.prompt_format's "
        "family.",
        json_schema_extra=searched(note="sft: through its effective proof_examples"),
    )
    max_nodes: int = Field(
        default=32, ge=1, le=MAX_BUDGET,
        description="Step and sketch modes' budget: node expansions (policy calls on a node, revisits included; "
        "sketch: planner requests and its subgoal searches' expansions or rounds); eval takes its own budgets "
        "(pipeline.eval_budgets, --budgets). The default keeps the embedded iteration's search short; "
        "configs/deepseek-prover-v2-7b.toml sets the prototype's 600.",
        json_schema_extra=shapes("search", by_mode=True, note="eval: its --budgets"),
    )
    max_depth: int = Field(
        default=50, ge=1, description="Longest proof, in tactics: nodes at this depth are not expanded.",
        json_schema_extra=read_by_mode(),
    )
    timeout_s: float = Field(default=300.0, gt=0, description="Wall-clock budget per theorem.",
                             json_schema_extra=searched())
    alpha: float = Field(
        default=0.5, ge=0.0, description="Length normalisation: score = sum of log-probs / depth^alpha.",
        json_schema_extra=read_by_mode(),
    )
    expand_batch: int = Field(
        default=1, ge=1, description="Frontier nodes expanded together (one policy request) per theorem.",
        json_schema_extra=read_by_mode(),
    )
    theorems_per_worker: int = Field(
        default=4,
        ge=1,
        description="Theorems one Lean worker serves at once (a theorem keeps its worker for its whole search; the "
        "worker answers their requests one at a time). Fewer are admitted when the worker's RSS nears "
        "lean.recycle_rss_mb (docs/search.md). More theorems in flight fill the policy's batches.",
        json_schema_extra=neutral("how many theorems share a Lean worker"),
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        description="Theorems searched at once; unset = lean.workers × search.theorems_per_worker (more only "
        "queue for room on a worker).",
        json_schema_extra=neutral("how many theorems are searched at once"),
    )
    speculate: int = Field(
        default=1,
        ge=0,
        description="Speculative expansion (step mode): while an expansion's tactics run in Lean, its first new "
        "child is sent to the policy at once (up to this many asks ahead per theorem), so generation overlaps the "
        "theorem's Lean time; the search order is unchanged and an ask never used costs GPU time only "
        "(docs/search.md). 0 = off.",
        json_schema_extra=neutral("asks the policy ahead: the search order is the same"),
    )
    revisits: int = Field(
        default=16, ge=0,
        description="Step mode: how many more times an expanded node may be expanded again, each time with fresh "
        "samples (new seeds; tactics it already tried are not tried again). After each expansion the node goes "
        "back on the frontier with its score lowered by revisit_penalty per expansion so far, so a node is asked "
        "again when its children look worse than that. 0 = each node is expanded once (BFS-Prover); a search "
        "whose nodes all answered then ends 'exhausted' with budget left (docs/search.md).",
        json_schema_extra=read_by_mode(),
    )
    revisit_penalty: float = Field(
        default=1.0, gt=0.0,
        description="Step mode: score (log-prob units) a node loses per expansion when it goes back on the frontier.",
        json_schema_extra=read_by_mode(),
    )
    revisit_temperature: float | None = Field(
        default=1.2, gt=0.0, le=5.0,
        description="Step mode: the sampling temperature of a revisit (unset = policy.temperature): the first "
        "expansion of a node takes the policy's likely tactics, a revisit can look further.",
        json_schema_extra=read_by_mode(),
    )
    probe_tactics: list[str] = Field(
        default_factory=list,
        description="Tactics tried at every expanded node besides the policy's (e.g. ['norm_num', 'linarith']).",
        json_schema_extra=read_by_mode(),
    )
    probe_logprob: float = Field(
        default=-1.0, le=0.0, description="Log-prob given to a probe tactic the policy did not also propose.",
        json_schema_extra=read_by_mode(),
    )
    verify: bool = Field(
        default=True, description="Also compile the assembled proof with frontend.process before counting it.",
        json_schema_extra=shapes("search", by_mode=True, note="eval compiles every proof it counts"),
    )
    stop_at_first: bool = Field(default=True, description="Stop a theorem's search at its first verified proof.",
                                json_schema_extra=searched())
    value_weight: float = Field(
        default=1.0, ge=0.0, description="Weight of -energy in the node score when a value model is used.",
        json_schema_extra=read_by_mode(),
    )
    value_ramp_depth: int = Field(
        default=0, ge=0, description="The value weight ramps linearly to full over this many depths (0 = none).",
        json_schema_extra=read_by_mode(),
    )
    value_reference: Literal["root", "none"] = Field(
        default="root",
        description="Step mode: what a node's energy is measured against in its score. 'root': the root state's own "
        "energy (asked once per search with the first children's), so a node scores above the root exactly when "
        "the value model prefers it to the start, whatever constant the energies are offset by (InfoNCE fixes "
        "energies only up to one); 'none': the raw energy.",
        json_schema_extra=read_by_mode(),
    )
    checkpoint_every: int = Field(
        default=50, ge=1, description="Theorems per trajectory checkpoint of `search` (one new Parquet part each; a "
        "SIGKILL loses the theorems finished since the last one). `eval --trajectories-out` commits every theorem.",
        json_schema_extra=neutral("how often a search commits its trajectories"),
    )
    max_proofs: int = Field(
        default=64, ge=1, le=MAX_BUDGET,
        description="Budget of whole and hybrid modes: whole proofs sampled per theorem (their eval budgets count "
        "proofs too). The prototype's hybrid run used 512.",
        json_schema_extra=shapes("search", by_mode=True, note="eval: its --budgets",
                                  reaches=("eval",)),
    )
    unsolved_budget_factor: float = Field(
        default=1.0, ge=1.0, le=100.0,
        description="Iterations ≥ 1: the training theorems the previous iteration searched and left unsolved are "
        "searched at this many times the budget (max_nodes or max_proofs, rounded up), the others at the budget "
        "(docs/pipeline.md, 'A budget that grows on what stays unsolved'); 1 = every theorem at the budget. The "
        "search summary says how many got the larger budget.",
        json_schema_extra=recorded("the search stage's inputs: with --unsolved-from, the previous iteration's "
                                   "trajectories (runner.reuse.search_inputs)"),
    )
    num_proofs: int = Field(
        default=8, ge=1,
        description="Proofs per policy request: whole mode samples in requests of this many; hybrid samples this "
        "many at the root, decaying linearly with depth to min_proofs at decay_depth (prototype: 32).",
        json_schema_extra=read_by_mode(),
    )
    min_proofs: int = Field(default=4, ge=1, description="Hybrid: proofs sampled per round at decay_depth and deeper.",
                            json_schema_extra=read_by_mode())
    proof_max_tokens: int = Field(
        default=512, ge=1,
        description="Token limit of one whole proof (whole mode; hybrid at the root, decaying with depth to "
        "proof_min_tokens; prototype 1024). policy.max_new_tokens is step mode's (one tactic).",
        json_schema_extra=read_by_mode(),
    )
    proof_min_tokens: int = Field(
        default=256, ge=1, description="Hybrid: the token limit at decay_depth and deeper (prototype 256).",
        json_schema_extra=read_by_mode(),
    )
    decay_depth: int = Field(
        default=8, ge=1, description="Hybrid: the depth at which proofs per round and tokens reach their minimum.",
        json_schema_extra=read_by_mode(),
    )
    max_rounds: int = Field(
        default=30, ge=1, le=MAX_BUDGET,
        description="Hybrid: most rounds (node expansions, one policy request each) per theorem (a sketch's hybrid "
        "subgoal search has its share of max_nodes instead).",
        json_schema_extra=read_by_mode(),
    )
    exploration: float = Field(
        default=1.41, ge=0.0,
        description="Hybrid: c of the PUCT exploration term c·sqrt(ln(parent visits + 1) / (1 + visits)).",
        json_schema_extra=read_by_mode(),
    )
    prior_weight: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="Hybrid: alpha of the PUCT value alpha_t·prior + (1 − alpha_t)·Q, alpha_t = alpha / (1 + visits).",
        json_schema_extra=read_by_mode(),
    )
    goal_penalty: float = Field(
        default=0.3, ge=0.0, description="Hybrid: priority lost per open goal beyond the first.",
        json_schema_extra=read_by_mode(),
    )

    repair_rounds: int = Field(
        default=0, ge=0, le=16,
        description="Whole and hybrid modes: revisions per failed proof, with Lean's messages (docs/search.md, "
        "'Repair'). A whole proof (or a hybrid attempt from a state) that fails with a Lean error is sent back to the "
        "policy with the theorem, the failed proof, Lean's messages mapped onto it and the goal at the first error; "
        "the revision is checked like any proof and, failing again, revised again, up to this many times. Each "
        "revision is one proof sampled (max_proofs counts it, its tokens count). 0 = no repair. Step mode has no "
        "whole proofs to revise: above 0 it keeps, on each tactic Lean rejects, the failed proof's messages (the path "
        "and that tactic), for SFT's repair examples (docs/training.md). Above 0 the rl stage also serves, of each "
        "theorem it prompts, the repair prompt of one failed proof its --trajectories recorded (docs/training.md, "
        "'GRPO stage'). Sketch mode does not repair (a subgoal's failed attempt is no failed proof of the theorem).",
        json_schema_extra=read_by_mode(note="sft: through its effective proof_examples; rl: through `repair "
                                       "prompts`, the repair format when above 0"),
    )
    repair_message_tokens: int = Field(
        default=512, ge=64, le=65536,
        description="The most tokens of Lean's messages (and the goal at the first error) a repair prompt shows: "
        "errors first, in position order, whole messages while they fit, counted as UTF-8 bytes (no byte-level "
        "tokenizer makes more tokens of them; burnqed/text/feedback.py states the rule).",
        json_schema_extra=read_by_mode(),
    )

    repair_cut_at_error: bool = Field(
        default=False,
        description="Repair prompts show a failed whole proof (or hybrid attempt) only up to the top-level tactic its "
        "first error is in, with the messages on that part: the shape of the failed proofs step search records for "
        "training. Off: the whole failed proof and every message, as Goedel-Prover-V2 shows them.",
        json_schema_extra=read_by_mode(),
    )

    sketch_rounds: int = Field(
        default=2, ge=0, le=16,
        description="Sketch mode: re-plans after the first request. A request's sketches that all fail (a subgoal "
        "refuted by Lean or not proved within its share, a sketch Lean rejects, an assembled proof that does not "
        "compile) go back to the planner with what failed, up to this many times; subgoals already proved are kept "
        "(docs/search.md, 'Sketch search').",
        json_schema_extra=read_by_mode(),
    )
    sketch_subgoal_mode: Literal["step", "hybrid"] = Field(
        default="step",
        description="Sketch mode: how each subgoal is searched, from its goal: step-level best-first (each expansion "
        "counts one of max_nodes) or hybrid (each round counts one), with that mode's settings and the value model.",
        json_schema_extra=read_by_mode(),
    )
    sketch_subgoal_share: float = Field(
        default=0.25, gt=0.0, le=1.0,
        description="Sketch mode: the share of the theorem's budget (max_nodes) one subgoal's search may spend "
        "(at least one expansion, at most what is left).",
        json_schema_extra=read_by_mode(),
    )
    sketch_depth: int = Field(
        default=1, ge=1, le=8,
        description="Sketch mode: how many levels a theorem is decomposed. 1: the planner's holes are searched and "
        "nothing more; k: a hole whose own search fails is planned again as a goal of its own, its holes likewise, "
        "down to k levels, on one AND-OR graph per theorem (a goal proved once closes every place it appears; a hole "
        "that restates its goal or an ancestor is refused before Lean; docs/search.md, 'Recursive sketches').",
        json_schema_extra=read_by_mode(),
    )
    sketch_plans: int = Field(
        default=4, ge=1, le=256,
        description="Sketch mode: sketches asked per planner request (one request counts one of max_nodes).",
        json_schema_extra=read_by_mode(),
    )
    subgoal_cache_replays: int = Field(
        default=4, ge=1, le=64,
        description="Sketch mode: the subgoal cache's proofs one lookup replays in Lean at most, shortest first (then "
        "by digest); a proof Lean rejected under a key is never replayed under it again in the job (docs/pipeline.md, "
        "'Subgoal cache').",
        json_schema_extra=read_by_mode(),
    )
    subgoal_cache: str | None = Field(
        default=None,
        description="Sketch mode: the folder (path or URI) `burnqed search` keeps its subgoal cache in, shared by "
        "every job that names it; the pipeline names the run root's `subgoal-cache` for every shard and iteration. "
        "Unset: beside the search's output (OUTPUT.subgoal-cache). An eval keeps one cache per pass, in memory "
        "(docs/pipeline.md, 'Subgoal cache').",
        json_schema_extra=neutral("where sketch search keeps proofs it re-checks before use"),
    )
    lemma_library: str | None = Field(
        default=None,
        description="Sketch mode: a lemma library folder (path or URI; docs/search.md, 'The lemma library'). A search "
        "or eval reads it once, at its start, and asks it for each hole before searching the hole; every entry it "
        "offers is replayed in Lean before it counts, and none made from a held-out theorem or restating a benchmark "
        "theorem serves. `burnqed search` also writes into it the lemmas of its counted proofs on training theorems "
        "(split neither test nor valid). Unset: no library.",
        json_schema_extra=recorded("eval stamps the folder by its listing (its entries are named by their digests) "
                                   "as its `search.lemma_library` input; search reads what it holds at its start"),
    )

    @model_validator(mode="after")
    def _consistent(self) -> SearchConfig:
        if self.mode is SearchMode.WHOLE and not self.verify:
            raise ValueError("search.verify=false cannot apply to whole mode: a whole proof is checked only by "
                             "compiling it; turn verify on or use step/hybrid")
        if self.mode is SearchMode.SKETCH and not self.verify:
            raise ValueError("search.verify=false cannot apply to sketch mode: an assembled proof is checked only by "
                             "compiling it; turn verify on or use step/hybrid")
        if self.min_proofs > self.num_proofs:
            raise ValueError(f"min_proofs {self.min_proofs} must not exceed num_proofs {self.num_proofs}")
        if self.proof_min_tokens > self.proof_max_tokens:
            raise ValueError(f"proof_min_tokens {self.proof_min_tokens} must not exceed proof_max_tokens "
                             f"{self.proof_max_tokens}")
        return self
