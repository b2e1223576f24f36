"""Typed configuration: one TOML file, overridden by `BURNQED_<SECTION>__<KEY>` env vars, overridden by
repeated `--set section.key=value`.

A value from env or `--set` that parses as JSON is taken as JSON (`--set lean.workers=4`,
`--set 'lean.command=["repl","Mathlib"]'`), anything else as a string. Unknown sections and keys are
errors. With no file, no env and no `--set`, every command runs on the embedded defaults: the replay
Lean server on the bundled corpus.

    cfg = load_config(Path("burnqed.toml"), sets=["lean.workers=4"], environ=os.environ)

Loading is explicit (nothing reads the environment at import time) and every failure is a
`ConfigError` whose message names the offending key and where its value came from.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from burnqed.errors import ConfigError
from burnqed.prompt import PromptFormat, SearchMode, is_statement_format

ENV_PREFIX = "BURNQED_"
PYTHON_PLACEHOLDER = "{python}"

DEFAULT_DENY: tuple[str, ...] = (
    # Proof-faking tactics: never a proof, refused outright.
    r"\bsorry\b",
    r"\badmit\b",
    r"\bcheat\b",
    # Trusting the compiler instead of the kernel (the Lean.ofReduceBool / ofReduceNat axioms).
    r"\bnative_decide\b",
    r"\+native\b",  # decide +native
    r"\bnative\s*:=",  # decide (config := { native := true })
    r"\bofReduce(Bool|Nat)\b",
    r"\btrustCompiler\b",
    r"\bbv_decide\b",
    # Running arbitrary code inside Lean.
    r"\brun_tac\b",
    r"\brun_cmd\b",
    r"\brun_elab\b",
    r"\brun_meta\b",
    r"#[A-Za-z]",  # #eval, #exit, #print, #guard_msgs, ... (an array literal `#[` stays allowed)
    r"\bIO\.",
    r"\bSystem\.",
    r"\bunsafe",  # unsafe, unsafeCast, unsafeIO, ...
    r"\bimplemented_by\b",
    r"\bextern\b",
    r"\bcsimp\b",
    r"@\[",
    # Metaprograms in terms: elaborate, or add declarations (an axiom) to the environment.
    r"\bby_elab\b",
    r"\b(Lean\.)?(Elab|Meta)\.",  # Lean.Elab.*, Lean.Meta.*, also after `open Lean`
    r"\bLean\.(Environment|Kernel|Compiler|Parser|Syntax|Macro|Declaration|IR|Core)\b",
    r"\b(addDecl|addAndCompile|axiomDecl|modifyEnv|setEnv)\b",
    # Commands that change how later code elaborates, smuggled in as or after a tactic.
    r"\b(macro_rules|elab_rules|declare_syntax_cat|macro|syntax|elab|notation)\b",
    r"\b(local|scoped)\s+(infix|infixl|infixr|prefix|postfix)\b",
    r"\battribute\s*\[",  # attribute [simp] foo in ..., attribute [local instance] ...
    r"(?<![\w.'])open\b[^\n]*\bin\b",  # open Foo in ... (anywhere on a line)
    r"^\s*(import|open|namespace|section|end|variable|universe|initialize|builtin_initialize)\b",
    r"^\s*(theorem|lemma|example|abbrev|structure|inductive|class|mutual)\b",
    r"\b(axiom|opaque|instance|def)\s",
    # Options that lift resource limits or switch checks off.
    r"\bset_option\s+(maxHeartbeats|maxRecDepth|synthInstance\.maxHeartbeats|maxSize|exponentiation)",
    r"\bdebug\.",  # set_option debug.skipKernelTC true
    r"\ballowUnsafeReducibility\b",
)


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LeanConfig(Section):
    """How Lean (Pantograph's `repl`) processes are started, timed, recycled and guarded."""

    command: list[str] = Field(
        default=[PYTHON_PLACEHOLDER, "-m", "burnqed.lean.replay"],
        min_length=1,
        description="argv of one Lean worker, e.g. ['repl', 'Mathlib'] for Pantograph. "
        "'{python}' expands to the running interpreter; the default is the embedded replay server "
        "on the bundled corpus.",
    )
    cwd: str | None = Field(default=None, description="Working directory of the worker (a Lake project).")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables for the worker on top of the few it inherits (PATH, HOME, locale, "
        "LEAN_*, ELAN_*, LAKE_*; see docs/lean.md), e.g. LEAN_PATH. Credential-looking names (AWS_*, *TOKEN*, "
        "*SECRET*, *KEY*, *PASSWORD*, *CREDENTIAL*) are refused: Lean runs generated code.",
    )
    pantograph_version: str | None = Field(
        default=None,
        description="Pantograph version lean.command runs (0.2.25 or 0.3.0-0.3.4; requests differ per version); "
        "unset = asked once per pool by running lean.command's REPL with --version.",
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        description="Number of Lean worker processes in the pool; unset = min(16, 0.75 × cores, "
        "available memory / worker_memory_mb), at least 1.",
    )
    worker_memory_mb: int = Field(
        default=6000, ge=1, description="Expected memory of one worker, used to cap the automatic worker count."
    )
    tactic_timeout_s: float = Field(
        default=25.0, gt=0, description="Lean-side timeout per command (Pantograph options.set timeout)."
    )
    watchdog_grace_s: float = Field(
        default=5.0,
        gt=0,
        description="The client watchdog fires this long after tactic_timeout_s; it kills and respawns the worker.",
    )
    ready_timeout_s: float = Field(
        default=120.0, gt=0, description="Deadline for the worker's `ready.` line (Mathlib import takes 60-90 s)."
    )
    recycle_requests: int = Field(default=1000, ge=1, description="Restart a worker after this many requests.")
    recycle_seconds: float = Field(default=1800.0, gt=0, description="Restart a worker after this age.")
    recycle_rss_mb: int = Field(
        default=12000, ge=0, description="Restart a worker whose resident memory exceeds this (0 = never)."
    )
    automatic_mode: bool = Field(
        default=True, description="Pantograph automaticMode: sibling goals stay in the state after a tactic."
    )
    deny: list[str] = Field(
        default=list(DEFAULT_DENY),
        description="Tactic guard: regular expressions; a tactic matching any is refused before reaching Lean.",
    )
    max_tactic_chars: int = Field(
        default=4000, ge=1, description="Tactic guard: longer tactics are refused (runaway generations)."
    )

    @field_validator("env")
    @classmethod
    def _no_credentials(cls, env: dict[str, str]) -> dict[str, str]:
        from burnqed.lean.sandbox import credential_names

        refused = credential_names(env)
        if refused:
            raise ValueError(
                f"{', '.join(refused)} looks like a credential: Lean runs generated code and must never see "
                "credentials; remove it"
            )
        return env

    @field_validator("pantograph_version")
    @classmethod
    def _supported_version(cls, version: str | None) -> str | None:
        from burnqed.errors import ConfigError
        from burnqed.lean.version import supported_version

        if version is None:
            return None
        try:
            return str(supported_version(version))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("deny")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        import re

        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"deny pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return patterns

    def argv(self) -> list[str]:
        """The worker command with `{python}` expanded to the running interpreter."""
        return [sys.executable if part == PYTHON_PLACEHOLDER else part for part in self.command]

    def resolved_workers(self) -> int:
        """`workers`, or the automatic count: capped by cores and by memory (30 REPLs once ran 200 GB out)."""
        if self.workers is not None:
            return self.workers
        import psutil

        cores = os.cpu_count() or 1
        by_cores = int(cores * 0.75)
        by_memory = int(psutil.virtual_memory().available / (self.worker_memory_mb * 1024 * 1024))
        return max(1, min(16, by_cores, by_memory))


class PolicyConfig(Section):
    """The policy edge: which model proposes tactics, and how candidates are sampled."""

    backend: Literal["local", "sglang"] = Field(
        default="local",
        description="'local' runs the model in this process (transformers); 'sglang' talks to an SGLang "
        "server (or `burnqed serve`) over its native /generate API at `url`.",
    )
    url: str = Field(default="http://127.0.0.1:30000", description="Base URL of the SGLang server (sglang backend).")
    model: str | None = Field(
        default=None,
        description="Model folder for the local backend (and the name reported in results). Unset = the tiny "
        "embedded model, built on first use under the user cache (see `burnqed model init-tiny`).",
    )
    prompt_format: PromptFormat = Field(
        default=PromptFormat.PLAIN_TACTIC,
        description="Prompt family (burnqed.prompt), named by one of its formats: deepseek-tactic / deepseek-proof "
        "for DeepSeek-Prover models, plain-tactic / plain-proof for the tiny model. search.mode picks the variant "
        "(step: the tactic format, hybrid: the proof-from-state format, whole: the whole-proof format).",
    )
    cot: bool = Field(
        default=False,
        description="Whole mode with the deepseek family: DeepSeek-Prover-V2's chain-of-thought prompt (a proof plan "
        "first, then the code; the proof is the last lean4 block, generation stops at EOS, so give it room with "
        "search.proof_max_tokens). Step and hybrid prompts show a proof state and are not affected.",
    )
    num_candidates: int = Field(default=8, ge=1, le=256, description="Candidates sampled per expanded node.")
    temperature: float = Field(default=0.8, ge=0.0, le=5.0, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(default=0.95, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(default=128, ge=1, description="Token limit per candidate.")
    context_length: int | None = Field(
        default=None, ge=2,
        description="The served model's context length in tokens, for the sglang client's prompt cap (a prompt "
        "whose tokens plus max_new_tokens reach it is not sent and fails alone); unset = asked from the server "
        "(GET /v1/models, max_model_len). The local backend reads it from the model's config.",
    )
    seed: int | None = Field(
        default=0,
        description="Sampling seed of the local backend (and of `burnqed serve`): every process restarts its stream "
        "from it, so a run searching one theorem at a time repeats its samples exactly; null = a random seed per "
        "process. Recorded in every eval result.",
    )
    device: str = Field(default="auto", description="Local backend device: auto | cpu | cuda | cuda:N.")
    request_timeout_s: float = Field(default=300.0, gt=0, description="HTTP timeout of one /generate request.")
    ready_timeout_s: float = Field(
        default=600.0, gt=0, description="How long to wait for the server's /health before giving up."
    )
    retries: int = Field(default=4, ge=0, description="Retries of a failed request (5xx or transport error).")
    backoff_s: float = Field(default=0.5, ge=0, description="First retry delay; doubles per retry (with jitter).")
    breaker_failures: int = Field(
        default=5, ge=1, description="Consecutive failed requests that open the circuit breaker."
    )
    breaker_reset_s: float = Field(
        default=30.0, gt=0, description="How long the open breaker refuses requests before one trial request."
    )
    max_batch_prompts: int = Field(
        default=64, ge=1, description="Most prompts (states) sent in one request; concurrent searches are batched."
    )
    max_inflight_requests: int = Field(
        default=64,
        ge=1,
        description="Most concurrent requests to the policy. SGLang batches continuously, so an ask held back here "
        "waits a whole generation: keep it at least search.concurrency (docs/search.md). The local backend sends "
        "one at a time.",
    )

    @model_validator(mode="after")
    def _family(self) -> PolicyConfig:
        if is_statement_format(self.prompt_format):
            raise ValueError(f"prompt_format {self.prompt_format} is a whole-proof variant: name the family's tactic "
                             "or proof format (search.mode = 'whole' picks the whole-proof variant itself)")
        if self.cot and not self.prompt_format.startswith("deepseek"):
            raise ValueError(f"cot is an option of the deepseek prompt family, not of {self.prompt_format}")
        return self


class SearchConfig(Section):
    """Proof search: step-level best-first, whole-proof pass@N, or hybrid (docs/search.md)."""

    mode: SearchMode = Field(
        default=SearchMode.STEP,
        description="'step': best-first over single tactics (budget: max_nodes expansions); 'whole': pass@N over "
        "whole proofs sampled from the statement, each compiled (budget: max_proofs); 'hybrid': whole proofs sampled "
        "from proof states, replayed tactic by tactic through a trie, best-first over the states they reach "
        "(budget: max_proofs). The mode picks the prompt variant of policy.prompt_format's family.",
    )
    max_nodes: int = Field(
        default=300, ge=1, description="Step mode's budget: node expansions (policy calls on a node)."
    )
    max_depth: int = Field(
        default=50, ge=1, description="Longest proof, in tactics: nodes at this depth are not expanded."
    )
    timeout_s: float = Field(default=300.0, gt=0, description="Wall-clock budget per theorem.")
    alpha: float = Field(
        default=0.5, ge=0.0, description="Length normalisation: score = sum of log-probs / depth^alpha."
    )
    expand_batch: int = Field(
        default=1, ge=1, description="Frontier nodes expanded together (one policy request) per theorem."
    )
    theorems_per_worker: int = Field(
        default=4,
        ge=1,
        description="Theorems one Lean worker serves at once (a theorem keeps its worker for its whole search; the "
        "worker answers their requests one at a time). Fewer are admitted when the worker's RSS nears "
        "lean.recycle_rss_mb (docs/search.md). More theorems in flight fill the policy's batches.",
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        description="Theorems searched at once; unset = lean.workers × search.theorems_per_worker (more only "
        "queue for room on a worker).",
    )
    speculate: int = Field(
        default=1,
        ge=0,
        description="Speculative expansion (step mode): while an expansion's tactics run in Lean, its first new "
        "child is sent to the policy at once (up to this many asks ahead per theorem), so generation overlaps the "
        "theorem's Lean time; the search order is unchanged and an ask never used costs GPU time only "
        "(docs/search.md). 0 = off.",
    )
    probe_tactics: list[str] = Field(
        default_factory=list,
        description="Tactics tried at every expanded node besides the policy's (e.g. ['norm_num', 'linarith']).",
    )
    probe_logprob: float = Field(
        default=-1.0, le=0.0, description="Log-prob given to a probe tactic the policy did not also propose."
    )
    verify: bool = Field(
        default=True, description="Also compile the assembled proof with frontend.process before counting it."
    )
    stop_at_first: bool = Field(default=True, description="Stop a theorem's search at its first verified proof.")
    value_weight: float = Field(
        default=1.0, ge=0.0, description="Weight of -energy in the node score when a value model is used."
    )
    value_ramp_depth: int = Field(
        default=0, ge=0, description="The value weight ramps linearly to full over this many depths (0 = none)."
    )
    checkpoint_every: int = Field(
        default=50, ge=1, description="Theorems per trajectory checkpoint (one new Parquet part each)."
    )
    max_proofs: int = Field(
        default=64, ge=1,
        description="Budget of whole and hybrid modes: whole proofs sampled per theorem (their eval budgets count "
        "proofs too). The prototype's hybrid run used 512.",
    )
    num_proofs: int = Field(
        default=8, ge=1,
        description="Proofs per policy request: whole mode samples in requests of this many; hybrid samples this "
        "many at the root, decaying linearly with depth to min_proofs at decay_depth (prototype: 32).",
    )
    min_proofs: int = Field(default=4, ge=1, description="Hybrid: proofs sampled per round at decay_depth and deeper.")
    proof_max_tokens: int = Field(
        default=512, ge=1,
        description="Token limit of one whole proof (whole mode; hybrid at the root, decaying with depth to "
        "proof_min_tokens; prototype 1024). policy.max_new_tokens is step mode's (one tactic).",
    )
    proof_min_tokens: int = Field(
        default=256, ge=1, description="Hybrid: the token limit at decay_depth and deeper (prototype 256)."
    )
    decay_depth: int = Field(
        default=8, ge=1, description="Hybrid: the depth at which proofs per round and tokens reach their minimum."
    )
    max_rounds: int = Field(
        default=30, ge=1, description="Hybrid: most rounds (node expansions, one policy request each) per theorem."
    )
    exploration: float = Field(
        default=1.41, ge=0.0,
        description="Hybrid: c of the PUCT exploration term c·sqrt(ln(parent visits + 1) / (1 + visits)).",
    )
    prior_weight: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="Hybrid: alpha of the PUCT value alpha_t·prior + (1 − alpha_t)·Q, alpha_t = alpha / (1 + visits).",
    )
    goal_penalty: float = Field(
        default=0.3, ge=0.0, description="Hybrid: priority lost per open goal beyond the first."
    )

    @model_validator(mode="after")
    def _consistent(self) -> SearchConfig:
        if self.mode is SearchMode.WHOLE and not self.verify:
            raise ValueError("search.verify=false cannot apply to whole mode: a whole proof is checked only by "
                             "compiling it; turn verify on or use step/hybrid")
        if self.min_proofs > self.num_proofs:
            raise ValueError(f"min_proofs {self.min_proofs} must not exceed num_proofs {self.num_proofs}")
        if self.proof_min_tokens > self.proof_max_tokens:
            raise ValueError(f"proof_min_tokens {self.proof_min_tokens} must not exceed proof_max_tokens "
                             f"{self.proof_max_tokens}")
        return self


class SourceSpec(Section):
    """One data source for `burnqed data prepare` (docs/data.md lists each kind's columns)."""

    kind: Literal[
        "bundled", "world", "lean-workbook", "goedel-pset", "goedel-proofs", "lean-github", "numina-lean", "minif2f",
        "pairs",
    ] = Field(description="Which converter reads it: 'lean-workbook' (internlm/Lean-Workbook), 'goedel-pset' "
              "(Goedel-LM/Goedel-Pset-v1, statements only), 'goedel-proofs' (Goedel-LM/Lean-workbook-proofs), "
              "'numina-lean' (AI-MO/NuminaMath-LEAN), 'minif2f' (miniF2F Lean 4, its own test/valid split), "
              "'lean-github' (internlm/Lean-Github, traced steps), 'pairs' (tactic pairs in design §4's format, "
              "or a prepared-data folder), 'bundled' (the bundled hand-written replay corpus' proofs), 'world' "
              "(the generated world: train proofs and pool statements; docs/replay-corpus.md).")
    name: str | None = Field(
        default=None,
        description="Label recorded as the `source` of this source's theorems and pairs; unset = the kind.",
    )
    path: str | None = Field(
        default=None,
        description="Local file or folder (JSON, JSONL, Parquet) in the source's own schema, or an s3:// URI of "
        "one; for 'bundled'/'world' a replay corpus file or folder (unset = the bundled corpus / the generated "
        "world). A name like 'org/name' that is no "
        "local path is loaded from the Hugging Face hub with `datasets` (needs network and burnqed[train]).",
    )
    split: str | None = Field(
        default=None,
        description="Split to read: the hub dataset split (default 'train'); for a local folder only files named "
        "after it (when any are); rows whose own `split` column differs are skipped. 'bundled': train (default), "
        "pool or test; 'world': unset = train and pool (pool theorems give statements only), else one split.",
    )
    limit: int | None = Field(default=None, ge=1, description="Read at most this many rows (a quick subset).")


class DataConfig(Section):
    """Data preparation (`burnqed data prepare`): sources → theorem index + tactic pairs (design §4)."""

    sources: list[SourceSpec] = Field(
        default_factory=lambda: [SourceSpec(kind="bundled"), SourceSpec(kind="world")],
        description="Sources to convert, in order (earlier wins on duplicate theorems). Default: the bundled "
        "hand-written corpus' train split and the generated world's train and pool splits.",
    )
    valid_fraction: float = Field(
        default=0.1, ge=0.0, lt=1.0, description="Share of theorems (by stable name hash) held out for validation."
    )
    split_salt: str = Field(default="burnqed", description="Salt of the stable name hash that assigns splits.")
    contrastive_min_depth: int = Field(
        default=3, ge=1, description="Theorems with a proof of at least this many tactics form the contrastive "
        "(EBM) pool."
    )
    replay: bool = Field(
        default=True,
        description="Replay whole proofs tactic by tactic through the Lean edge so states come from Lean; "
        "off = keep only sources that already carry states (whole-proof sources give index entries only).",
    )


class SftConfig(Section):
    """Supervised fine-tuning of the policy (`burnqed sft`) and its export (`burnqed export`), design §6.

    Defaults fit the tiny embedded model on CPU (full fine-tuning, a few seconds); for a 7B model on a GPU see
    configs/deepseek-prover-v2-7b.toml (the burn-qed prototype's QLoRA settings)."""

    method: Literal["full", "lora", "qlora"] = Field(
        default="full",
        description="'full' trains every weight (the tiny model); 'lora' trains a peft adapter; 'qlora' loads the "
        "base in 4-bit NF4 (bitsandbytes) under a LoRA adapter (float32 compute on CPU, bf16 on GPU with bf16).",
    )
    base_model: str | None = Field(
        default=None,
        description="Model folder or URI (file://, s3://) to start iteration 0 from and to merge LoRA adapters "
        "into at export; unset = the tiny embedded model. Iterations ≥ 1 warm-start from --init.",
    )
    lora_r: int = Field(default=16, ge=1, description="LoRA rank (a warm start keeps the adapter's own rank).")
    lora_alpha: int = Field(default=32, ge=1, description="LoRA alpha (scale = alpha / r).")
    lora_dropout: float = Field(default=0.05, ge=0.0, lt=1.0, description="LoRA dropout.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1,
        description="Module names LoRA wraps (all attention and MLP projections).",
    )
    learning_rate: float = Field(
        default=2e-3, gt=0,
        description="Peak learning rate of a cold start (iteration 0); the tiny model trains fully at 2e-3, a 7B "
        "LoRA at about 2e-4.",
    )
    lr_decay_per_iter: float = Field(
        default=0.5, gt=0, le=1.0,
        description="Warm starts (iteration i ≥ 1 with --init) use learning_rate × lr_decay_per_iter^i.",
    )
    scheduler: Literal["cosine", "linear", "constant", "constant_with_warmup"] = Field(
        default="cosine", description="Learning-rate schedule after warm-up."
    )
    warmup_steps: int = Field(default=5, ge=0, description="Linear warm-up steps.")
    max_steps: int = Field(
        default=300, ge=1,
        description="Optimizer steps of a cold start (iteration 0). 300 lets the tiny model learn the generated "
        "world's train families (about 8 epochs of its ~940 pairs, about a minute on one CPU thread).",
    )
    warm_steps: int = Field(
        default=40, ge=1, description="Optimizer steps of a warm start (iteration ≥ 1 with --init)."
    )
    batch_size: int = Field(
        default=4, ge=1,
        description="Rows per device batch. With packing a row holds several examples (up to max_length tokens).",
    )
    grad_accum: int = Field(default=1, ge=1, description="Gradient accumulation steps per optimizer step.")
    max_length: int = Field(
        default=512, ge=16,
        description="Token length of a packed row (or of one example without packing); longer examples are dropped "
        "(never truncated: a cut completion would teach the model not to stop) and counted in sft.json.",
    )
    packing: bool = Field(
        default=True,
        description="Pack examples into rows (best-fit decreasing) with position ids restarting per example and no "
        "cross-example attention; off = one example per row, padded.",
    )
    attn_implementation: str | None = Field(
        default=None,
        description="transformers attention kernel (sdpa, eager, flash_attention_2, ...); unset = transformers' "
        "default. With a flash-attention kernel and packing, a batch is flattened into one padding-free row "
        "(TRL's padding-free collator); otherwise each packed row gets its own block-diagonal mask.",
    )
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.")
    max_grad_norm: float = Field(default=1.0, gt=0, description="Gradient clipping norm.")
    eval_fraction: float = Field(
        default=0.1, ge=0.0, lt=1.0,
        description="Held-out loss: the data's 'valid' split is used; only when it has none, this share of the "
        "train theorems (stable name hash) is held out instead (0 = no eval loss then).",
    )
    eval_steps: int = Field(default=20, ge=1, description="Evaluate the held-out loss every this many steps.")
    save_steps: int = Field(
        default=20, ge=1, description="Checkpoint every this many steps into {output}-checkpoints (resume point)."
    )
    keep_checkpoints: bool = Field(
        default=False, description="Keep {output}-checkpoints after the output is published (default: delete them)."
    )
    logging_steps: int = Field(default=10, ge=1, description="Log loss, lr and tokens/s every this many steps.")
    base_subsample: int = Field(
        default=10000, ge=0,
        description="Iterations ≥ 1: base-data pairs sampled (seeded) alongside trajectory positives; all of them "
        "when there are fewer.",
    )
    positive_upsample: int = Field(
        default=5, ge=1,
        description="Iterations ≥ 1: each distinct trajectory positive (state_before, tactic) appears this many times "
        "(the prototype used 10 beside a 10k-pair base sample; 5 keeps the embedded world's ~940 base pairs from "
        "being forgotten).",
    )
    proof_examples: bool | None = Field(
        default=None,
        description="Iterations ≥ 1: also train the proof formats on the trajectories' verified proofs (statement → "
        "whole proof body; each state on a proof path → the rest of the proof), upsampled like the positives; unset "
        "= on when search.mode is whole or hybrid (the modes that ask for proofs).",
    )
    bf16: bool = Field(default=False, description="bf16 mixed precision (GPU only; ignored on CPU).")
    gradient_checkpointing: bool = Field(default=False, description="Trade compute for memory (large models).")
    cpu_threads: int | None = Field(
        default=1, ge=1,
        description="torch threads while training on CPU; unset = torch's default. 1 by default: the tiny model's "
        "matrices are too small to split, and a second thread competing with other work on a 2-core machine made "
        "steps 4× slower (measured).",
    )
    seed: int = Field(default=0, description="Seed of data sampling, data order and adapter initialisation.")
    device: str = Field(default="auto", description="auto | cpu | cuda | cuda:N.")
    export_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description="dtype of the exported weights; 'auto' = the base model's saved dtype (bf16 for DeepSeek-Prover, "
        "float32 for the tiny model). Merging always happens in float32.",
    )
    export_max_shard_size: str = Field(
        default="5GB", description="Largest safetensors shard of an export (e.g. '2GB', '500MB')."
    )
    export_max_logit_diff: float = Field(
        default=1e-2, gt=0,
        description="Export check: the merged model's float32 logits on a probe prompt may differ from the adapter "
        "model's by at most this much (max absolute difference); more means the merge is broken.",
    )


class EbmConfig(Section):
    """The value model (`burnqed train-ebm`, design §6, docs/ebm.md). Defaults fit the tiny embedded model on CPU."""

    hidden_dims: list[int] = Field(
        default_factory=lambda: [256, 128, 64],
        min_length=1,
        description="MLP hidden sizes after the 3·d input [z_state; z_goal; z_state⊙z_goal] (2048, 1024, 512 "
        "for a 4096-d backbone).",
    )
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0, description="Dropout between MLP layers.")
    spectral_norm: bool = Field(default=True, description="Spectral normalisation on every linear layer.")
    first_layer_scale: float = Field(
        default=0.1, gt=0,
        description="Scale of the first layer's weights at init (under spectral norm it does not change the "
        "function; see docs/ebm.md).",
    )
    init_temperature: float = Field(default=1.0, gt=0, description="Initial learnable temperature.")
    temperature_min: float = Field(default=0.5, gt=0, description="Abort training if the temperature falls below.")
    temperature_max: float = Field(default=3.0, gt=0, description="Abort training if the temperature rises above.")
    negatives: int = Field(default=7, ge=1, description="Negatives per positive (K) in InfoNCE.")
    sibling_ratio: float = Field(default=0.6, ge=0, le=1, description="Share of negatives from siblings.")
    same_theorem_ratio: float = Field(default=0.3, ge=0, le=1, description="Share from the same theorem.")
    other_theorem_ratio: float = Field(default=0.1, ge=0, le=1, description="Share from other theorems.")
    depth_loss_weight: float = Field(
        default=0.0, ge=0.0,
        description="Weight of the auxiliary regression of log(1 + tactics remaining to a proof) (0 = off).",
    )
    learning_rate: float = Field(default=1e-3, gt=0, description="AdamW learning rate (3e-5 for a 7B backbone).")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.")
    grad_clip: float = Field(default=1.0, gt=0, description="Clip the gradient norm to this.")
    steps: int = Field(default=300, ge=1, description="Training steps.")
    batch_size: int = Field(default=64, ge=1, description="Positives per step.")
    valid_fraction: float = Field(
        default=0.2, ge=0.0, lt=1.0, description="Share of theorems (by name hash) held out for validation."
    )
    log_every: int = Field(default=50, ge=1, description="Log metrics and the temperature every this many steps.")
    encoder_backend: Literal["local", "serve"] = Field(
        default="local",
        description="Where burnqed's encoder runs (the same code either way, docs/ebm.md): 'local' loads the policy "
        "model (--model, else policy.model) in this process on ebm.device; 'serve' calls /encode of `burnqed serve` "
        "(the cluster's GPU sidecar runs `burnqed serve --encode-only`) at encoder_url. SGLang's --is-embedding is "
        "not an encoder of the value model: it pools the last token and L2-normalises.",
    )
    encoder_url: str = Field(
        default="http://127.0.0.1:30001", description="Base URL of `burnqed serve` for encoder_backend = 'serve'."
    )
    pooling: Literal["mean", "last"] = Field(
        default="mean",
        description="How the encoder pools the last hidden states of a text: 'mean' (masked mean over its tokens) or "
        "'last' (the last token's). Recorded in the encoder identity: a head trained with one is refused by another.",
    )
    normalize: bool = Field(
        default=False, description="L2-normalise the embeddings (recorded in the encoder identity)."
    )
    encoder_max_tokens: int = Field(
        default=4096, ge=1,
        description="Texts are cut to their first this many tokens before embedding (at most the model's context "
        "length; the resolved value is recorded in the encoder identity).",
    )
    encode_batch_tokens: int = Field(
        default=16384, ge=1,
        description="Most tokens (texts × longest text, padding included) per encoder forward pass: bounds the "
        "encoder's GPU workspace (the GPU memory plan sizes it, docs/cluster.md).",
    )
    encode_batch: int = Field(default=32, ge=1, description="Texts per embedding request.")
    cache_chunk: int = Field(default=512, ge=1, description="Embeddings per Parquet cache chunk (resume unit).")
    cache_uri: str | None = Field(
        default=None,
        description="Embedding cache (path or URI, s3:// too); unset = '{output}-cache' beside the train-ebm "
        "output, outside the staged output so it survives a crash.",
    )
    scorer_cache_size: int = Field(
        default=200_000, ge=0, description="Search: energies remembered per process (by goal and state)."
    )
    seed: int = Field(default=0, description="Seed of sampling and initialisation.")
    device: str = Field(default="auto", description="auto | cpu | cuda (head and local encoder).")

    @field_validator("encoder_backend", mode="before")
    @classmethod
    def _not_sglang(cls, value: object) -> object:
        if value == "sglang":
            raise ValueError("'sglang' is no longer an encoder of the value model: SGLang's --is-embedding pools the "
                             "last token and L2-normalises, unlike the embeddings the head is trained on; use 'serve' "
                             "(`burnqed serve --encode-only` at encoder_url) or 'local'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> EbmConfig:
        if not self.temperature_min < self.temperature_max:
            raise ValueError(f"temperature_min {self.temperature_min} must be below temperature_max "
                             f"{self.temperature_max}")
        if not self.temperature_min <= self.init_temperature <= self.temperature_max:
            raise ValueError(f"init_temperature {self.init_temperature} must lie in [temperature_min, "
                             "temperature_max]")
        if self.sibling_ratio + self.same_theorem_ratio + self.other_theorem_ratio <= 0:
            raise ValueError("sibling_ratio + same_theorem_ratio + other_theorem_ratio must be positive")
        return self


class StorageConfig(Section):
    """Where a run's artifacts live (design §3 Storage)."""

    root: str = Field(
        default="file://./runs",
        description="Run root URI: file://PATH (relative to the working directory) or s3://bucket/prefix. "
        "Artifacts go to {root}/iter_{i}/{stage}/.",
    )
    endpoint_url: str | None = Field(
        default=None, description="S3 endpoint (MinIO, moto, other clouds); unset = AWS (or AWS_ENDPOINT_URL)."
    )
    region: str | None = Field(default=None, description="S3 region; unset = from the environment.")
    cache_dir: str | None = Field(
        default=None,
        description="Local folder for downloaded remote artifacts (models); unset = $BURNQED_HOME or the user "
        "cache. Credentials always come from the environment (AWS_* variables, IRSA), never from config.",
    )


class PipelineConfig(Section):
    """One expert iteration (`burnqed iterate`, the Argo `iteration` workflow; design §1)."""

    search_theorems: str | None = Field(
        default=None,
        description="Theorem index (path or URI) searched for training data; unset = the train split of the "
        "prepared data's index ({root}/iter_0/data/theorems.json).",
    )
    search_splits: list[str] = Field(
        default_factory=lambda: ["train", "pool"], min_length=1,
        description="Splits of the prepared data's index that search covers when search_theorems is unset: 'train' "
        "(theorems with training proofs) and 'pool' (statements only, whose proofs only search can find); a split "
        "the index lacks is skipped.",
    )
    benchmark: str | None = Field(
        default=None,
        description="Theorem index evaluated (miniF2F-style); unset = the test split of the embedded corpus (the "
        "generated world's test theorems and the bundled hand-written ones).",
    )
    eval_base: bool = Field(
        default=True,
        description="Iteration 0 also evaluates the untrained base policy (sft.base_model, else the tiny embedded "
        "model) into iter_0/eval-base/eval.json: the raw baseline the report and the baseline gate start from.",
    )
    search_shards: int = Field(default=2, ge=1, description="Search shards (pods in the cluster).")
    noise_temperature: float | None = Field(
        default=1.2, gt=0, description="Iteration 0: also search at this temperature for diversity (unset = no)."
    )
    eval_budgets: list[int] = Field(
        default_factory=lambda: [10, 50], min_length=1,
        description="Eval budgets per benchmark run, in the unit of search.mode (step: node expansions; whole and "
        "hybrid: proofs sampled).",
    )
    eval_modes: list[SearchMode] = Field(
        default_factory=list,
        description="Also evaluate the benchmark in these search modes (an eval-MODE stage each, with --set "
        "search.mode=MODE, into eval/eval-MODE.json, with the iteration's value model where the mode uses one); the "
        "report puts them beside the main eval at equal generated tokens. E.g. ['step', 'whole', 'hybrid'].",
    )
    eval_proof_budgets: list[int] | None = Field(
        default=None, min_length=1,
        description="Budgets (proofs sampled) of the eval_modes stages in whole or hybrid mode; unset = eval's own "
        "default (search.max_proofs / 4, / 2 and all of it).",
    )
    eval_pass_n: int = Field(default=1, ge=1, description="Eval attempts per theorem (pass@N).")
    gate_min_rate: float = Field(
        default=0.05, ge=0, le=1,
        description="Go/no-go: stop when the raw baseline (the base policy's eval, else iteration 0's) solves less "
        "than this at its largest budget.",
    )
    gate_min_gain: float = Field(
        default=0.0, description="Go/no-go: stop when an iteration gains less than this over the previous one."
    )


class ClusterConfig(Section):
    """Argo / Kubernetes settings for `burnqed render | submit`, the workflow files and the Helm chart (design §3
    Cluster). Names here (ServiceAccount, ConfigMaps, Secret, PriorityClasses) must match the chart's values."""

    namespace: str = Field(default="burnqed", description="Namespace of workflows and their pods.")
    image_registry: str = Field(
        default="ghcr.io/burnqed",
        description="Registry prefix of the burnqed images: {image_registry}/burnqed-core, burnqed-train, "
        "burnqed-sglang.",
    )
    image_tag: str | None = Field(default=None, description="Tag of the burnqed images; unset = the package version.")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Pull policy of every container."
    )
    image_pull_secrets: list[str] = Field(
        default_factory=list, description="Names of existing docker-registry Secrets the pods pull images with."
    )
    sglang_image: str | None = Field(
        default=None,
        description="Image of the SGLang sidecar; unset = {image_registry}/burnqed-sglang:{tag} (images/sglang: the "
        "pinned SGLang base plus the entrypoint that waits for the model folder and sets "
        "SGLANG_RETURN_ORIGINAL_LOGPROB=1). It must provide that entrypoint.",
    )
    sglang_args: list[str] = Field(
        default_factory=list,
        description="Extra arguments of `sglang.launch_server` in the sidecar, e.g. ['--dtype', 'bfloat16'].",
    )
    sglang_cpu: str = Field(default="4", description="CPU request of the SGLang sidecar.")
    sglang_memory: str = Field(
        default="32Gi", description="Memory request and limit of the SGLang sidecar (host memory: it loads weights)."
    )
    model_volume_size: str = Field(
        default="64Gi", description="Size limit of the emptyDir the policy model is downloaded into for the sidecar."
    )
    shm_size: str = Field(default="16Gi", description="Size limit of the memory-backed /dev/shm of GPU pods.")
    scratch_size: str = Field(
        default="50Gi", description="Size limit of the /tmp emptyDir (caches, staged outputs; root FS is read-only)."
    )
    service_account: str = Field(
        default="burnqed-workflow",
        description="ServiceAccount the pods and Argo's executor run as (the main containers get no token).",
    )
    config_map: str = Field(
        default="burnqed-config",
        description="ConfigMap whose key burnqed.toml is mounted into the pods as BURNQED_CONFIG.",
    )
    s3_secret: str | None = Field(
        default="burnqed-s3",
        description="Name of an existing Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (envFrom); only the "
        "name is rendered, never a value. Unset = workload identity (IRSA, GKE Workload Identity).",
    )
    argo_server: str | None = Field(
        default=None,
        description="Argo Server URL for `submit`; unset = $ARGO_SERVER, else the Kubernetes API server of the "
        "kubeconfig's current context, proxied to argo_service.",
    )
    argo_service: str = Field(
        default="argo/http:argo-workflows-server:2746",
        description="NAMESPACE/[SCHEME:]SERVICE:PORT of the Argo Server, reached through the Kubernetes API server's "
        "service proxy when the server comes from the kubeconfig. Default: argo-helm's Service (plain HTTP on 2746) "
        "for a release named argo-workflows in namespace argo; argo-helm names it <release>-argo-workflows-server "
        "(https: when server.secure). This route needs the Argo Server in server auth mode (the API server drops "
        "the Authorization header).",
    )
    argo_token_env: str = Field(
        default="ARGO_TOKEN", description="Environment variable holding the Argo bearer token (never in config)."
    )
    insecure_skip_verify: bool = Field(default=False, description="Skip TLS verification of the Argo Server.")
    gpu_node_selector: dict[str, str] = Field(
        default_factory=lambda: {"burnqed.io/pool": "gpu"}, description="Node selector of GPU steps."
    )
    cpu_node_selector: dict[str, str] = Field(default_factory=dict, description="Node selector of CPU steps.")
    gpu_tolerations: list[dict[str, str]] = Field(
        default_factory=lambda: [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        description="Tolerations of GPU steps (Kubernetes toleration objects).",
    )
    cpu_tolerations: list[dict[str, str]] = Field(
        default_factory=list, description="Tolerations of CPU steps (e.g. for a spot CPU pool)."
    )
    priority_class_gpu: str = Field(default="burnqed-gpu", description="PriorityClass of GPU steps.")
    priority_class_cpu: str = Field(default="burnqed-cpu", description="PriorityClass of CPU steps.")
    search_cpu: str = Field(
        default="16", description="CPU request of the Lean workers' container (search shards, eval, data replay)."
    )
    search_memory: str = Field(
        default="96Gi",
        description="Memory request and limit of the Lean workers' container. `render` refuses it when it is below "
        "lean.workers × lean.recycle_rss_mb + lean_main_memory (an unset lean.workers resolves to what fits).",
    )
    lean_main_memory: str = Field(
        default="4Gi",
        description="Memory set aside for burnqed's own process in a Lean container (search tree, batches, the "
        "trajectory writer; the tiny model in the smoke workflow) when render checks the memory plan.",
    )
    train_cpu: str = Field(default="8", description="CPU request of GPU training steps (SFT, export, EBM).")
    train_memory: str = Field(default="64Gi", description="Memory request and limit of GPU training steps.")
    step_cpu: str = Field(default="2", description="CPU request of CPU-only steps (merge, report).")
    step_memory: str = Field(default="8Gi", description="Memory request and limit of CPU-only steps.")
    gpus_per_step: int = Field(default=1, ge=1, description="GPUs per GPU step (SFT, export, EBM, the sidecar).")
    retries: int = Field(
        default=3,
        ge=0,
        description="Retries of a step that was interrupted: evicted, preempted, its node shut down or lost, its pod "
        "deleted (the retry expression of burnqed.cluster.retry). A step that exits non-zero by itself is not retried: "
        "that is deterministic. 0 = no retryStrategy.",
    )
    retry_oom_killed: bool = Field(
        default=False,
        description="Also retry a step whose main container was OOM-killed. Off: render checks that the Lean workers "
        "fit the memory limit, so an OOM means a size is wrong and the same limits would fail again.",
    )
    retry_backoff_s: int = Field(default=60, ge=1, description="First retry delay; doubles per retry.")
    retry_backoff_cap_s: int = Field(default=1800, ge=1, description="Longest retry delay.")
    step_deadline_s: int = Field(default=86400, ge=60, description="activeDeadlineSeconds of one step.")
    workflow_deadline_s: int = Field(
        default=7 * 86400, ge=60, description="activeDeadlineSeconds of a whole workflow."
    )
    ttl_after_finished_s: int = Field(default=7 * 86400, ge=0, description="Delete finished workflows after this.")
    pod_gc: Literal["OnPodCompletion", "OnPodSuccess", "OnWorkflowCompletion", "OnWorkflowSuccess"] = Field(
        default="OnPodSuccess", description="podGC strategy: by default failed pods stay for inspection until the TTL."
    )
    pod_gc_delay: str = Field(default="10m", description="podGC deleteDelayDuration (time to read logs).")
    artifact_repository: str = Field(
        default="burnqed-artifact-repository",
        description="ConfigMap naming the artifact repository (key 'default') where step logs are archived.",
    )
    template_iterations: int = Field(
        default=3,
        ge=1,
        description="WorkflowTemplates burnqed-iteration-0 .. N-1 are rendered for the chart (an iteration's DAG "
        "depends on its index); `submit` builds any iteration from the workflow files.",
    )
    run_as_user: int = Field(default=1000, ge=1, description="UID of every container (the images' non-root user).")


class ServingConfig(Section):
    """The GPU sidecar of search and eval pods: SGLang serving the policy, and burnqed's encoder beside it when the
    stage scores with the value model. `burnqed render` computes their GPU memory plan from these sizes
    (burnqed/cluster/gpu_plan.py, docs/cluster.md) and refuses a plan that cannot fit. Defaults: one 80 GB GPU
    serving DeepSeek-Prover-V2-7B (Llama-shaped) in bf16."""

    gpu_memory_gib: float = Field(
        default=79.6, gt=0,
        description="Memory of one GPU of the GPU pool as CUDA reports it (nvidia-smi's total MiB / 1024): 79.6 for "
        "an 80 GB A100/H100, 39.4 for a 40 GB A100, 139.8 for an H200.",
    )
    model_config_json: str | None = Field(
        default=None,
        description="A local config.json of the served model; when set, the model_* sizes below are read from it "
        "(hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, "
        "vocab_size, tie_word_embeddings, torch_dtype).",
    )
    model_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        default="bfloat16", description="dtype of the served weights (and of SGLang's KV cache)."
    )
    model_layers: int = Field(default=30, ge=1, description="num_hidden_layers of the served model.")
    model_hidden: int = Field(default=4096, ge=1, description="hidden_size of the served model.")
    model_intermediate: int = Field(default=11008, ge=1, description="intermediate_size (MLP) of the served model.")
    model_heads: int = Field(default=32, ge=1, description="num_attention_heads of the served model.")
    model_kv_heads: int = Field(default=32, ge=1, description="num_key_value_heads (GQA) of the served model.")
    model_head_dim: int | None = Field(
        default=None, ge=1, description="head_dim of the served model; unset = hidden / heads."
    )
    model_vocab: int = Field(default=102400, ge=1, description="vocab_size of the served model.")
    model_tied_embeddings: bool = Field(
        default=False, description="tie_word_embeddings: the LM head shares the input embeddings."
    )
    cuda_context_gib: float = Field(
        default=1.0, ge=0, description="GPU memory of one process's CUDA context and library handles."
    )
    sglang_reserve_gib: float | None = Field(
        default=None, gt=0,
        description="GPU memory SGLang needs outside its static pool (chunked-prefill activations, CUDA graphs); "
        "unset = SGLang 0.5.6's own estimate for the card (13.1 GiB on an 80 GB card).",
    )
    sglang_mem_fraction: float | None = Field(
        default=None, gt=0, lt=1,
        description="Force SGLang's --mem-fraction-static (a share of the memory free when it starts, not of the "
        "card); unset = computed by the plan. A forced value is still checked against the plan.",
    )
    min_kv_tokens: int = Field(
        default=32768, ge=1, description="Smallest KV cache (tokens) the plan accepts for SGLang."
    )


class Config(BaseModel):
    """The whole configuration; one attribute per section."""

    model_config = ConfigDict(extra="forbid")

    lean: LeanConfig = Field(default_factory=LeanConfig, description="The Lean edge.")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="The policy edge.")
    search: SearchConfig = Field(default_factory=SearchConfig, description="Proof search.")
    data: DataConfig = Field(default_factory=DataConfig, description="Data preparation.")
    sft: SftConfig = Field(default_factory=SftConfig, description="Policy fine-tuning.")
    ebm: EbmConfig = Field(default_factory=EbmConfig, description="The value model.")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="Artifact storage.")
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig, description="One expert iteration.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="Argo / Kubernetes.")
    serving: ServingConfig = Field(default_factory=ServingConfig, description="The GPU sidecar's memory plan.")


def parse_value(raw: str) -> Any:
    """A value from env or `--set`: JSON if it parses as JSON, else the string itself."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _assign(tree: dict[str, Any], dotted: str, value: Any, origin: str, origins: dict[str, str]) -> None:
    parts = dotted.split(".")
    if len(parts) < 2 or any(not p for p in parts):
        raise ConfigError(f"{origin}: expected section.key, got {dotted!r}")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{origin}: {dotted!r} goes inside {part!r}, which is not a table")
        node = child
    node[parts[-1]] = value
    origins[".".join(parts[:2])] = origin


def _env_overrides(environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    overrides = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        dotted = ".".join(p.lower() for p in name[len(ENV_PREFIX) :].split("__"))
        if "." not in dotted:
            # BURNQED_CONFIG and the like are not config keys; only SECTION__KEY names are.
            continue
        overrides.append((dotted, environ[name], f"env {name}"))
    return overrides


def _format_validation_error(exc: ValidationError, origins: Mapping[str, str]) -> str:
    problems = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        origin = origins.get(".".join(str(p) for p in error["loc"][:2])) or next(
            (o for key, o in origins.items() if key.startswith(loc + ".")), ""
        )
        where = f" (from {origin})" if origin else ""
        if error["type"] == "extra_forbidden":
            problems.append(f"unknown key {loc}{where}")
        else:
            value = error.get("input")
            shown = f" got {value!r}" if not isinstance(value, dict) else ""
            problems.append(f"{loc}: {error['msg']};{shown}{where}")
    return "invalid configuration: " + "; ".join(problems)


def load_config(
    path: Path | None = None,
    sets: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Build the configuration from file < env < `--set`. Raises `ConfigError` with one clear line."""
    tree: dict[str, Any] = {}
    origins: dict[str, str] = {}
    if path is not None:
        try:
            with path.open("rb") as handle:
                tree = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        for section, body in tree.items():
            if isinstance(body, dict):
                for key in body:
                    origins[f"{section}.{key}"] = f"file {path}"
    for dotted, raw, origin in _env_overrides(environ if environ is not None else {}):
        _assign(tree, dotted, parse_value(raw), origin, origins)
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        _assign(tree, key.strip(), parse_value(raw), f"--set {key.strip()}", origins)
    try:
        return Config.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, origins)) from None
