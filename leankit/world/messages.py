"""Lean's failure messages for a tactic on a recorded goal: what a corpus says where it has no record. The
generated world records them for its wrong tactics (`leankit.world.draft.wrong_message`), and the replay server
answers them for the tactics a corpus did not record, so a recorded failure reads like an unrecorded one.

    tactic_error(GoalSpec(hyps=["x : ℝ"], target="0 < x"), "linarith")
    # -> "linarith failed to find a contradiction\\nx : ℝ\\na✝ : 0 ≥ x\\n⊢ False"

The message depends on the tactic's head (`leankit.statements.tactic_head`): an identifier the goal, the corpus
(`corpus_vocabulary`) and a short list of Mathlib names do not know is `unknown identifier`; automation that gives
up, a term that does not fit and a closing tactic that fails each get the text Lean and Mathlib print for them.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from leankit.corpus import Corpus, GoalSpec, goal_pp, split_hypothesis
from leankit.statements import tactic_head


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


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
