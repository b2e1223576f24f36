"""The judge of counted proofs (`lean.judge`; docs/search.md, "The judge"): with `comparator`, every proof a search
counted goes through Lean's comparator (`lean.comparator`), batched per header, and one it refuses is a **soundness
alarm**: not counted (`judge_refused`, comparator's reason in its detail). Eval judges its passes with it
(`eval.judging` records the verdicts in eval.json), the judged merge the search's proofs before they train
(`stages.judge_merge`).

    attempts, records = await judge_passes(theorems, attempts, settings)   # records: name → JudgeRecord
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from burnqed.config.lean import EMBEDDED_WHY
from burnqed.errors import ConfigError
from burnqed.lean.comparator import ComparatorSettings, JudgeCase, JudgeRecord, JudgeVerdict, judge
from burnqed.lean.selftest import comparator_evidence
from burnqed.lean.start import START_FORM
from burnqed.lean.stored_proof import assembled_header
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot
from leankit.version import DEFINITION_HOLES_LEAN, DEFINITION_HOLES_SAID, lacks_definition_holes

log = logging.getLogger(__name__)
SOUNDNESS_ALARM_EXIT = 4  # `burnqed eval`'s exit code when comparator refused a proof burnqed counted
REFUSED = "comparator refused it"  # the detail's start of a proof the judge did not count
EMBEDDED = EMBEDDED_WHY
PENDING_WHY = "eval ran with --defer-judge: `burnqed judge` (the workflows' judge step) judges its proofs"

@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """Who judges eval's counted proofs: comparator (`comparator` set) or burnqed, and why."""

    comparator: ComparatorSettings | None = None
    toolchain: str | None = None  # the `lean-toolchain` of lean.cwd, when it has one
    why: str | None = None  # why burnqed judges (no comparator on the embedded Lean)
    deferred: bool = False  # comparator judges in a later step (`burnqed judge`): each theorem's judge is `pending`

    @property
    def name(self) -> str:
        """Who counts: the judge eval.json records (`judges_of`)."""
        return "comparator" if self.comparator is not None else "pending" if self.deferred else "burnqed"

    @classmethod
    def of(cls, judge: tuple[str, str | None], settings: ComparatorSettings, lean_backend: str, *,
           deferred: bool = False) -> JudgeSettings:
        """The judge `judge` names with why (`LeanConfig.judged_by`: lean.judge decided); the embedded Lean's is
        burnqed, saying why; with `deferred` (eval's --defer-judge) comparator's verdict is left to the judge step.
        ConfigError (before any search) when the comparator's program is not found, or lean.cwd has no lakefile.toml
        to take requirements from."""
        judge_name, why = judge
        if lean_backend in ("minilean", "replay"):
            return cls(why=EMBEDDED)
        if judge_name != "comparator":
            return cls(why=why or "lean.judge = 'burnqed'")
        project = Path(settings.lake_project) if settings.lake_project else None
        toolchain = project / "lean-toolchain" if project is not None else None
        pinned = toolchain.read_text(encoding="utf-8").strip() if toolchain and toolchain.is_file() else None
        if deferred:  # its toolchain only says whether the judge step's comparator has definition holes
            return cls(why=PENDING_WHY, deferred=True, toolchain=pinned)
        program = settings.argv(Path("comparator.json"))[0]
        if shutil.which(program, path=os.environ.get("PATH")) is None:
            raise ConfigError(f"lean.comparator_command: {program!r} is not a program here (not on PATH): install "
                              "comparator (lake comparator: Lean >= v4.35.0-rc2) or set lean.judge = 'burnqed'")
        if project is not None and not (project / "lakefile.toml").is_file():
            raise ConfigError(f"lean.judge = 'comparator': the judge's Lake projects take their requirements from "
                              f"lean.cwd's lakefile.toml, and {project} has none (a lakefile.lean is not read): set "
                              "lean.cwd to a Lake project with a lakefile.toml that requires what the headers import")
        return cls(comparator=settings, toolchain=pinned)

async def check_judge(settings: JudgeSettings) -> None:
    """`ConfigError` (one line, before any search or judging) unless the comparator `settings` judges with shows it
    judges (`lean.selftest.comparator_evidence`: an honest proof accepted, a sorryAx refused); nothing to check with
    burnqed as the judge or with the judge deferred."""
    if settings.comparator is None:
        return
    failed = await comparator_evidence(settings.comparator)
    if failed is not None:
        raise ConfigError(f"lean.judge = 'comparator': {failed}; `burnqed lean selftest` shows each case (fix "
                          "lean.comparator_command, or set lean.judge = 'burnqed')")

def without_holes(settings: JudgeSettings, lean_version: str | None) -> str | None:
    """Why the comparator `settings` names (judging now, or deferred to the judge step) has no definition holes
    (`definition_names`), in words: the Lean it judges (`lean_version`: lean.toolchain, else the judge's Lake
    project's `lean-toolchain`) is older than DEFINITION_HOLES_LEAN, so its comparator is a standalone build from
    before their commit (images.toml pins the newest commit on the Lean nearest each triple's), which ignores them.
    None when it has them, when burnqed judges, or when no Lean version is known."""
    version = lean_version or settings.toolchain
    if (settings.comparator is None and not settings.deferred) or not lacks_definition_holes(version):
        return None
    return (f"the comparator for Lean {version} (the standalone build, images.toml) {DEFINITION_HOLES_SAID}: it "
            "ignores definition_names and refuses every filled answer slot, a false alarm")

def check_definition_holes(theorems: Sequence[Theorem], settings: JudgeSettings, lean_version: str | None) -> None:
    """`ConfigError` (one line, before any search or judging) when some of `theorems` carry an open answer slot and
    the comparator that judges them has no definition holes (`without_holes`). A challenge with the slot filled in
    would judge another statement, so it is never the way round."""
    why = without_holes(settings, lean_version)
    slots = [t.name for t in theorems if t.answer is not None and t.answer_open]
    if why is None or not slots:
        return
    named = f"{', '.join(slots[:5])}{f' and {len(slots) - 5} more' if len(slots) > 5 else ''}"
    raise ConfigError(f"lean.judge = 'comparator': {len(slots)} theorem(s) carry an answer slot ({named}), and {why}; "
                      f"set lean.judge = 'burnqed' for them, or use a triple on Lean >= v{DEFINITION_HOLES_LEAN}")

def judge_case(theorem: Theorem, result: TheoremResult) -> JudgeCase | None:
    """The comparator case of `result`'s proof of `theorem` (None: no proof text or no statement to restate)."""
    declaration = theorem.declaration(START_FORM)
    if result.proof is None or declaration is None:
        return None
    header = assembled_header(result.proof, theorem, result.tactics)
    if header is None:  # not an assembly of the theorem: the file as it is, alone in its batch
        header, body = result.proof, ""
    else:
        body = result.proof[len(header):].lstrip("\n")
    slot = theorem.answer.name if theorem.answer is not None and theorem.answer_open else None
    return JudgeCase(theorem.name, theorem.header or "", declaration, header, body, slot)

async def judge_passes(theorems: Sequence[Theorem], attempts: Sequence[Sequence[TheoremResult]],
                       settings: JudgeSettings) -> tuple[list[list[TheoremResult]], dict[str, JudgeRecord]]:
    """`attempts` with every proof comparator refused not counted, and each theorem's judge record (see the
    module docstring). With burnqed as the judge, `attempts` unchanged."""
    if settings.comparator is None:
        record = JudgeRecord(judge="pending" if settings.deferred else "burnqed", why=settings.why)
        return [list(p) for p in attempts], {t.name: record for t in theorems}
    by_name = {t.name: t for t in theorems}
    asked: list[tuple[int, int, JudgeCase]] = []
    for k, passed in enumerate(attempts):
        for j, result in enumerate(passed):
            found = judge_case(by_name[result.name], result) if result.proved and result.name in by_name else None
            if found is not None:
                asked.append((k, j, found))
    with tempfile.TemporaryDirectory(prefix="burnqed-judge-") as work:
        verdicts = await judge([c for _, _, c in asked], settings.comparator, Path(work))
    judged = [list(p) for p in attempts]
    seen: dict[str, list[JudgeVerdict]] = {}
    for (k, j, _), verdict in zip(asked, verdicts, strict=True):
        seen.setdefault(verdict.name, []).append(verdict)
        if not verdict.accepted:
            log.error("soundness alarm: %s: burnqed counted the proof, comparator refused it (%s)", verdict.name,
                      verdict.reason)
            judged[k][j] = _refused(judged[k][j], by_name[verdict.name], verdict)
    base = settings.comparator.record(settings.toolchain)
    return judged, {t.name: _record(base, seen.get(t.name, [])) for t in theorems}

def _refused(result: TheoremResult, theorem: Theorem, verdict: JudgeVerdict) -> TheoremResult:
    return result.model_copy(update={
        "proved": False, "failure_reason": FailureReason.JUDGE_REFUSED,
        "detail": f"{REFUSED} ({verdict.category}): {verdict.reason}", "proof": None, "tactics": [], "depth": None,
        "budget_at_proof": None, "revision_at_proof": None, "answer": AnswerSlot(theorem).dropped(result.answer)})

def _record(base: JudgeRecord, verdicts: list[JudgeVerdict]) -> JudgeRecord:
    """A theorem's record: its first refusal (an alarm), else its kernels when comparator accepted a proof."""
    refused = next((v for v in verdicts if not v.accepted), None)
    if refused is not None:
        return base.model_copy(update={"accepted": False, "category": refused.category, "reason": refused.reason,
                                       "alarm": True, "kernels": list(refused.kernels)})
    if verdicts:
        return base.model_copy(update={"accepted": True, "kernels": list(verdicts[0].kernels)})
    return base
