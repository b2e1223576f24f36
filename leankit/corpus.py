"""The replay corpus: recorded goal-level Lean transitions that let burnqed run without a Lean install.

    corpus = load_corpus()                   # the bundled corpus (or a file, or a folder of *.json files)
    spec = corpus.by_name("logic_or_comm")   # a `TheoremSpec`: goals, transitions, proofs
    spec.lookup(spec.root, "intro p q h")    # the recorded `Transition`: child goal ids, or Lean's error

    python -m leankit.corpus [--corpus PATH] # validate a corpus, print its size

A theorem records its goals as Lean prints them, the tactics tried on each (`result`: child goals, `[]` closes;
or `error`) and whole proofs. `load_corpus` checks references, splits and that every proof closes its theorem,
and raises `BadInput` naming the file, theorem and goal. The format: docs/replay-corpus.md.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from leankit.failures import BadInput
from leankit.jsonfile import read_json_model
from leankit.statements import split_leading_binders
from leankit.text import SORRY_WORDS, depth0_chars, matching_close

Split = Literal["train", "pool", "test"]
Topic = Literal["algebra", "inequality", "number_theory", "logic", "sets"]
SPLITS: tuple[Split, ...] = ("train", "pool", "test")
TOPICS: tuple[Topic, ...] = ("algebra", "inequality", "number_theory", "logic", "sets")

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GoalSpec(_Strict):
    """One goal as Lean prints it: hypotheses (grouped like `x y : ℝ`), the target, an optional case tag."""

    hyps: list[str] = Field(default_factory=list, description="Hypotheses, one Lean pp line each.")
    target: str = Field(description="The goal's type, as after `⊢`.")
    case: str | None = Field(default=None, description="The goal's case tag (Pantograph `userName`).")


class Transition(_Strict):
    """A tactic tried on one goal: `result` (child goal ids, `[]` = closed) or `error` (Lean's message)."""

    goal: str
    tactic: str
    result: list[str] | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _one_outcome(self) -> Transition:
        if (self.result is None) == (self.error is None):
            raise ValueError(f"transition {self.tactic!r} on {self.goal!r} needs exactly one of result, error")
        return self


class TheoremSpec(_Strict):
    """A theorem with its goal graph and recorded proofs."""

    name: str
    split: Split = Field(
        description="'train' (its proofs are training data), 'pool' (a statement whose proofs search must find: "
        "its recorded proofs only serve the replay server) or 'test' (held out)."
    )
    topic: Topic
    family: str | None = Field(
        default=None, description="The generated theorem family it is an instance of (None: hand-written)."
    )
    source: str = "burnqed-bundled"
    header: str = "import Mathlib"
    statement: str = Field(description='The full ∀-form type, usable as `goal.start {"expr": ...}`.')
    root: str
    goals: dict[str, GoalSpec]
    transitions: list[Transition]
    proofs: list[list[str]] = Field(description="Tactic scripts, each applied to the first open goal.")

    @model_validator(mode="after")
    def _with_binder_start(self) -> TheoremSpec:
        """Add the goal the binder-form start of this theorem begins at (its statement's leading ∀ binders in
        context, `explicit_binders`) when the recorded proofs only pass it inside a longer `intro`, see
        `binder_start`. The added transitions are what Lean does, so the graph stays a record of Lean's behaviour."""
        found = explicit_binders(self.statement)
        if found is None:
            return self
        try:
            graph = _binder_graph(self, found[0], found[1], None)
        except (KeyError, ValueError):
            return self  # a broken graph: the corpus checks (`load_corpus`) name what is wrong with it
        if graph is not None and graph[2]:
            object.__setattr__(self, "goals", graph[0])
            object.__setattr__(self, "transitions", graph[1])
        return self

    def binder_start(self, binders: Sequence[tuple[str, str]], target: str) -> tuple[TheoremSpec, str] | None:
        """Where a start of this theorem in binder form begins (`theorem n (x : ℝ) : p x → q x` of the recorded
        `∀ (x : ℝ), p x → q x`): the goal with the `binders` ((name, type) pairs) as hypotheses and `target`, and
        this theorem with that goal in its graph. A recorded `intro <names>` on the root gives it; else a recorded
        longer `intro x h` on the root passes through it, and Lean's behaviour is added: `intro x` reaches it
        and `intro h` from it gives the recorded child. None when no recorded intro introduces these binders."""
        if not binders:
            return self, self.root
        wanted = [(name, normalize_expr(type_)) for name, type_ in binders]
        try:
            graph = _binder_graph(self, [name for name, _ in binders], target, wanted)
        except (KeyError, ValueError):
            return None
        if graph is None:
            return None
        goals, transitions, _, start = graph
        derived = self.model_copy(update={"goals": goals, "transitions": transitions})
        derived.__dict__.pop("_lookup_cache", None)  # model_copy copies the original's table: build it anew
        return derived, start

    def start_goal(self) -> str:
        """The goal this theorem starts at as written in binder form (its statement's leading explicit ∀ binders in
        context: the goal `intro <names>` on the root leads to), else the root."""
        found = explicit_binders(self.statement)
        entry = self.lookup(self.root, f"intro {' '.join(found[0])}") if found is not None else None
        if entry is None or entry.result is None or len(entry.result) != 1:
            return self.root
        return entry.result[0]

    def binder_proofs(self) -> list[list[str]]:
        """The recorded proofs as they run from the binder-form start (`proof_from_binder_start`); a proof that
        does not begin by introducing the binders under their names cannot run from there and is left out."""
        found = explicit_binders(self.statement)
        names = found[0] if found is not None else []
        return [proof for recorded in self.proofs if (proof := proof_from_binder_start(recorded, names)) is not None]

    def lookup(self, goal: str, tactic: str) -> Transition | None:
        """The recorded transition of `tactic` (whitespace-normalised) on goal id `goal`, if any."""
        return self._table().get((goal, tactic_key(tactic)))

    def _table(self) -> dict[tuple[str, str], Transition]:
        # Built once per theorem; the model is frozen so the cache cannot go stale.
        cached: dict[tuple[str, str], Transition] | None = self.__dict__.get("_lookup_cache")
        if cached is None:
            cached = {(t.goal, tactic_key(t.tactic)): t for t in self.transitions}
            object.__setattr__(self, "_lookup_cache", cached)
        return cached


class Corpus(_Strict):
    """A named set of theorems (a file, or several files merged)."""

    name: str
    theorems: list[TheoremSpec]

    def by_name(self, name: str) -> TheoremSpec | None:
        for theorem in self.theorems:
            if theorem.name == name:
                return theorem
        return None

    def by_statement(self, statement: str) -> TheoremSpec | None:
        key = normalize_expr(statement)
        for theorem in self.theorems:
            if normalize_expr(theorem.statement) == key:
                return theorem
        return None


_SPACE_AFTER_OPEN = re.compile(r"([(\[{⟨]) ")
_SPACE_BEFORE_CLOSE = re.compile(r" ([)\]}⟩,])")


@functools.lru_cache(maxsize=8192)
def tactic_key(text: str) -> str:
    """Whitespace-insensitive key of a tactic: runs collapsed, none inside brackets or before commas. (Cached: a
    corpus repeats its tactics across goals, and a server looks up every tactic a search sends.)"""
    collapsed = " ".join(text.split())
    return _SPACE_BEFORE_CLOSE.sub(r"\1", _SPACE_AFTER_OPEN.sub(r"\1", collapsed))


def normalize_expr(text: str) -> str:
    """Key of a statement: all whitespace removed (so `(p q: Prop)` matches `(p q : Prop)`)."""
    return "".join(text.split())


_INTRO_STEP = re.compile(r"(intros?|rintro)\s+(\S.*)", re.DOTALL)


def explicit_binders(statement: str) -> tuple[list[str], str] | None:
    """The names of a ∀ statement's leading binders and the rest of it, when every binder is an explicit typed
    one (`(x y : ℝ)`): what a binder-form start puts in context. None otherwise (no binders, or implicit and
    instance binders, whose hypotheses Lean names differently)."""
    binders, rest = split_leading_binders(statement)
    if not binders:
        return None
    names: list[str] = []
    index = 0
    while index < len(binders):
        if binders[index].isspace():
            index += 1
            continue
        close = matching_close(binders, index) if binders[index] == "(" else -1
        if close < 0:
            return None
        head, sep, _ = binders[index + 1 : close].partition(" : ")
        if not sep or not head.split():
            return None
        names.extend(head.split())
        index = close + 1
    return names, rest


def depth0_words(text: str) -> list[str]:
    """`text` split at whitespace outside brackets: `x ⟨h1, h2⟩ y` → x, ⟨h1, h2⟩, y."""
    words: list[str] = []
    start = 0
    for index, char in depth0_chars(text):
        if char.isspace():
            if text[start:index].strip():
                words.append(text[start:index].strip())
            start = index + 1
    if text[start:].strip():
        words.append(text[start:].strip())
    return words


def proof_from_binder_start(proof: Sequence[str], names: Sequence[str]) -> list[str] | None:
    """A proof recorded from the ∀ statement, restated from the binder-form start (the binders `names` already in
    context): the leading `intro`/`intros`/`rintro` steps lose the binder names (`intro x h` → `intro h`, `intro x`
    → nothing). None when the proof does not begin by introducing the binders under these names."""
    steps = list(proof)
    remaining = list(names)
    while remaining:
        step = _INTRO_STEP.fullmatch(steps[0].strip()) if steps else None
        if step is None:
            return None
        args = depth0_words(step.group(2))
        taken = min(len(args), len(remaining))
        if args[:taken] != remaining[:taken]:
            return None
        remaining = remaining[taken:]
        if args[taken:]:
            steps[0] = f"{step.group(1)} {' '.join(args[taken:])}"
        else:
            steps.pop(0)
    return steps


def _binder_graph(
    spec: TheoremSpec, names: list[str], rest: str, wanted: list[tuple[str, str]] | None
) -> tuple[dict[str, GoalSpec], list[Transition], bool, str] | None:
    """`spec`'s goals and transitions with the binder-start goal of `names` (target `rest`) in them, whether
    anything was added, and that goal's id; None when no recorded intro on the root introduces `names`. `wanted`
    ((name, normalised type) pairs) must match the goal's hypotheses when given."""
    def fits(hyps: Sequence[str], target: str) -> bool:
        pairs = [(name, normalize_expr(type_)) for line in hyps for name, type_ in split_hypothesis(line)]
        return (wanted is None or pairs == wanted) and normalize_expr(target) == normalize_expr(rest)

    start, longer = _root_intros(spec, names, fits)
    if not longer:  # nothing to add (the common case: a theorem recorded with its exact `intro`)
        return (dict(spec.goals), list(spec.transitions), False, start) if start is not None else None
    goals, transitions = dict(spec.goals), list(spec.transitions)
    known = {(t.goal, tactic_key(t.tactic)) for t in transitions}
    changed = False
    for transition, _, _ in longer:  # first the goal itself, from any longer intro that leaves one goal
        if start is not None:
            break
        hyps = _leading_hyps([goals[child] for child in transition.result or []], names)
        if hyps is None or not fits(hyps, rest):
            continue
        start = next(f"b{i}" for i in range(len(goals) + 1) if f"b{i}" not in goals)
        goals[start] = GoalSpec(hyps=hyps, target=rest)
        transitions.append(Transition(goal=spec.root, tactic=f"intro {' '.join(names)}", result=[start]))
        known.add((spec.root, tactic_key(transitions[-1].tactic)))
    for transition, keyword, rest_args in longer:  # then every longer intro continues from it
        if start is None:
            break
        tactic = f"{keyword} {' '.join(rest_args)}"
        if (start, tactic_key(tactic)) not in known:
            transitions.append(Transition(goal=start, tactic=tactic, result=list(transition.result or [])))
            known.add((start, tactic_key(tactic)))
            changed = True
    if start is None:
        return None
    return goals, transitions, changed or start not in spec.goals, start


def _root_intros(spec: TheoremSpec, names: list[str], fits: Callable[[Sequence[str], str], bool]
                 ) -> tuple[str | None, list[tuple[Transition, str, list[str]]]]:
    """The root's recorded intros of `names`: the goal an exact one leads to (when it `fits`), and the longer
    intros that start with `names` (the transition, its keyword and the names after `names`)."""
    start: str | None = None
    longer: list[tuple[Transition, str, list[str]]] = []
    for transition in spec.transitions:
        step = _INTRO_STEP.fullmatch(transition.tactic.strip())
        if transition.goal != spec.root or transition.result is None or step is None:
            continue
        args = depth0_words(step.group(2))
        if args == names and step.group(1) != "rintro" and len(transition.result) == 1 and fits(
                spec.goals[transition.result[0]].hyps, spec.goals[transition.result[0]].target):
            start = transition.result[0]
        elif len(args) > len(names) and args[: len(names)] == names:
            longer.append((transition, step.group(1), args[len(names):]))
    return start, longer


def _leading_hyps(children: Sequence[GoalSpec], names: Sequence[str]) -> list[str] | None:
    """The hypothesis lines of `names`, as the first hypotheses of the (one) child goal show them, regrouped the
    way Lean groups consecutive hypotheses of one type; None when the child does not start with them."""
    if len(children) != 1:
        return None
    pairs = [pair for line in children[0].hyps for pair in split_hypothesis(line)][: len(names)]
    if [name for name, _ in pairs] != list(names):
        return None
    lines: list[tuple[list[str], str]] = []
    for name, type_ in pairs:
        if lines and lines[-1][1] == type_:
            lines[-1][0].append(name)
        else:
            lines.append(([name], type_))
    return [f"{' '.join(group)} : {type_}" for group, type_ in lines]


def split_hypothesis(line: str) -> list[tuple[str, str]]:
    """`"x y : ℝ"` → `[("x", "ℝ"), ("y", "ℝ")]`: Lean groups hypotheses of one type on one line."""
    names, sep, type_ = line.partition(" : ")
    if not sep or not names.strip() or not type_.strip():
        raise ValueError(f"hypothesis {line!r} is not of the form 'name… : type'")
    parts = names.split()
    for part in parts:
        if any(c in part for c in "()[]{}:,"):
            raise ValueError(f"hypothesis {line!r} has an invalid name {part!r}")
    return [(part, type_.strip()) for part in parts]


def goal_pp(goal: GoalSpec) -> str:
    """The goal as Lean prints it in messages: `case` line, hypotheses, `⊢ target`."""
    lines = [f"case {goal.case}"] if goal.case else []
    lines.extend(goal.hyps)
    lines.append(f"⊢ {goal.target}")
    return "\n".join(lines)


def goals_pp(goals: Sequence[GoalSpec]) -> str:
    """Goals as Lean prints several in a message: each `goal_pp`, a blank line between them."""
    return "\n\n".join(goal_pp(goal) for goal in goals)


def bundled_corpus_path() -> Path:
    """The corpus file shipped with the package."""
    return BUNDLED_DIR / "competition.json"


def corpus_files(source: Path) -> list[Path]:
    """The files a corpus at `source` is read from (`load_corpus`): a folder's `*.json` files in name order, or the
    file itself; none for a path that is neither."""
    if source.is_dir():
        return sorted(source.glob("*.json"))
    return [source] if source.is_file() else []


def load_corpus(path: Path | None = None) -> Corpus:
    """Load and validate a corpus file or folder of `*.json` files (`None`: the bundled corpus)."""
    source = bundled_corpus_path() if path is None else Path(path)
    files = corpus_files(source)
    if not files:
        if source.is_dir():
            raise BadInput(f"corpus folder {source} has no *.json files; point --corpus at a corpus file")
        raise BadInput(f"corpus {source} does not exist; pass a corpus JSON file or a folder of them")
    parts = [_load_file(file) for file in files]
    theorems: list[TheoremSpec] = []
    where: dict[str, Path] = {}
    for file, part in zip(files, parts, strict=True):
        for theorem in part.theorems:
            if theorem.name in where:
                raise BadInput(
                    f"{file}: theorem {theorem.name!r} is also defined in {where[theorem.name]}; "
                    "theorem names must be unique across a corpus"
                )
            where[theorem.name] = file
            theorems.append(theorem)
    names = list(dict.fromkeys(part.name for part in parts))
    return Corpus(name="+".join(names), theorems=theorems)


def _load_file(file: Path) -> Corpus:
    corpus = _read_corpus_file(file)
    for theorem in corpus.theorems:
        problem = theorem_problem(theorem)
        if problem is not None:
            raise BadInput(f"{file}: theorem {theorem.name!r}: {problem}")
    return corpus


def _read_corpus_file(file: Path) -> Corpus:
    """`file` as a `Corpus`; any problem is one line naming the file and the first offending field."""
    return read_json_model(file, Corpus, "corpus file", hint="the format is in docs/replay-corpus.md")


def theorem_problem(theorem: TheoremSpec) -> str | None:
    """The first thing wrong with a theorem, or None. Checks references, hypotheses and proofs."""
    problem = _goals_problem(theorem) or _transitions_problem(theorem)
    if problem is not None:
        return problem
    if not theorem.proofs:
        return "has no recorded proof"
    for number, proof in enumerate(theorem.proofs, start=1):
        problem = _proof_problem(theorem, proof)
        if problem is not None:
            return f"proof {number} {proof!r}: {problem}"
    return None


def _goals_problem(theorem: TheoremSpec) -> str | None:
    """The root goal is the bare statement, and every hypothesis line parses."""
    if theorem.root not in theorem.goals:
        return f"root goal {theorem.root!r} is not in goals"
    root = theorem.goals[theorem.root]
    if root.hyps or normalize_expr(root.target) != normalize_expr(theorem.statement):
        return f"root goal {theorem.root!r} must have no hypotheses and the statement as its target"
    for goal_id, goal in theorem.goals.items():
        for hyp in goal.hyps:
            try:
                split_hypothesis(hyp)
            except ValueError as exc:
                return f"goal {goal_id!r}: {exc}"
    return None


def _transitions_problem(theorem: TheoremSpec) -> str | None:
    """Every transition names known goals, once per (goal, tactic), with a non-empty tactic."""
    seen: set[tuple[str, str]] = set()
    for transition in theorem.transitions:
        if transition.goal not in theorem.goals:
            return f"transition {transition.tactic!r} refers to unknown goal {transition.goal!r}"
        for child in transition.result or ():
            if child not in theorem.goals:
                return f"transition {transition.tactic!r} on goal {transition.goal!r} yields unknown goal {child!r}"
        key = (transition.goal, tactic_key(transition.tactic))
        if key in seen:
            return f"goal {transition.goal!r} has two transitions for tactic {transition.tactic!r}"
        seen.add(key)
        if not transition.tactic.strip():
            return f"goal {transition.goal!r} has a transition with an empty tactic"
    return None


def _proof_problem(theorem: TheoremSpec, proof: Sequence[str]) -> str | None:
    """Replay `proof` on the first open goal each step; None if it closes every goal."""
    goals = [theorem.root]
    for tactic in proof:
        if SORRY_WORDS.search(tactic):
            return f"tactic {tactic!r} uses sorry/admit"
        if not goals:
            return f"tactic {tactic!r} comes after every goal is closed"
        transition = theorem.lookup(goals[0], tactic)
        if transition is None:
            return f"tactic {tactic!r} has no transition on goal {goals[0]!r}"
        if transition.result is None:
            return f"tactic {tactic!r} is recorded as failing on goal {goals[0]!r}"
        goals = [*transition.result, *goals[1:]]
    if goals:
        return f"leaves goals {goals!r} open"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leankit.corpus", description="Validate a replay corpus.")
    parser.add_argument("--corpus", type=Path, default=None, help="corpus file or folder (default: bundled)")
    args = parser.parse_args(argv)
    try:
        corpus = load_corpus(args.corpus)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    n_transitions = sum(len(t.transitions) for t in corpus.theorems)
    n_proofs = sum(len(t.proofs) for t in corpus.theorems)
    print(f"{corpus.name}: {len(corpus.theorems)} theorems, {n_transitions} transitions, {n_proofs} proofs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
