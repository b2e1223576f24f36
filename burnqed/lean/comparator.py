"""Lean's comparator as the judge of counted proofs (`lean.judge = "comparator"`; docs/lean.md, "Lean's comparator").

    cases = [JudgeCase(name, header, declaration, solution_header, solution_body, definition), ...]
    verdicts = await judge(cases, ComparatorSettings.of(cfg.lean), workdir)   # one JudgeVerdict a case

The cases are batched per header (`batches`: one Lake project, one challenge build, many theorems; a name at most
once a batch). Each batch is a Lake project: `Challenge.lean` (the index's header, every theorem as the benchmark
states it with `sorry` for its proof; the open answer slot stays `sorry` in the header), `Solution.lean` (the header
the proofs compiled under, then each proof), `lakefile.toml` and `comparator.json` (`theorem_names`,
`definition_names`: the open answer slots, `permitted_axioms`, `json_output_path`). The comparator's exit code
decides: 0 with `Your solution is okay!` last on stdout accepts the batch, anything else refuses it; its JSON
report, when it writes one, names which theorem failed and why, else its stdout which kernels accepted
(`read_verdicts`). A batch refused with no report naming a theorem is judged again one
theorem a project, and the theorems a refused run did not name are judged again without the ones it named, so
each verdict is about its own proof.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from burnqed.base.sandbox import LeanIdentity, lean_identity, sealed_environment, spawn_options
from burnqed.config.lean import LeanConfig
from burnqed.config.section import PYTHON_PLACEHOLDER
from burnqed.errors import ConfigError

CONFIG_PLACEHOLDER = "{config}"  # in lean.comparator_command: the config's path
PERMITTED_AXIOMS: tuple[str, ...] = ("propext", "Quot.sound", "Classical.choice")  # comparator's README and tests
CHALLENGE, SOLUTION = "Challenge", "Solution"
CONFIG_FILE, REPORT_FILE = "comparator.json", "comparator-report.json"
STREAM_LIMIT = 64_000  # characters of the comparator's stderr kept: its last `uncaught exception:` line is the reason
UNCAUGHT = "uncaught exception: "  # how a Lean `main` that throws says why (its exit code is then 1)
OKAY = "Your solution is okay!"  # comparator's last stdout line when every check held (Main.lean)
KERNEL_ACCEPTS = re.compile(r"^(.+) kernel accepts the solution$", re.MULTILINE)  # one line per kernel (Main.lean)


class ComparatorOutcome(BaseModel):
    """One target's outcome in comparator's JSON report (docs/lean.md, "The JSON report")."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)

    target: str
    target_kind: Literal["theorem", "definition"] = Field(alias="targetKind")
    accepted: bool
    failure_category: str | None = Field(default=None, alias="failureCategory")
    failure_message: str | None = Field(default=None, alias="failureMessage")
    unpermitted_axioms: list[str] = Field(default_factory=list, alias="unpermittedAxioms")
    transitive_axioms: list[str] = Field(default_factory=list, alias="transitiveAxioms")


class ComparatorReport(BaseModel):
    """comparator's JSON report (`json_output_path`): one outcome per target, then the kernels' verdicts (absent
    when the run stopped before them)."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)

    outcomes: list[ComparatorOutcome]
    kernel_accepted: bool | None = Field(default=None, alias="kernelAccepted")
    kernel_failure_message: str | None = Field(default=None, alias="kernelFailureMessage")
    nanoda_accepted: bool | None = Field(default=None, alias="nanodaAccepted")
    nanoda_failure_message: str | None = Field(default=None, alias="nanodaFailureMessage")

    def kernels(self) -> list[str]:
        """The kernels the report says accepted the solution."""
        return [name for name, accepted in (("lean", self.kernel_accepted), ("nanoda", self.nanoda_accepted))
                if accepted]


class JudgeRecord(BaseModel):
    """Who counted a theorem's proof (eval.json's `per_theorem[].judge`)."""

    model_config = ConfigDict(extra="forbid")

    judge: Literal["burnqed", "comparator", "pending"] = Field(
        description="Who had the last word on the proof; 'pending': comparator judges it in a later step (an eval "
        "run with --defer-judge, before `burnqed judge`), so nothing it counts is final yet.")
    why: str | None = Field(default=None, description="Why this judge (the embedded Lean has no comparator).")
    toolchain: str | None = Field(default=None, description="The Lean toolchain comparator ran under, if known.")
    command: list[str] | None = Field(default=None, description="The comparator's argv (lean.comparator_command).")
    paranoid: bool = Field(default=False, description="--paranoid was passed.")
    sandboxed: bool = Field(default=True, description="False when --inadvisably-no-sandbox was passed.")
    kernels: list[str] = Field(default_factory=list, description="The kernels that replayed the solution "
                               "and accepted it, as the report names them.")
    accepted: bool | None = Field(default=None, description="comparator's verdict (None: burnqed judged).")
    category: str | None = Field(default=None, description="comparator's failureCategory when it refused.")
    reason: str | None = Field(default=None, description="comparator's message when it refused.")
    alarm: bool = Field(default=False, description="A soundness alarm: burnqed counted the proof, comparator "
                        "refused it; the proof is not counted.")


@dataclass(frozen=True, slots=True)
class ComparatorSettings:
    """How comparator runs (the `lean.comparator_*` settings)."""

    command: tuple[str, ...]
    paranoid: bool = False
    no_sandbox: bool = False
    timeout_s: float = 1800.0
    env: Mapping[str, str] | None = None
    lake_project: str | None = None  # lean.cwd: a Lake project whose lakefile, manifest and packages are reused
    run_as_uid: int | None = None  # lean.run_as_uid: comparator runs as Lean does, never as burnqed's (root) user
    permitted_axioms: tuple[str, ...] = PERMITTED_AXIOMS

    @classmethod
    def of(cls, lean: LeanConfig) -> ComparatorSettings:
        """The settings `lean` gives."""
        return cls(tuple(lean.comparator_command), paranoid=lean.comparator_paranoid,
                   no_sandbox=lean.comparator_no_sandbox, timeout_s=lean.comparator_timeout_s, env=dict(lean.env),
                   lake_project=lean.cwd, run_as_uid=lean.run_as_uid)

    def argv(self, config: Path) -> list[str]:
        """The command with `{config}` and `{python}` expanded, then --paranoid and --inadvisably-no-sandbox."""
        argv = [str(config) if part == CONFIG_PLACEHOLDER else sys.executable if part == PYTHON_PLACEHOLDER
                else part for part in self.command]
        return argv + ["--paranoid"] * self.paranoid + ["--inadvisably-no-sandbox"] * self.no_sandbox

    def record(self, toolchain: str | None) -> JudgeRecord:
        """The judge record of a theorem this comparator judged (its verdict added by the caller)."""
        return JudgeRecord(judge="comparator", toolchain=toolchain, command=list(self.command),
                           paranoid=self.paranoid, sandboxed=not self.no_sandbox)


@dataclass(frozen=True, slots=True)
class JudgeCase:
    """One counted proof to judge: its theorem's name, the index's header (its open answer slot `sorry`), the
    theorem's declaration as the benchmark states it (no `:=`), the header the proof compiled under and the proof
    without it, and the open answer slot's name (a definition hole) when it has one."""

    name: str
    header: str
    declaration: str
    solution_header: str
    solution_body: str
    definition: str | None = None


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    """comparator's verdict on one theorem."""

    name: str
    accepted: bool
    category: str | None = None
    reason: str | None = None
    kernels: tuple[str, ...] = ()


def batches(cases: Sequence[JudgeCase]) -> list[list[JudgeCase]]:
    """`cases` grouped by (header, the header they compiled under), each name at most once a batch (a theorem's
    second proof, from another pass, goes to a later batch), in the order first seen."""
    out: list[list[JudgeCase]] = []
    open_batches: dict[tuple[str, str], list[int]] = {}
    for case in cases:
        key = (case.header, case.solution_header)
        slot = next((i for i in open_batches.get(key, []) if all(c.name != case.name for c in out[i])), None)
        if slot is None:
            out.append([])
            slot = len(out) - 1
            open_batches.setdefault(key, []).append(slot)
        out[slot].append(case)
    return out


def challenge_text(batch: Sequence[JudgeCase]) -> str:
    """`Challenge.lean`: the index's header, then each theorem as the benchmark states it, proved by `sorry`."""
    theorems = "\n\n".join(f"{case.declaration} := by\n  sorry" for case in batch)
    return f"{_head(batch[0].header)}{theorems}\n"


def solution_text(batch: Sequence[JudgeCase]) -> str:
    """`Solution.lean`: the header the proofs compiled under, then each proof."""
    bodies = "\n\n".join(case.solution_body.strip("\n") for case in batch)
    return f"{_head(batch[0].solution_header)}{bodies}\n"


def _head(header: str) -> str:
    return f"{header.rstrip()}\n\n" if header.strip() else ""


def comparator_config(batch: Sequence[JudgeCase], settings: ComparatorSettings, report: Path) -> dict[str, object]:
    """The config comparator reads (docs/lean.md, "Config")."""
    return {
        "challenge_module": CHALLENGE,
        "solution_module": SOLUTION,
        "theorem_names": [case.name for case in batch],
        "definition_names": sorted({case.definition for case in batch if case.definition is not None}),
        "permitted_axioms": list(settings.permitted_axioms),
        "json_output_path": str(report),
    }


LAKEFILE = 'name = "burnqed_judge"\n\n[[lean_lib]]\nname = "Challenge"\n\n[[lean_lib]]\nname = "Solution"\n'


def write_project(folder: Path, batch: Sequence[JudgeCase], settings: ComparatorSettings) -> Path:
    """The batch's Lake project in `folder` (created; it must not exist: comparator needs a solution never built
    before); its config's path. With `settings.lake_project` (lean.cwd), that project's `lean-toolchain`,
    `lake-manifest.json` and lakefile's requirements are reused and its `.lake/packages` linked, so the header's
    imports (Mathlib) resolve."""
    folder.mkdir(parents=True)
    lakefile = LAKEFILE
    if settings.lake_project is not None:
        lakefile = _reuse_project(Path(settings.lake_project), folder) or LAKEFILE
    (folder / "lakefile.toml").write_text(lakefile, encoding="utf-8")
    (folder / f"{CHALLENGE}.lean").write_text(challenge_text(batch), encoding="utf-8")
    (folder / f"{SOLUTION}.lean").write_text(solution_text(batch), encoding="utf-8")
    config = folder / CONFIG_FILE
    config.write_text(json.dumps(comparator_config(batch, settings, folder / REPORT_FILE), indent=2), encoding="utf-8")
    return config


def _reuse_project(project: Path, folder: Path) -> str | None:
    """Copy `project`'s toolchain and manifest into `folder`, link its packages; the lakefile to write (its
    `[[require]]` blocks, then the judge's libraries), or None when it has no lakefile.toml."""
    for name in ("lean-toolchain", "lake-manifest.json"):
        if (project / name).is_file():
            shutil.copyfile(project / name, folder / name)
    packages = project / ".lake" / "packages"
    if packages.is_dir():
        (folder / ".lake").mkdir()
        (folder / ".lake" / "packages").symlink_to(packages.resolve())
    lakefile = project / "lakefile.toml"
    if not lakefile.is_file():
        return None
    blocks = lakefile.read_text(encoding="utf-8").split("[[")
    requires = "".join(f"[[{block}" for block in blocks[1:] if block.startswith("require]]"))
    return LAKEFILE + ("\n" + requires if requires else "")


def transcript_kernels(stdout: str) -> tuple[str, ...]:
    """The kernels comparator's stdout says accepted the solution (`X kernel accepts the solution`; Lean's own,
    `Lean default`, as `lean`)."""
    names = [name.strip() for name in KERNEL_ACCEPTS.findall(stdout)]
    return tuple(dict.fromkeys("lean" if name == "Lean default" else name for name in names))


def read_verdicts(batch: Sequence[JudgeCase], returncode: int, stderr: str, report: str | None,
                  stdout: str | None = None) -> list[JudgeVerdict]:
    """Each theorem's verdict from a run's exit code, stderr, JSON report (None: not written) and, when given, stdout.
    Exit 0 accepts a theorem unless the report refuses it, and, with `stdout`, only when it ends with `Your solution is
    okay!` (positive evidence: a run that printed nothing accepts nothing); a non-zero exit refuses every theorem the
    report does not accept, with the report's message, or stderr's last `uncaught exception:` line. The kernels are
    the report's, else those stdout says accepted."""
    parsed = ComparatorReport.model_validate_json(report) if report is not None else None
    outcomes = {o.target: o for o in parsed.outcomes if o.target_kind == "theorem"} if parsed else {}
    holes = {o.target: o for o in parsed.outcomes if o.target_kind == "definition"} if parsed else {}
    kernels = tuple(parsed.kernels()) if parsed else transcript_kernels(stdout or "")
    reason = _uncaught(stderr) or f"comparator exited with {returncode}"
    if returncode == 0 and stdout is not None and OKAY not in stdout.strip().splitlines()[-1:]:
        returncode, reason = -1, f"comparator exited with 0 without saying {OKAY!r}"
    if parsed is not None and parsed.kernel_accepted is False:
        reason = f"the kernel refused the solution: {parsed.kernel_failure_message}"
    verdicts = []
    for case in batch:
        found = outcomes.get(case.name)
        hole = holes.get(case.definition or "")
        if hole is not None and not hole.accepted:
            verdicts.append(JudgeVerdict(case.name, False, hole.failure_category, hole.failure_message, kernels))
        elif found is not None and not found.accepted:
            verdicts.append(JudgeVerdict(case.name, False, found.failure_category, found.failure_message, kernels))
        elif returncode == 0:
            verdicts.append(JudgeVerdict(case.name, True, kernels=kernels or (("lean",) if stdout is None else ())))
        else:
            verdicts.append(JudgeVerdict(case.name, False, "run", reason, kernels))
    return verdicts


def _uncaught(stderr: str) -> str | None:
    lines = [line for line in stderr.splitlines() if line.startswith(UNCAUGHT)]
    return lines[-1].removeprefix(UNCAUGHT).strip() if lines else None


def hand_over(folder: Path, identity: LeanIdentity) -> None:
    """`folder` and what burnqed wrote in it owned by `identity` (comparator writes `.lake` and its report there), its
    parent traversable; the linked packages stay as they are."""
    os.chmod(folder.parent, 0o711)
    for path in [folder, *folder.iterdir(), *(folder / ".lake").glob("*")]:
        if not path.is_symlink():
            os.chown(path, identity.uid, identity.gid)


async def run_comparator(folder: Path, config: Path, settings: ComparatorSettings) -> tuple[int, str, str]:
    """Run comparator in `folder` under the deadline; (exit code, stderr's and stdout's last STREAM_LIMIT
    characters). A run past the deadline is killed (its process group) and answers -1; a command that cannot start
    is a ConfigError."""
    passed = {name: value for name, value in os.environ.items() if name.startswith("COMPARATOR_")}
    env = sealed_environment(os.environ, {**passed, **(settings.env or {})})
    identity = lean_identity(settings.run_as_uid)
    spawn = spawn_options(identity, os.environ)  # ConfigError when the separation cannot hold, before any run
    if identity is not None:
        hand_over(folder, identity)
    argv = settings.argv(config)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=folder, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, **spawn)
    except OSError as exc:  # no verdict at all: never read as a refusal (an alarm) nor as an acceptance
        raise ConfigError(f"lean.comparator_command: {argv[0]!r} cannot run: {exc.strerror or exc}") from None
    try:
        out, err = await asyncio.wait_for(process.communicate(), settings.timeout_s)
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        return -1, f"{UNCAUGHT}comparator ran past lean.comparator_timeout_s ({settings.timeout_s:g} s)", ""
    code = process.returncode if process.returncode is not None else -1
    return code, err.decode("utf-8", "replace")[-STREAM_LIMIT:], out.decode("utf-8", "replace")[-STREAM_LIMIT:]


async def judge_batch(batch: Sequence[JudgeCase], settings: ComparatorSettings, folder: Path) -> list[JudgeVerdict]:
    """One batch judged in a fresh project at `folder`."""
    config = write_project(folder, batch, settings)
    returncode, stderr, stdout = await run_comparator(folder, config, settings)
    report = folder / REPORT_FILE
    text = report.read_text(encoding="utf-8") if report.is_file() else None
    return read_verdicts(batch, returncode, stderr, text, stdout)


async def judge(cases: Sequence[JudgeCase], settings: ComparatorSettings, workdir: Path) -> list[JudgeVerdict]:
    """Every case judged (see the module docstring), one verdict a case in `cases`' order."""
    verdicts: dict[int, JudgeVerdict] = {}
    for k, batch in enumerate(batches(cases)):
        judged = await _judge_until_named(batch, settings, workdir / f"batch-{k}")
        for case, verdict in zip(batch, judged, strict=True):
            verdicts[id(case)] = verdict
    return [verdicts[id(case)] for case in cases]


async def _judge_until_named(batch: Sequence[JudgeCase], settings: ComparatorSettings, folder: Path
                             ) -> list[JudgeVerdict]:
    """`batch` judged at `folder`; the theorems a refused run did not refuse by name (category "run": comparator
    stopped at another, or named none) judged again without the ones it named, or one a project when it named none
    (`folder-0`, `folder-1`, …), so each verdict is about its own proof."""
    judged = await judge_batch(batch, settings, folder)
    pending = [i for i, verdict in enumerate(judged) if verdict.category == "run"]
    if not pending or len(batch) == 1:
        return judged
    if len(pending) < len(batch):
        again = await _judge_until_named([batch[i] for i in pending], settings, folder.with_name(f"{folder.name}-r"))
    else:
        again = [(await judge_batch([batch[i]], settings, folder.with_name(f"{folder.name}-{i}")))[0]
                 for i in pending]
    for i, verdict in zip(pending, again, strict=True):
        judged[i] = verdict
    return judged


__all__ = ["ComparatorOutcome", "ComparatorReport", "ComparatorSettings", "JudgeCase", "JudgeRecord", "JudgeVerdict",
           "batches", "challenge_text", "comparator_config", "judge", "read_verdicts", "solution_text",
           "transcript_kernels", "write_project"]
