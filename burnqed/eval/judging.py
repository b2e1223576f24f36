"""The judge of eval's counted proofs (`lean.judge`; docs/search.md, "The judge"): with `comparator`, every proof
eval's search counted goes through Lean's comparator (`lean.comparator`) after the search, and one it refuses is a
**soundness alarm**: not counted (`judge_refused`, comparator's reason in its detail), listed by name, and
`burnqed eval` exits SOUNDNESS_ALARM_EXIT. eval.json records who judged each theorem (`per_theorem[].judge`).

    attempts, records = await judge_passes(index.theorems, attempts, settings)   # search.judge
    result = with_judges(result, records)
    lines = alarm_lines(result)            # one line per alarm, empty without one
"""

from __future__ import annotations

from burnqed.eval.result import EvalResult
from burnqed.lean.comparator import JudgeRecord


def with_judges(result: EvalResult, records: dict[str, JudgeRecord]) -> EvalResult:
    """`result` with each theorem's judge record."""
    rows = [row.model_copy(update={"judge": records.get(row.name)}) for row in result.per_theorem]
    return result.model_copy(update={"per_theorem": rows})


def alarm_lines(result: EvalResult) -> list[str]:
    """One line per soundness alarm of `result`: the theorem and comparator's reason."""
    return [f"soundness alarm: {row.name}: burnqed counted its proof, comparator refused it "
            f"({row.judge.category}: {row.judge.reason}); not counted"
            for row in result.per_theorem if row.judge is not None and row.judge.alarm]


def judge_line(result: EvalResult) -> str | None:
    """The line saying who counted the eval's proofs (and that the sandbox was off); None for results before."""
    records = [row.judge for row in result.per_theorem if row.judge is not None]
    if not records:
        return None
    first = records[0]
    if first.judge != "comparator":
        return f"judge: {first.judge} ({first.why})" if first.why else f"judge: {first.judge}"
    flags = [*(["--paranoid"] if first.paranoid else []),
             *(["--inadvisably-no-sandbox: the solutions were built outside the sandbox"] if not first.sandboxed
               else [])]
    said = f" ({'; '.join(flags)})" if flags else ""
    return f"judge: comparator, toolchain {first.toolchain or 'not pinned'}{said}"


def judges_of(result: EvalResult) -> set[str]:
    """Who counted `result`'s proofs ('burnqed' for a result recorded before the judge was)."""
    return {row.judge.judge if row.judge is not None else "burnqed" for row in result.per_theorem} or {"burnqed"}


__all__ = ["alarm_lines", "judge_line", "judges_of", "with_judges"]
