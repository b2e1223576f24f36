"""Tactic text for the replay server: what parses, how scripts split into steps, and the Lean-style
error messages given for tactics the corpus does not know."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from burnqed.lean.corpus import (
    Corpus,
    GoalSpec,
    goal_pp,
    split_hypothesis,
)
from burnqed.lean_text import BRACKET_PAIRS, CLOSE_BRACKETS, OPEN_BRACKETS, OPENER_OF
from burnqed.tactic_text import first_separator

JsonObj = dict[str, Any]

MAX_SLEEP_MS = 600_000
MAX_NESTING = 128


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Heads the tactic parser accepts; anything else is a `parseError` like Lean's "unknown tactic".
KNOWN_TACTICS = _words(
    """
    abel absurd ac_rfl admit aesop all_goals any_goals apply apply_assumption apply_fun apply_mod_cast
    apply_rules assumption assumption_mod_cast bound by_cases by_contra by_contra' calc cancel_denoms case
    case' cases cases' casesm change choose clear congr constructor constructorm continuity contradiction
    contrapose conv dsimp decide done exact exact_mod_cast exacts exfalso exists existsi ext ext1 fail
    field_simp filter_upwards fin_cases first focus funext gcongr generalize group have haveI induction
    induction' infer_instance injection interval_cases intro intros iterate left let lift linarith
    linear_combination match mod_cases module native_decide next nlinarith noncomm_ring norm_cast norm_num
    norm_num1 nth_rewrite nth_rw obtain omega on_goal polyrith positivity push_cast push_neg qify rcases
    refine refine' rename_i repeat revert rewrite rfl right ring ring1 ring_nf rintro rw rw_mod_cast rwa
    set set_option show simp simp_all simp_arith simp_rw simpa skip sleep solve_by_elim sorry specialize split
    split_ands split_ifs subst subst_vars suffices symm tauto trans trivial try unfold use use! wlog zify
    exact? apply? simp? rw? aesop? says omega_nat bv_omega decreasing_tactic field_simp? nlinarith!
    linarith! norm_num! ring_nf! positivity! exists_intro and_intros rel
    """
)

# Heads whose identifiers must resolve (else Lean says `unknown identifier`).
_RESOLVING_HEADS = _words(
    "exact exact_mod_cast apply refine refine' exacts rw rwa rewrite nth_rewrite nth_rw simp_rw simp "
    "simp_all simpa norm_num field_simp linarith nlinarith positivity use specialize calc"
)
_KEYWORDS = _words(
    "at with only fun by using generalizing in if then else show from this Type Prop Sort True False "
    "do let have match end on_goal"
)
# Mathlib names the corpus may not mention but a policy model may well use: these are "known"
# (wrong in context gives a type error), anything else unbound is an unknown identifier.
_BUILTIN_NAMES = _words(
    """
    sq_nonneg sq_abs abs_nonneg abs_sub_comm abs_le abs_lt mul_pos mul_nonneg add_pos add_nonneg pow_pos
    pow_nonneg pow_two sq mul_self_nonneg le_refl le_of_lt lt_of_le_of_lt le_trans lt_trans mul_comm
    add_comm mul_assoc add_assoc two_mul div_add_div_same Or.inl Or.inr And.intro And.left And.right
    Iff.intro absurd False.elim trivial rfl Nat.succ_le_iff Nat.lt_succ_iff Nat.Prime Nat.Prime.two_le
    Nat.prime_def_lt Nat.dvd_sub' Nat.mod_lt Int.emod_emod_of_dvd Finset.sum_range_succ Finset.range
    Real.sqrt Real.sqrt_nonneg Real.sq_sqrt Real.sqrt_sq Set.mem_setOf_eq Set.mem_inter_iff
    Set.mem_union Set.subset_def Set.ext id Function.comp sub_nonneg sub_pos div_pos one_div
    """
)

_IDENT = re.compile(r"(?<![\w.'₀-₉✝])([^\W\d][\w'.₀-₉!?]*)")
_BINDER = re.compile(r"(?:fun|λ)\s[^=]*=>")
_SEQ = re.compile(r"<;>|;")


# ---------------------------------------------------------------------------------------------------
# Tactic text: parsing checks, splitting, heads.


def strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def parse_problem(text: str) -> str | None:
    """Pantograph's `parseError` text for syntactically broken tactic input, or None if it parses."""
    if not text.strip():
        return "<input>:1:0: unexpected end of input"
    stack: list[tuple[str, int, int]] = []
    line, col = 1, 0
    in_string = False
    for char in text:
        if char == '"':
            in_string = not in_string
        elif not in_string and char in OPEN_BRACKETS:
            stack.append((char, line, col))
        elif not in_string and char in CLOSE_BRACKETS:
            if not stack or stack[-1][0] != OPENER_OF[char]:
                return f"<input>:{line}:{col}: unexpected token '{char}'; expected term"
            stack.pop()
        if char == "\n":
            line, col = line + 1, 0
        else:
            col += 1
    if in_string:
        return f"<input>:{line}:{col}: unterminated string literal; expected '\"'"
    if stack:
        return f"<input>:{line}:{col}: unexpected end of input; expected '{BRACKET_PAIRS[stack[-1][0]]}'"
    for segment_line, segment in _segments(text):
        head = tactic_head(segment)
        if head and head not in KNOWN_TACTICS and head.rstrip("!?") not in KNOWN_TACTICS:
            column = len(segment) - len(segment.lstrip(" ·."))
            return f"<input>:{segment_line}:{column}: unknown tactic"
    return None


def sequence_problem(text: str) -> str | None:
    """Pantograph parses `goal.tactic`'s text as ONE tactic (`runParserCategory` on `tactic`, which must reach
    the end of the input; the category has no `;` combinator): a top-level `t1; t2`, or a trailing `;`, is
    the parse error Lean gives where the first tactic ends. `(t1; t2)` and `t1 <;> t2` parse."""
    index = first_separator(text)
    if index is None:
        return None
    before = text.expandtabs(2)[:index]
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1)
    return f"<input>:{line}:{column}: expected end of input"


def _segments(text: str) -> Iterable[tuple[int, str]]:
    """Top-level tactic segments (split at newlines, `;`, `<;>`) with their 1-based line numbers."""
    for number, line in enumerate(text.split("\n"), start=1):
        for piece in split_top(line, _SEQ):
            if piece.strip():
                yield number, piece
            # Only the first line's pieces and lines at block starts carry tactic heads; continuation
            # lines inside brackets are skipped because split_top keeps bracketed text together.


def tactic_head(text: str) -> str:
    """The first word of a tactic, after focus bullets and opening parentheses."""
    stripped = text.strip().lstrip("·").strip()
    if stripped.startswith(". "):
        stripped = stripped[2:].lstrip()
    # `| succ k ih => tac` alternatives of `induction … with` / `match` carry no head of their own.
    if not stripped or stripped[0] in "([⟨{|":
        return ""
    word = stripped.split(None, 1)[0]
    # `simp?`/`norm_num!` style suffixes belong to the head; `exact?` too.
    return word


def split_top(text: str, separator: re.Pattern[str]) -> list[str]:
    """Split at `separator` matches outside brackets and strings (the pieces keep their text)."""
    pieces: list[str] = []
    depth = 0
    in_string = False
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == '"':
            in_string = not in_string
        elif not in_string and char in OPEN_BRACKETS:
            depth += 1
        elif not in_string and char in CLOSE_BRACKETS:
            depth = max(0, depth - 1)
        elif not in_string and depth == 0:
            match = separator.match(text, index)
            if match is not None and match.end() > index:
                pieces.append(text[start:index])
                index = start = match.end()
                continue
        index += 1
    pieces.append(text[start:])
    return pieces


def dedent(text: str) -> str:
    lines = text.split("\n")
    indents = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return "\n".join(line[cut:] for line in lines).strip("\n")


def split_blocks(text: str) -> list[str]:
    """Top-level tactics of a script: a line at the base indentation starts one, deeper lines continue it."""
    blocks: list[list[str]] = []
    for line in dedent(text).split("\n"):
        if not line.strip():
            continue
        if blocks and (line.startswith((" ", "|")) or block_depth(blocks[-1]) > 0):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return ["\n".join(block) for block in blocks]


def max_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in OPEN_BRACKETS:
            depth += 1
            deepest = max(deepest, depth)
        elif char in CLOSE_BRACKETS:
            depth -= 1
    return deepest


def block_depth(lines: Sequence[str]) -> int:
    depth = 0
    for char in "\n".join(lines):
        if char in OPEN_BRACKETS:
            depth += 1
        elif char in CLOSE_BRACKETS:
            depth -= 1
    return depth


# ---------------------------------------------------------------------------------------------------
# Lean-style error messages for tactics the corpus does not know.


def goals_pp(goals: Sequence[GoalSpec]) -> str:
    return "\n\n".join(goal_pp(goal) for goal in goals)


def _relation_negation(target: str) -> str:
    """The hypothesis linarith adds when it negates `target` (`a < b` → `a ≥ b`)."""
    negations = {" ≤ ": " > ", " < ": " ≥ ", " ≥ ": " < ", " > ": " ≤ ", " = ": " < "}
    found = [(rel, target.count(rel)) for rel in negations if rel in target]
    if len(found) == 1 and found[0][1] == 1 and not any(s in target for s in ("∧", "∨", "→", "↔")):
        left, right = target.split(found[0][0])
        return f"{left}{negations[found[0][0]]}{right}"
    return f"¬({target})"


def linarith_failure(goal: GoalSpec) -> str:
    """`linarith failed…` followed by the negated goal, as Mathlib prints it."""
    hyps = list(goal.hyps)
    negation = _relation_negation(goal.target)
    # linarith negates a comparison goal; any other goal is just replaced by `False` (exfalso).
    if not negation.startswith("¬("):
        hyps.append(f"a✝ : {negation}")
    negated = GoalSpec(hyps=hyps, target="False", case=goal.case)
    return f"linarith failed to find a contradiction\n{goal_pp(negated)}"


def local_names(goal: GoalSpec) -> set[str]:
    return {name for hyp in goal.hyps for name, _ in split_hypothesis(hyp)}


def identifiers(text: str) -> list[str]:
    """Identifiers referenced by a tactic's arguments (bound `fun x =>` names and keywords dropped)."""
    cleaned = _BINDER.sub(" ", text)
    cleaned = re.sub(r'"[^"]*"', " ", cleaned)
    return [name.rstrip(".") for name in _IDENT.findall(cleaned) if name not in _KEYWORDS]


def unknown_identifier(goal: GoalSpec, arguments: str, vocabulary: Collection[str]) -> str | None:
    """The first identifier that is neither local, nor in the vocabulary, nor a known global name."""
    local = local_names(goal)
    for name in identifiers(arguments):
        root = name.split(".")[0]
        if root in local or name in vocabulary or name in _BUILTIN_NAMES or root in vocabulary:
            continue
        return name
    return None


def tactic_error(goal: GoalSpec, tactic: str, vocabulary: Collection[str] = ()) -> str:
    """The message Lean would plausibly give for `tactic` failing on `goal` (the corpus has no record)."""
    text = " ".join(tactic.split())
    head = tactic_head(text)
    arguments = text[len(head) :].strip() if text.startswith(head) else text
    base = head.rstrip("!?")
    pp = goal_pp(goal)
    if base in _RESOLVING_HEADS:
        unknown = unknown_identifier(goal, arguments, vocabulary)
        if unknown is not None:
            return f"unknown identifier '{unknown}'"
    return (
        _automation_error(head, base, goal, pp)
        or _term_error(base, arguments, goal, pp, vocabulary)
        or _closing_error(base, arguments, goal, pp)
        or f"tactic '{base}' failed\n{pp}"
    )


def _automation_error(head: str, base: str, goal: GoalSpec, pp: str) -> str | None:
    """Lean's message when a search or decision procedure gives up; None for other tactics."""
    if head in ("exact?", "apply?"):
        return "`exact?` could not close the goal. Try `apply?` to see partial suggestions."
    if base in ("linarith", "nlinarith"):
        return linarith_failure(goal)
    if base == "positivity":
        if not re.match(r"^(0 [<≤] |.* ≠ 0$)", goal.target):
            return "not a positivity goal"
        return f"failed to prove positivity: the expression is not known to be positive\n{pp}"
    if base in ("simp", "simp_all", "dsimp", "simp_arith", "field_simp", "norm_num", "norm_num1", "simpa"):
        return "simp made no progress"
    if base in ("push_neg", "push_cast", "norm_cast"):
        return f"{base} made no progress"
    if base == "omega":
        return (
            "omega could not prove the goal:\nNo usable constraints found for the hypotheses and goal."
            if "ℝ" in pp
            else "omega could not prove the goal:\na possible counterexample may satisfy the constraints\n"
            "  0 ≤ x\nwhere\n x := a free variable of the goal"
        )
    if base == "decide":
        return (
            f"tactic 'decide' failed for proposition\n  {goal.target}\nsince its 'Decidable' instance "
            "did not reduce to 'isTrue' or 'isFalse'."
        )
    if base in ("ring", "ring1", "ring_nf"):
        return f"ring failed, ring_nf subsidiary goal\n{pp}"
    return None


def _term_error(base: str, arguments: str, goal: GoalSpec, pp: str, vocabulary: Collection[str]) -> str | None:
    """Lean's message when a tactic's term, rule or binder does not fit the goal; None for other tactics."""
    if base in ("exact", "exact_mod_cast", "refine", "refine'", "exacts"):
        term = arguments
        local = _hyp_types(goal)
        root = identifiers(term)[0] if identifiers(term) else ""
        has_type = local.get(root, "?m.1")
        return (
            f"type mismatch\n  {term}\nhas type\n  {has_type} : Prop\nbut is expected to have type\n"
            f"  {goal.target} : Prop"
        )
    if base == "apply":
        name = identifiers(arguments)[0] if identifiers(arguments) else arguments
        conclusion = _hyp_types(goal).get(name, "?m.1")
        return (
            f"tactic 'apply' failed, could not unify the conclusion of `@{name}`\n  {conclusion}\n"
            f"with the goal\n  {goal.target}\n{pp}"
        )
    if base in ("rw", "rwa", "rewrite", "nth_rewrite", "nth_rw", "simp_rw"):
        rules = identifiers(arguments)
        rule = rules[0] if rules else "?a"
        lhs = _hyp_types(goal).get(rule, "").split(" = ")[0] or "?a"
        return f"tactic 'rewrite' failed, did not find instance of the pattern in the target expression\n  {lhs}\n{pp}"
    if base in ("intro", "intros", "rintro"):
        return f"tactic 'introN' failed, insufficient number of binders\n{pp}"
    if base in ("constructor", "left", "right", "exists", "use", "existsi"):
        return f"tactic '{base}' failed, target is not an inductive datatype with a matching constructor\n{pp}"
    if base in ("cases", "rcases", "obtain", "induction", "cases'", "induction'"):
        term = arguments.split(" with ", maxsplit=1)[0].rsplit(":=", maxsplit=1)[-1].strip()
        unknown = unknown_identifier(goal, term, vocabulary) if term else None
        if unknown is not None:
            return f"unknown identifier '{unknown}'"
        return f"tactic 'induction' failed, major premise type is not an inductive type \n  {term}\n{pp}"
    return None


def _closing_error(base: str, arguments: str, goal: GoalSpec, pp: str) -> str | None:
    """Lean's message when a closing or goal-stating tactic fails; None for other tactics."""
    if base in ("assumption", "contradiction", "trivial", "exfalso", "tauto", "aesop"):
        if base == "aesop":
            return "aesop: failed to prove the goal after exhaustive search."
        return f"tactic '{base}' failed\n{pp}"
    if base == "rfl":
        return (
            "The rfl tactic failed. Possible reasons:\n- The goal is not a reflexive relation (neither `=` "
            "nor a relation with a @[refl] lemma).\n- The arguments of the relation are not equal.\n"
            f"Try using the reflexivity lemma for your relation explicitly, e.g. `exact Eq.refl _` or\n"
            f"`exact HEq.rfl` etc.\n{pp}"
        )
    if base in ("have", "suffices", "show", "calc", "haveI", "set", "let"):
        stated = re.search(r":\s*(.+?)\s*:=", arguments)
        if stated:
            return f"unsolved goals\n{goal_pp(GoalSpec(hyps=goal.hyps, target=stated.group(1)))}"
        return f"unsolved goals\n{pp}"
    if base == "interval_cases":
        return "interval_cases failed: could not find upper and lower bounds on the variable"
    return None


def _hyp_types(goal: GoalSpec) -> dict[str, str]:
    return {name: type_ for hyp in goal.hyps for name, type_ in split_hypothesis(hyp)}


def corpus_vocabulary(corpus: Corpus) -> frozenset[str]:
    """Global names the corpus mentions in working tactics and statements: these exist in Mathlib."""
    names: set[str] = set()
    for theorem in corpus.theorems:
        names.update(identifiers(theorem.statement))
        for transition in theorem.transitions:
            if transition.result is not None:
                names.update(identifiers(transition.tactic))
    return frozenset(names)
