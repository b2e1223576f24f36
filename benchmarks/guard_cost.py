"""What the guard's readers cost on the worst shapes of model text (issue 87.2): each shape from 1 KB to 1 MB, doubling,
through each reader, the seconds and the ratio per doubling (≈ 2: linear; ≈ 4: quadratic), then a 1 MB answer
refused by the cap (`lean.max_text_chars`) before any reader (docs/benchmarks.md, "guard_cost.py").

    .venv/bin/python benchmarks/guard_cost.py [--max-kb 1024] [--shapes primes,brackets] [--readers tactic,answer]

Shapes: a run of primes after a name (a legal Lean name), nested brackets, nested comments, a string of escapes,
escaped names `«a».«a»…`, Greek letters and subscripts. Readers: `tactic` (the tactic guard's rules,
`TacticGuard.check` without its length cap), `answer` (`lean.soundness.check_answer`), `sketch`
(`TacticGuard.check_sketch` of a hole and the text), `attempt` (`search.answer.read_attempt` of a completion whose
answer is the text), each with the caps lifted. A size is timed once in CPU seconds of this process (best of three
below 64 KB). The cap's row reads a 1 MB answer through `check_answer` and `read_attempt` with the default cap, best
of three.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import LeanConfig  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.soundness import check_answer  # noqa: E402
from burnqed.records.theorem import Answer, AnswerTask, Theorem  # noqa: E402
from burnqed.search.answer import read_attempt  # noqa: E402
from burnqed.text.prompt import PromptFormat  # noqa: E402

KB = 1024
SHAPES: dict[str, Callable[[int], str]] = {
    "primes": lambda n: "exact h" + "'" * (n - 7),
    "brackets": lambda n: "(" * (n // 2) + ")" * (n // 2),
    "comments": lambda n: "/- " * (n // 6) + "-/ " * (n // 6),
    "string": lambda n: '"' + "\\n" * (n // 2 - 1) + '"',
    "escaped names": lambda n: "«a»" + ".«a»" * (n // 4 - 1),
    "unicode": lambda n: "α₀" * (n // 2),
}
THEOREM = Theorem(name="putnam_mock_a", signature=": 1 + 1 = putnam_mock_a_solution",
                  header="abbrev putnam_mock_a_solution : ℕ := sorry\n-- 2",
                  answer=Answer(name="putnam_mock_a_solution", type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
PROOF = "\n\ntheorem putnam_mock_a : 1 + 1 = putnam_mock_a_solution := by\n  decide\n```"


def readers(guard: TacticGuard) -> dict[str, Callable[[str], object]]:
    return {
        "tactic": guard.check,
        "answer": lambda text: check_answer(text, guard),
        "sketch": lambda text: guard.check_sketch(f"have h : P := by sorry\n{text}"),
        "attempt": lambda text: read_attempt(THEOREM, PromptFormat.PLAIN_WHOLE, f" {text}{PROOF}", guard),
    }


def seconds(read: Callable[[str], object], text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()  # this process's CPU time: what the readers cost, not what runs beside them
        read(text)
        best = min(best, time.process_time() - started)
    return best


def table(shapes: list[str], names: list[str], sizes: list[int]) -> None:
    deny = LeanConfig().deny
    uncapped = readers(TacticGuard(deny, max_chars=10**9, max_text_chars=10**9))
    print(f"{'shape':<14} {'reader':<8} " + " ".join(f"{size // KB:>6}K" for size in sizes) + "   ratio per doubling")
    for shape in shapes:
        for name in names:
            times = [seconds(uncapped[name], SHAPES[shape](size), 3 if size < 64 * KB else 1) for size in sizes]
            ratios = [later / earlier for earlier, later in itertools.pairwise(times)]
            print(f"{shape:<14} {name:<8} " + " ".join(f"{t:7.3f}" for t in times) + "   "
                  + " ".join(f"{r:.1f}" for r in ratios), flush=True)


def capped_row() -> None:
    guard = TacticGuard.from_config(LeanConfig())
    text = SHAPES["primes"](1024 * KB)
    answer = seconds(readers(guard)["answer"], text, 3)
    attempt = seconds(readers(guard)["attempt"], text, 3)
    print(f"\n1 MB answer of primes, lean.max_text_chars = {guard.max_text_chars}: check_answer {answer * 1e3:.3f} ms, "
          f"read_attempt {attempt * 1e3:.3f} ms: {check_answer(text, guard).reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-kb", type=int, default=1024, help="the largest size, in KB (1 KB doubled up to it)")
    parser.add_argument("--min-kb", type=int, default=1, help="the smallest size, in KB")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"of {', '.join(SHAPES)}")
    parser.add_argument("--readers", default="tactic,answer,sketch,attempt", help="of tactic, answer, sketch, attempt")
    args = parser.parse_args()
    sizes = []
    size = args.min_kb * KB
    while size <= args.max_kb * KB:
        sizes.append(size)
        size *= 2
    table(args.shapes.split(","), args.readers.split(","), sizes)
    capped_row()


if __name__ == "__main__":
    main()
