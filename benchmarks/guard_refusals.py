"""False refusals: the guard, on every route a model's text takes, over honest text. Every refusal is listed with
the rule that made it (docs/benchmarks.md, "guard_refusals.py"; docs/results.md, "False refusals, measured").

    .venv/bin/python benchmarks/guard_refusals.py [--compfiles DIR] [--minif2f PATH ...]
        [--minif2f-proofs PATH ...] [--putnambench DIR] [--show 60]

The routes, each with the default guard (`TacticGuard.from_config(LeanConfig())`, the built-in rules and
`lean.deny`):
- **step**: each tactic of a proof as step search sends it (`split_proof`, typed `have`s split), `TacticGuard.check`;
- **whole**: the proof as whole mode reads it (its top-level tactics, `lean.soundness.check_path`: every rule but the
  tactic cap, `TacticGuard.check_in_proof`, the proof bounded by `lean.max_text_chars`);
- **sketch**: the sketch a proof's named `have`s make (`text.sketch.sketch_of_proof`), and a statement restated as a
  hole (`have h : STATEMENT := by sorry` then `exact h`), `TacticGuard.check_sketch`;
- **restated**: a statement restated in a proof step (`have h : STATEMENT := by norm_num`), `TacticGuard.check`;
- **answer**: a reference answer as a completion would give it, `lean.soundness.check_answer`.

The honest text: the embedded corpora (the bundled corpus and the generated world, which the replay server serves;
the pretraining families; the checked world with its sketch family), built in; PutnamBench's statements and reference
answers (the vendored `tests/fixtures/putnambench`, or `--putnambench`, a clone's `lean4` folder or its `src`); and,
from local clones given as options, compfiles' `theorem`/`lemma`/`problem` proofs and `determine` answers
(dwrensha/compfiles), miniF2F's statements (`--minif2f`: folders of `.lean` files, e.g. yangky11/miniF2F-lean4's
`MiniF2F`, or JSONL rows with `formal_statement`) and proofs (`--minif2f-proofs`: `.lean` files with proofs, or JSONL
rows with `formal_statement` and `formal_proof`), each path a corpus of its own. A proof that holds `sorry` is no
honest proof and is skipped (counted). Prints, per corpus and route, the checks and the refusals; the refusals by
corpus and rule; then each refusal, its item (file:line) and the text refused.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import LeanConfig  # noqa: E402
from burnqed.data.leanfile import lean_file_declarations  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.soundness import check_answer, check_path  # noqa: E402
from burnqed.text.completion import split_proof  # noqa: E402
from burnqed.text.sketch import Sketch, sketch_of_proof  # noqa: E402
from leankit.commands import term_problem  # noqa: E402
from leankit.corpus import TheoremSpec, load_corpus  # noqa: E402
from leankit.declaration import parse_declaration  # noqa: E402
from leankit.text import find_depth0, mask_comments, read_as_lean  # noqa: E402
from leankit.world import embedded_corpus  # noqa: E402
from leankit.world.checked import build_world  # noqa: E402
from leankit.world.pretrain import pretraining_corpus  # noqa: E402

GUARD = TacticGuard.from_config(LeanConfig())
ROUTES = ("step", "whole", "sketch", "restated", "answer")
_SORRY = re.compile(r"(?<![\w.'])(?:sorry|admit)(?![\w'])")
_EXCERPT = re.compile(r""" at (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")  # a reason's quoted place
_COLUMN0 = re.compile(r"^[^\s)\]}⟩]", re.MULTILINE)  # a column-0 line that closes no bracket
_CODE = re.compile(r"\S")
_EQUATION = re.compile(r"\n\s*\|")
_NEXT_COMMAND = re.compile(r"\n(?=[^\s|])")  # a column-0 line that is no `| pattern => …` equation
_PROBLEM = re.compile(r"^problem(?=\s)", re.MULTILINE)  # compfiles' `problem`: a theorem to Lean, as long a word
_SNIP = re.compile(r"^snip (?:begin|end)[ \t]*$", re.MULTILINE)  # compfiles' extraction markers
_DETERMINE = re.compile(r"^determine\s", re.MULTILINE)  # compfiles' answer: `determine NAME : T := VALUE`


@dataclass
class Tally:
    """One corpus's count: what each route checked and what it refused (`(route, item, rule, text)`)."""

    name: str
    source: str
    checked: Counter[str] = field(default_factory=Counter)
    refused: list[tuple[str, str, str, str]] = field(default_factory=list)
    skipped: int = 0  # proofs holding `sorry`: no proof

    def record(self, route: str, item: str, reason: str | None, text: str) -> None:
        self.checked[route] += 1
        if reason is not None:
            self.refused.append((route, item, rule_of(reason), " ".join(text.split())[:100]))


def rule_of(reason: str) -> str:
    """The rule a reason names: the reason with its quoted place (`at '5!'`) and the sketch's prefix cut out."""
    return _EXCERPT.sub(" at …", reason.removeprefix("the sketch's skeleton ").removeprefix("the sketch "))


def _first_refusal(tactics: list[str], check: Callable[[str], str | None] = GUARD.check) -> str | None:
    return next((reason for tactic in tactics if (reason := check(tactic)) is not None), None)


def check_proof(tally: Tally, item: str, tactics: list[str], steps: list[str], body: str) -> None:
    """A proof on the step, whole and sketch routes: `tactics` its top-level tactics, `steps` the step route's,
    `body` its text as written."""
    if _SORRY.search(read_as_lean(mask_comments(body))):
        tally.skipped += 1
        return
    tally.record("step", item, _first_refusal(steps), body)
    whole = check_path(tactics, GUARD)
    tally.record("whole", item, None if whole.ok else _first_refusal(tactics, GUARD.check_in_proof) or whole.reason,
                 body)
    sketch = sketch_of_proof(body)
    if sketch is not None:
        checked = GUARD.check_sketch(sketch.body)
        tally.record("sketch", item, None if isinstance(checked, Sketch) else checked, sketch.body)


def check_statement(tally: Tally, item: str, statement: str) -> None:
    """A statement (∀-form) restated in a step and as a sketch's hole."""
    stated = " ".join(statement.split())
    tally.record("restated", item, GUARD.check(f"have h : {stated} := by norm_num"), stated)
    sketch = f"have h : {stated} := by sorry\nexact h"
    checked = GUARD.check_sketch(sketch)
    tally.record("sketch", item, None if isinstance(checked, Sketch) else checked, stated)


def check_value(tally: Tally, item: str, value: str) -> None:
    """A reference answer, on the answer route; the rule is the guard's or the one-term rule's own reason."""
    verdict = check_answer(value, GUARD)
    reason = None if verdict.ok else GUARD.check(value) or term_problem(value) or verdict.reason
    tally.record("answer", item, reason, value)


def check_corpus(tally: Tally, theorems: list[TheoremSpec]) -> None:
    for theorem in theorems:
        check_statement(tally, theorem.name, theorem.statement)
        for number, proof in enumerate(theorem.proofs):
            body = "\n".join(proof)
            steps = [step for tactic in proof for step in split_proof(tactic)]
            check_proof(tally, f"{theorem.name}#{number}", list(proof), steps, body)


def check_world(tally: Tally) -> None:
    for theorem in build_world(0, sketches=True).theorems:
        check_statement(tally, theorem.name, theorem.statement)
        for number, proof in enumerate(theorem.proofs):
            body = "\n".join(proof)
            steps = [step for tactic in proof for step in split_proof(tactic)]
            check_proof(tally, f"{theorem.name}#{number}", list(proof), steps, body)


def check_lean_file(tally: Tally, item: str, text: str, *, proofs: bool) -> None:
    """Every theorem/lemma/example of a Lean file: its statement, and with `proofs` its proof (when it has one)."""
    for line, row in lean_file_declarations(text):
        decl = parse_declaration(row["formal_statement"])
        if decl is not None:
            decl = parse_declaration(own_text(decl.source, decl.source_statement[1]))
        if decl is None:
            continue
        where = f"{item}:{line}"
        check_statement(tally, where, decl.statement)
        if "answer" in row:
            check_value(tally, where, row["answer"])
        if proofs and decl.body is not None:
            body = re.sub(r"^\s*by\b", "", decl.body)
            check_proof(tally, where, split_proof(decl.source, split_have=False), split_proof(decl.source),
                        _dedent(body))


def own_text(source: str, assign: int) -> str:
    """A declaration's text up to the next column-0 line after its proof's first line (`include h in`, `omit`, the
    next command), or up to its first equation; `assign`: its `:=` (-1: none)."""
    masked = mask_comments(source)
    if assign < 0:  # a proof by equations (`| 0 => …`): the statement is what stands before them
        equation = _EQUATION.search(masked)
        return source if equation is None else source[: equation.start()]
    proof = _CODE.search(masked, assign + 2)
    if proof is None:
        return source
    line_end = masked.find("\n", proof.start())
    cut = _NEXT_COMMAND.search(masked, line_end) if line_end >= 0 else None
    return source if cut is None else source[: cut.start()]


def _dedent(body: str) -> str:
    lines = body.strip("\n").split("\n")
    indent = min((len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()), default=0)
    first = lines[0].strip()
    rest = [line[indent:] for line in lines[1:]]
    return "\n".join([first, *rest] if first else rest)


def compfiles_text(text: str) -> str:
    """A compfiles file as Lean reads its theorems: `problem` a `theorem` (the same length), the markers gone."""
    return _SNIP.sub("", _PROBLEM.sub("theorem", text))


def determine_values(text: str) -> Iterator[tuple[int, str]]:
    """Each compfiles `determine NAME : T := VALUE`'s line and value (up to the next column-0 line)."""
    masked = mask_comments(text)
    for found in _DETERMINE.finditer(masked):
        assign = find_depth0(masked, ":=", found.end())
        if assign < 0:
            continue
        first = _CODE.search(masked, assign + 2)
        line_end = -1 if first is None else text.find("\n", first.start())
        after = _COLUMN0.search(text, line_end) if line_end >= 0 else None  # a doc comment at column 0 ends it too
        value = text[assign + 2 : len(text) if after is None else after.start()].strip()
        if value:
            yield text.count("\n", 0, found.start()) + 1, value


def lean_files(path: Path) -> list[Path]:
    return sorted(path.rglob("*.lean")) if path.is_dir() else [path]


def check_compfiles(tally: Tally, path: Path) -> None:
    for file in lean_files(path):
        name = str(file.relative_to(path)) if path.is_dir() else file.name
        text = file.read_text(encoding="utf-8")
        check_lean_file(tally, name, compfiles_text(text), proofs=True)
        for line, value in determine_values(text):
            check_value(tally, f"{name}:{line}", value)


def lean_texts(paths: list[Path]) -> Iterator[tuple[str, str]]:
    """(item, Lean text) of each `.lean` file under the paths, and of each JSONL row (`formal_statement`, then
    `formal_proof` when the row has one)."""
    for path in paths:
        if path.suffix != ".jsonl":
            yield from ((file.name, file.read_text(encoding="utf-8")) for file in lean_files(path))
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                row = json.loads(line)
                yield f"{path.name}:{row.get('name', number)}", row["formal_statement"] + row.get("formal_proof", "")


def putnam_sources(path: Path | None) -> tuple[str, list[tuple[str, str]]]:
    """PutnamBench's files (name, text): a clone's (`lean4` or its `src`) or the vendored fixture's."""
    if path is None:
        from tests.putnambench import ARCHIVE, putnam_names, putnam_text
        return f"{ARCHIVE.relative_to(ROOT)}", [(name, putnam_text(name)) for name in putnam_names()]
    folder = path / "src" if (path / "src").is_dir() else path
    return str(folder), [(file.stem, file.read_text(encoding="utf-8")) for file in sorted(folder.glob("*.lean"))]


def tallies(args: argparse.Namespace) -> list[Tally]:
    bundled = {theorem.name for theorem in load_corpus().theorems}
    embedded = embedded_corpus()  # what the replay server serves: the bundled corpus, then the generated world
    found = [Tally("bundled corpus", "leankit/bundled"), Tally("generated world", "leankit.world, seed 0"),
             Tally("pretraining families", "leankit.world.pretrain"),
             Tally("checked world + sketch family", "leankit.world.checked, seed 0")]
    check_corpus(found[0], [theorem for theorem in embedded.theorems if theorem.name in bundled])
    check_corpus(found[1], [theorem for theorem in embedded.theorems if theorem.name not in bundled])
    check_corpus(found[2], pretraining_corpus().theorems)
    check_world(found[3])
    source, files = putnam_sources(args.putnambench)
    putnam = Tally("PutnamBench", source)
    for name, text in files:
        check_lean_file(putnam, name, text, proofs=False)
    found.append(putnam)
    if args.compfiles is not None:
        found.append(Tally("compfiles", str(args.compfiles)))
        check_compfiles(found[-1], args.compfiles)
    for paths, proofs in ((args.minif2f, False), (args.minif2f_proofs, True)):
        for path in paths:
            label = path.name if path.suffix else f"{path.parent.name}/{path.name}"
            found.append(Tally(f"miniF2F {'proofs' if proofs else 'statements'} ({label})", str(path)))
            for item, text in lean_texts([path]):
                check_lean_file(found[-1], item, text, proofs=proofs)
    return found


def report(found: list[Tally], show: int, seconds: float) -> None:
    print(f"{'corpus':60} " + " ".join(f"{route:>17}" for route in ROUTES) + "  skipped (sorry)")
    for tally in found:
        refused = Counter(route for route, *_ in tally.refused)
        cells = [f"{refused[route]:>6} of {tally.checked[route]:>7}" if tally.checked[route] else f"{'-':>17}"
                 for route in ROUTES]
        print(f"{tally.name:60} " + " ".join(cells) + f"  {tally.skipped:>6}")
    print("read:", "; ".join(f"{tally.name}: {tally.source}" for tally in found))
    checked = sum(sum(tally.checked.values()) for tally in found)
    refusals = [(tally.name, *refusal) for tally in found for refusal in tally.refused]
    print(f"\n{len(refusals)} refusals of {checked} checks ({seconds:.1f} s). By corpus and rule (routes):")
    for tally in found:
        routes: dict[str, Counter[str]] = {}
        for route, _, rule, _ in tally.refused:
            routes.setdefault(rule, Counter())[route] += 1
        for rule, counted in sorted(routes.items(), key=lambda pair: -sum(pair[1].values())):
            shown = ", ".join(f"{route} {count}" for route, count in counted.items())
            print(f"  {tally.name}: {sum(counted.values())}  {rule} ({shown})")
    print(f"\nThe refusals ({min(show, len(refusals))} of {len(refusals)} shown):")
    for corpus, route, item, rule, text in refusals[:show]:
        print(f"  [{corpus} / {route}] {item}: {rule}\n      {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compfiles", type=Path, help="a compfiles clone's folder (or its Compfiles/)")
    parser.add_argument("--minif2f", type=Path, nargs="*", default=[],
                        help="miniF2F statements: folders of .lean files, or .jsonl (formal_statement)")
    parser.add_argument("--minif2f-proofs", type=Path, nargs="*", default=[],
                        help="miniF2F proofs: folders of .lean files, or .jsonl (formal_statement, formal_proof)")
    parser.add_argument("--putnambench", type=Path, help="a PutnamBench clone's lean4 folder (default: the fixture)")
    parser.add_argument("--show", type=int, default=60, help="how many refusals to list")
    args = parser.parse_args()
    began = time.perf_counter()
    found = tallies(args)
    report(found, args.show, time.perf_counter() - began)


if __name__ == "__main__":
    main()
