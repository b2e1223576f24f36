"""The `[lean]` section: how Lean (Pantograph's `repl`) workers start, run, recycle and are guarded (docs/lean.md)."""

from __future__ import annotations

import sys
from itertools import pairwise
from typing import Literal

from pydantic import Field, field_validator, model_validator

from burnqed.base.resources import machine_workers
from burnqed.config.identity import neutral, recorded, searched, shapes
from burnqed.config.section import PYTHON_PLACEHOLDER, Section
from leankit.version import COMPARATOR_LEAN, ships_comparator

# The tactic guard's deny list by default (`burnqed.lean.guard`: what each rule refuses and why; every rule has a
# case only it refuses in tests/lean/test_guard_soundness.py). Regular expressions, matched per line. Commands are
# not listed: the guard refuses every token that starts one (`leankit.commands.command_tokens`: `instance`, `axiom`,
# `open`, `end`, `set_option`, `notation`, `#eval`, `@[`, `run_cmd`, … at any column, in any spelling) by a rule of
# its own that this list cannot switch off.
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
    # Running arbitrary code inside Lean (the commands that do, `run_cmd`, `#eval`, …, are refused as commands).
    r"\brun_tac\b",
    r"\bIO\.",
    r"\bSystem\.",
    r"\bunsafe",  # unsafe, unsafeCast, unsafeIO, ...
    r"\bimplemented_by\b",
    r"\bextern\b",
    r"\bcsimp\b",
    # Metaprograms in terms: elaborate, or add declarations (an axiom) to the environment.
    r"\bby_elab\b",
    r"\b(Lean\.)?(Elab|Meta)\.",  # Lean.Elab.*, Lean.Meta.*, also after `open Lean`
    r"\bLean\.(Environment|Kernel|Compiler|Parser|Syntax|Macro|Declaration|IR|Core)\b",
    r"\b(addDecl|addAndCompile|axiomDecl|modifyEnv|setEnv)\b",
    # Options named outside `set_option` (itself a command): a metaprogram's `withOptions`, `Options.setBool`. Set
    # inside a proof, one switches the kernel off or lifts a limit a shared worker relies on.
    r"\bdebug\.",
    r"\ballowUnsafeReducibility\b",
    # Tactics and terms that compile and run a term the text wrote, or do IO, while they elaborate (read in core
    # Lean, Mathlib, Plausible and ProofWidgets; docs/lean.md, "The tactic guard"). None of them proves anything.
    r"\binclude_str\b",  # core: `evalTerm` of its path argument, then `IO.FS.readFile` of it (`..` allowed)
    r"\beval%",  # Mathlib/Tactic/Eval.lean: `Meta.evalExpr` of the term
    r"\b(plausible|slim_check)\b",  # Plausible/Tactic.lean: `evalExpr` of `Testable.check` of the goal, then sorry
    r"\bwith_panel_widgets\b",  # ProofWidgets: `evalWidgetInstance` (`evalExpr'`) of the props term
    r"\bbv_check\b",  # core: reads the LRAT file it names from disk, then trusts `ofReduceBool`
    r"\bpolyrith\b",  # Mathlib/Tactic/Polyrith.lean: runs `curl` (`IO.Process.output`) to sagecell.sagemath.org
    r"\bsleep\b",  # core tactic: `IO.sleep` of up to 2³² ms, no heartbeat nor cancellation checked: past the timeout
    # Effects of code the compiler runs while a tactic elaborates: core's `declare_config_elab` evaluates every
    # tactic configuration (`simp (maxSteps := e)`, `(config := e)`, `+opt`) with `Meta.evalExpr'`. The macros
    # and root names that print (`println!` expands to `IO.println`, run by applying the action to `()`),
    # sleep, abort or spawn threads there; a configuration is a literal (the guard's built-in rule) and needs none.
    r"\bdbg(_trace|Trace\w*|Sleep|StackTrace)\b|\b(println|unreachable|assert)!|\bpanic|\b(timeit|allocprof)\b"
    r"|\bTask\b",  # Task.spawn, Task.map, BaseIO.asTask: a thread that outlives the tactic
    # Lean's own IO outside `IO.`/`System.`, for code a route not known here would run: `Lean.Lsp.Ipc.runWith` spawns
    # any program, `Lean.saveModuleData` writes an .olean (imports are trusted: the recheck checks the file's own).
    r"\bLean\.(Lsp|Server|JsonRpc|Language)\b|\b(save|read)ModuleData\w*|\bwriteModule\b|\bStd\.Internal\b|\bLake\.",
)

EMBEDDED_WHY = "the embedded Lean (minilean) has no comparator"


def embedded_lean(command: list[str]) -> bool:
    """`command` runs the embedded minilean (`-m minilean`), which has no comparator."""
    return any(a == "-m" and b == "minilean" for a, b in pairwise(command))


class LeanConfig(Section):
    """How Lean (Pantograph's `repl`) processes are started, timed, recycled and guarded."""

    command: list[str] = Field(
        default=[PYTHON_PLACEHOLDER, "-m", "minilean", "--fallback-module", "minilean.replay"],
        min_length=1,
        description="argv of one Lean worker, e.g. ['repl', 'Mathlib'] for Pantograph. "
        "'{python}' expands to the running interpreter; the default is minilean, the embedded small Lean that "
        "checks the generated world and the bundled theorems inside its fragment, handing what lies outside it "
        "(∑, Nat.Prime, π, …) to the recorded replay server (docs/minilean.md).",
        json_schema_extra=shapes("prepare-data", note="search and eval record its backend's label (lean backend)"),
    )
    cwd: str | None = Field(default=None, description="Working directory of the worker (a Lake project).",
                            json_schema_extra=neutral("a folder: where the Lean project is"))
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables for the worker on top of the few it inherits (PATH, HOME, locale, "
        "LEAN_*, ELAN_*, LAKE_*; see docs/lean.md), e.g. LEAN_PATH. Credential-looking names (AWS_*, *TOKEN*, "
        "*SECRET*, *KEY*, *PASSWORD*, *CREDENTIAL*) are refused: Lean runs generated code.",
        json_schema_extra=neutral("the workers' environment: where Lean finds its libraries, a test's slowdown"),
    )
    run_as_uid: int | None = Field(
        default=None,
        ge=1,
        description="Start every Lean process under this uid (its group has the same number, no supplementary "
        "groups), so generated code cannot read burnqed's credentials (its /proc/PID/environ, the IRSA token file). "
        "Needs CAP_SETUID, CAP_SETGID and CAP_KILL: the cluster's Lean containers set it (cluster.lean_uid). "
        "Unset = Lean runs as burnqed's own user, with a scrubbed environment only.",
        json_schema_extra=neutral("which user Lean runs as (its sandbox)"),
    )
    pantograph_version: str | None = Field(
        default=None,
        description="Pantograph version lean.command runs (0.2.25 or 0.3.0-0.3.16, or a backport's X.Y.Z/vLEAN; "
        "requests differ per version); unset = asked once per pool by running lean.command's REPL with --version.",
        json_schema_extra=neutral("the protocol's version: which fields a request carries, not its answer"),
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        description="Number of Lean worker processes in the pool; unset = min(16, 0.75 × cores, "
        "available memory / worker_memory_mb), at least 1.",
        json_schema_extra=neutral("how many Lean processes work at once"),
    )
    worker_memory_mb: int = Field(
        default=6000, ge=1, description="Expected memory of one worker, used to cap the automatic worker count.",
        json_schema_extra=neutral("caps the automatic worker count"),
    )
    worker_memory_limit_mb: int = Field(
        default=16000,
        ge=0,
        description="Hard limit of one Lean worker's memory (MiB): the process may hold no more private writable "
        "memory (RLIMIT_DATA; the .olean files it maps do not count). A request whose elaboration allocates past it "
        "(code Lean runs, such as a tactic configuration, or a huge term) fails as a crash recorded as out of "
        "memory, and the worker is replaced; 0 = no limit. Rendered cluster pods lower it to each worker's share of "
        "the Lean container's memory limit.",
        json_schema_extra=neutral("bounds a worker's memory; a request past it fails as a crash, like a watchdog kill"),
    )
    tactic_timeout_s: float = Field(
        default=25.0, gt=0, description="Lean-side timeout per command (Pantograph options.set timeout).",
        json_schema_extra=searched(stages=("prepare-data",)),
    )
    compile_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Timeout of one proof compile (frontend.process: the final check of a found proof). It runs on "
        "a verifier worker of its own (lean.verifier_workers) whose Lean-side timeout this is (Pantograph honours it "
        "for frontend.process from 0.3.4; before, only the client watchdog, this plus watchdog_grace_s, bounds it); "
        "a compile that runs out fails alone.",
        json_schema_extra=searched(),
    )
    verifier_workers: int = Field(
        default=1,
        ge=0,
        description="Lean worker processes that only compile found proofs, so a compile that times out or crashes "
        "takes no search states with it (started on the first compile); 0 = compile on the theorem's own shared "
        "worker under its tactic timeout (a compile watchdog kill then drops every theorem's states there).",
        json_schema_extra=neutral("which processes compile found proofs"),
    )
    watchdog_grace_s: float = Field(
        default=5.0,
        gt=0,
        description="The client watchdog fires this long after tactic_timeout_s; it kills and respawns the worker.",
        json_schema_extra=neutral("how long the client waits past Lean's own timeout before it restarts a worker"),
    )
    ready_timeout_s: float = Field(
        default=120.0, gt=0, description="Deadline for the worker's `ready.` line (Mathlib import takes 60-90 s).",
        json_schema_extra=neutral("how long a worker may take to start"),
    )
    recycle_requests: int = Field(default=1000, ge=1, description="Restart a worker after this many requests.",
                                  json_schema_extra=neutral("when a worker is restarted"))
    recycle_seconds: float = Field(default=1800.0, gt=0, description="Restart a worker after this age.",
                                   json_schema_extra=neutral("when a worker is restarted"))
    recycle_rss_mb: int = Field(
        default=12000, ge=0, description="Restart a worker whose resident memory exceeds this (0 = never).",
        json_schema_extra=neutral("when a worker is restarted"),
    )
    automatic_mode: bool = Field(
        default=True, description="Pantograph automaticMode: sibling goals stay in the state after a tactic.",
        json_schema_extra=searched(stages=("prepare-data",)),
    )
    deny: list[str] = Field(
        default=list(DEFAULT_DENY),
        description="Tactic guard: regular expressions; a tactic matching any is refused before reaching Lean. "
        "Built in beside them, not switched off here: no token that starts a command (instance, axiom, open, "
        "set_option, #eval, …), no sorryAx, and no tactic configuration but a literal (Lean runs it).",
        json_schema_extra=searched(stages=("prepare-data", "trace-data")),
    )
    max_tactic_chars: int = Field(
        default=4000, ge=1, description="Tactic guard: a tactic sent to Lean alone (a step of a search, a replayed "
        "tactic) longer than this is refused (runaway generations). A whole proof's top-level tactics are bounded "
        "by max_text_chars instead (one may be a long `have … := by` block).",
        json_schema_extra=searched(stages=("prepare-data", "trace-data")),
    )
    max_text_chars: int = Field(
        default=100_000, ge=1,
        description="Longest model text read at all: a completion, whole proof, answer, sketch or repair longer than "
        "this is refused, its length named, before any reader lexes it (a model caught in a loop writes megabytes; "
        "32k tokens of reasoning run to about 100,000 characters). A tactic sent alone has its own cap, "
        "max_tactic_chars.",
        json_schema_extra=searched(stages=("prepare-data", "trace-data")),
    )

    judge: Literal["auto", "burnqed", "comparator"] = Field(
        default="auto",
        description="Who has the last word on a proof eval counts: 'burnqed' (its own compile checks, docs/lean.md, "
        "\"Soundness\") or 'comparator' (Lean's comparator, lean.comparator_command, run after the search on every "
        "counted proof: one it refuses is a soundness alarm, not counted); 'auto': comparator where the toolchain "
        "ships `lake comparator` (lean.toolchain, Lean >= v4.35.0-rc2), burnqed otherwise and on the embedded "
        "minilean, which has no comparator (with it 'comparator' is refused). Every result says which judge and why.",
        json_schema_extra=recorded("eval records the judge of every theorem (per_theorem[].judge); compare refuses "
                                   "results counted by different judges"),
    )
    toolchain: str | None = Field(
        default=None,
        description="The Lean toolchain lean.command runs, as elan names it ('leanprover/lean4:v4.35.0') or its "
        "version ('4.35.0'); unset = the Lean of a backport's lean.pantograph_version (X.Y.Z/vLEAN), else not known. "
        "It decides lean.judge = 'auto' (the same on the machine that renders the workflows and in their pods).",
        json_schema_extra=recorded("eval records the judge it decides (per_theorem[].judge)"),
    )
    comparator_command: list[str] = Field(
        default=["lake", "comparator", "--config", "{config}"],
        min_length=1,
        description="argv of Lean's comparator, run in the judge's Lake project (Challenge.lean, Solution.lean); "
        "'{config}' is its config's path, '{python}' the running interpreter. For a toolchain before v4.35.0-rc2, "
        "the standalone binary: ['lake', 'env', '/path/to/comparator', '{config}'].",
        json_schema_extra=recorded("eval records the command per theorem (per_theorem[].judge.command)"),
    )
    comparator_paranoid: bool = Field(
        default=False,
        description="Pass --paranoid to comparator: more kernels replay the solution (lake comparator only).",
        json_schema_extra=recorded("eval records it per theorem (per_theorem[].judge.paranoid)"),
    )
    comparator_no_sandbox: bool = Field(
        default=False,
        description="Pass --inadvisably-no-sandbox to comparator: the solution is built outside Landlock/bubblewrap "
        "(where the kernel lacks them, e.g. macOS). The eval's report prints that it was.",
        json_schema_extra=recorded("eval records it per theorem (per_theorem[].judge.sandboxed) and prints it"),
    )
    comparator_timeout_s: float = Field(
        default=1800.0, gt=0,
        description="Deadline of one comparator run (one batch: a header's theorems); a run past it refuses its batch.",
        json_schema_extra=neutral("how long the judge may take"),
    )

    def lean_version(self) -> str | None:
        """The Lean version this configuration names (`toolchain`, else a backport's `pantograph_version` suffix)."""
        if self.toolchain:
            return self.toolchain
        _, sep, lean = (self.pantograph_version or "").partition("/")
        return lean if sep else None

    def judged_by(self) -> tuple[Literal["burnqed", "comparator"], str | None]:
        """Who judges eval's counted proofs (`judge`, 'auto' decided from `lean_version`) and, for burnqed, why."""
        if embedded_lean(self.command):
            return "burnqed", EMBEDDED_WHY
        if self.judge != "auto":
            return self.judge, None if self.judge == "comparator" else "lean.judge = 'burnqed'"
        lean = self.lean_version()
        if lean is not None and ships_comparator(lean):
            return "comparator", None
        named = f"Lean {lean} (lean.toolchain)" if lean else "no Lean version is configured (lean.toolchain)"
        return "burnqed", (f"lean.judge = 'auto' and {named}: `lake comparator` ships with Lean >= v{COMPARATOR_LEAN}; "
                           "lean.judge = 'comparator' runs the standalone comparator (lean.comparator_command)")

    @model_validator(mode="after")
    def _judge_has_a_comparator(self) -> LeanConfig:
        if self.judge == "comparator" and embedded_lean(self.command):
            raise ValueError("lean.judge = 'comparator' needs a real Lean: the embedded minilean has no comparator; "
                             "set lean.judge = 'burnqed' or lean.command to a Pantograph REPL")
        return self

    @field_validator("env")
    @classmethod
    def _no_credentials(cls, env: dict[str, str]) -> dict[str, str]:
        from burnqed.base.sandbox import credential_names

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
        from leankit.failures import BadInput
        from leankit.version import supported_version

        if version is None:
            return None
        try:
            return str(supported_version(version))
        except BadInput as exc:
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
        # The verifier workers are Lean processes too: they take their share of the machine first.
        return max(1, machine_workers(self.worker_memory_mb) - self.verifier_workers)
