"""The tactic guard: generated tactics are untrusted code, refused before they reach Lean (docs/lean.md, "The tactic
guard").

    guard = TacticGuard.from_config(cfg.lean)
    reason = guard.check("run_tac do IO.println 1")   # -> "matches deny pattern ..."
    reason = guard.check("simp; instance : Add ℕ := ⟨(· * ·)⟩")   # -> "holds the command keyword 'instance' …"
    reason = guard.check_sketch("have h : P := by sorry\nsorry")   # -> "a `sorry` outside a … hole"

A refusal is a domain outcome (`TacticKind.REFUSED`), recorded like a failed tactic. The deny list is `lean.deny`
(default `burnqed.config.DEFAULT_DENY`), the same list the soundness rules reject a proof path by. The patterns see
the tactic as Lean reads its identifiers (`«…»` escapes dropped). Five rules are built in, whatever `lean.deny`
says, all on Lean's tokens (`leankit.commands`, `leankit.text`): no token that starts a command (`instance`,
`axiom«x»`, `infixl`, `open`, `end`, `#eval`, `@[`, … at any column: Lean would run it as a command of its own), no
name `sorryAx`, no text Lean may read otherwise (a token it breaks off inside and reads on from, `'aopen X'`,
`0xopen`; an opener glued to a symbol, `<--`, read by the notation tokens in scope), no string holding `{` (an
interpolated string's `{…}` is code), and no tactic configuration but a literal (`configuration_problem`: Lean
compiles and runs a configuration, `simp (maxSteps := f x)`).
A sketch (`burnqed.text.sketch`) is checked whole: its holes are the only `sorry`s allowed, and its skeleton (the
sketch with each hole's `:= by sorry` dropped) must pass the same rules as a tactic.
The guard is the first fence, not the only one: the compile's checks and the cluster's sandboxed Lean pods follow.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from burnqed.lean.tactic_starts import AFTER_AN_ARGUMENT, BEFORE_A_TACTIC, TACTIC_VALUED
from burnqed.records.replies import SketchResult, TacticKind, TacticResult
from burnqed.text.sketch import Sketch, read_sketch
from leankit.commands import IDENT, NUMBER, SYMBOL, Token, command_tokens, lexical_problem, tokens
from leankit.text import read_as_lean

if TYPE_CHECKING:
    from burnqed.config import LeanConfig

T = TypeVar("T")
# Model text longer than this is read in a worker thread (`read_off_loop`): up to ~45 ms of CPU on the loop at the
# worst shape measured (nested brackets through read_attempt, benchmarks/guard_cost.py); a tactic never is.
OFF_LOOP_CHARS = 4_000


async def read_off_loop(text: str, read: Callable[[], T]) -> T:
    """`read()`, a reader or check of the model text `text`: run here when the text is short, in a worker thread
    (`asyncio.to_thread`) when it is longer than OFF_LOOP_CHARS, so that the event loop's other coroutines (another
    theorem's search, the Lean watchdogs) keep running while it is read; the readers are pure."""
    if len(text) <= OFF_LOOP_CHARS:
        return read()
    return await asyncio.to_thread(read)


def builtin_refusal(text: str) -> str | None:
    """The reason the guard's built-in rules refuse `text` (a tactic, a proof, an answer), or None: a command token
    anywhere (`leankit.commands.command_tokens`: Lean ends the term or tactic there and runs a command of its own, which
    may redefine `+` or add an axiom), the name `sorryAx` (what `sorry` elaborates to, named directly), text Lean may
    read otherwise than these rules (`leankit.commands.lexical_problem`: a token Lean breaks off inside, a comment
    or literal the notation tokens in scope decide, a string holding `{`, whose `{…}` an interpolated string runs),
    a tactic configuration that is more than a literal (`configuration_problem`: Lean compiles and runs it)."""
    found = command_tokens(text)
    if found:
        return f"holds the command keyword {found[0].text!r}: Lean would run a command of its own there"
    for token in tokens(text):
        if token.kind == IDENT and token.name.split(".")[-1] == "sorryAx":
            return "names `sorryAx`, what `sorry` elaborates to"
    return lexical_problem(text) or configuration_problem(text)


# A tactic configuration (`simp (maxSteps := V)`, `(config := V)`) is compiled and run: core's `declare_config_elab`
# (Lean/Elab/Tactic/Config.lean) evaluates it with `Meta.evalExpr'`. V may hold names, numerals, `.ctor`, records
# `{ a := V, … }` (`{ c with … }`), `+ - * /`, brackets and a `.ctor [list]`; no application, `fun`, string, `^`.
_CONFIG_SYMBOLS = frozenset({"{", "}", "(", ")", "[", "]", ",", ":", ".", "+", "-", "*", "/", ":="})
_OPENERS, _CLOSERS = "([{⟨", ")]}⟩"
# What stands before a term (after it, `f (n := V)` is a named argument, elaborated, never run): words and symbols.
_BEFORE_A_TERM = frozenset({
    "exact", "apply", "refine", "refine'", "use", "exists", "existsi", "specialize", "convert", "exact_mod_cast",
    "apply_mod_cast", "exacts", "calc", "show", "from", "have", "let", "obtain", "rcases", "set", "generalize",
    "suffices", "at", "using", "fun", "in",
})
_TERM_SYMBOLS = frozenset({":=", ",", "⟨", "←", "+", "-", "*", "/", "=", "<", ">", "≤", "≥", "^", "∘", "$", "•", "∈",
                           "∧", "∨", "→", "↔", "@", "↦", "∣", "≠", "×", "∑", "∏", "¬", "↑", "∀", "∃", "λ"})


def configuration_problem(text: str) -> str | None:
    """Why a tactic configuration in `text` may run code, or None: its value is more than a literal (above). A
    `(name := V)` after a name that a tactic may stand for is read as one (after `exact foo`, a term, it is a named
    argument); where a tactic starts is Lean's parsers' reading (`burnqed.lean.tactic_starts`), every combinator
    alike, and an ambiguous place counts as a configuration. Linear in the tokens: each bracket's partner is found
    once, the walk back to a tactic's name is kept per bracket group, and a configuration inside a value already
    found literal is part of that literal."""
    listed = list(tokens(text))
    partner = _partners(listed)
    anchored = next((at for at, t in enumerate(listed) if t.kind == IDENT and t.text in AFTER_AN_ARGUMENT), len(listed))
    walked: dict[int, bool] = {}
    literal_to = -1  # the end of the last value found literal
    for at, token in enumerate(listed):
        if at < literal_to or not (token.kind == SYMBOL and token.text == "(" and at + 2 < len(listed)
                                   and listed[at + 1].kind == IDENT and listed[at + 2].text == ":="):
            continue
        name = listed[at + 1].name
        if name in TACTIC_VALUED or (
                "." not in name and at < anchored and not _after_a_tactic(text, listed, at, partner, walked)):
            continue
        end = partner.get(at, len(listed))
        value = listed[at + 3 : end]
        if name != "config" and value and value[0].kind == IDENT and value[0].text == "by":
            continue  # `(opt := by tac)` is quoted, a syntax value; `(config := by …)` is a term the tactics make
        if not _literal_configuration(value):
            return (f"configures a tactic with code at {text[token.start : token.start + 40]!r}: a tactic's "
                    "configuration is compiled and run (write a literal: true, 400000, .reducible, { a := b })")
        literal_to = end
    return None


def _partners(listed: list[Token]) -> dict[int, int]:
    """Each paired bracket's index to its partner's, both ways, in one pass: a closer of any kind closes the latest
    open bracket of any kind (brackets are counted, not matched by kind); an unpaired one has none."""
    partner: dict[int, int] = {}
    open_at: list[int] = []
    for index, token in enumerate(listed):
        if token.kind == SYMBOL and token.text in _OPENERS:
            open_at.append(index)
        elif token.kind == SYMBOL and token.text in _CLOSERS and open_at:
            opener = open_at.pop()
            partner[opener], partner[index] = index, opener
    return partner


def _literal_configuration(value: list[Token]) -> bool:
    """Whether `value` is a literal by the rule above."""
    for index, token in enumerate(value):
        if token.kind not in (SYMBOL, IDENT, NUMBER) or (token.kind == SYMBOL and token.text not in _CONFIG_SYMBOLS):
            return False
        if index == 0:
            continue
        before = value[index - 1]
        closes = before.kind == SYMBOL and before.text in (")", "]", "}")
        if closes and token.text == "." and token.start == before.end:
            return False  # `(x).f`, `{…}.f`: a call
        atom_before = (before.kind in (IDENT, NUMBER) and before.text != "with") or closes
        atom = (token.kind in (IDENT, NUMBER) and token.text != "with") or token.text in ("(", "[", "{")
        field = token.kind == IDENT and index + 1 < len(value) and value[index + 1].text == ":="
        constructor_list = (token.text == "[" and before.kind == IDENT and index >= 2
                            and value[index - 2].text == "." and value[index - 2].end == before.start)
        if atom_before and atom and not field and not constructor_list:
            return False  # an application
    return True


def _after_a_tactic(text: str, listed: list[Token], at: int, partner: dict[int, int], walked: dict[int, bool]) -> bool:
    """Whether the `(` at `at` follows a name a tactic may stand for: back over the items before it (`+opt`, `-opt`,
    `(…)`), an undotted name (`simp?!` is one name to these readers) where a tactic may start. The answer is kept in
    `walked` for `at` and for each group walked over: a walk from a later item ends at the first group kept."""
    def glued(index: int) -> bool:
        return listed[index - 1].end == listed[index].start

    head, groups, found = at - 1, [at], None
    while head >= 0 and found is None:
        token = listed[head]
        if token.kind == SYMBOL and token.text == ")":
            opener = partner.get(head, -1)
            if opener in walked:
                found = walked[opener]
            else:
                groups.append(opener)
                head = opener - 1
        elif token.kind == IDENT and head >= 1 and listed[head - 1].text in ("+", "-") and glued(head):
            head -= 2
        else:
            break
    if found is None:
        found = (head >= 0 and listed[head].kind == IDENT and "." not in listed[head].name
                 and _where_a_tactic_starts(text, listed, head))
    walked.update(dict.fromkeys(groups, found))
    return found


def _where_a_tactic_starts(text: str, listed: list[Token], at: int) -> bool:
    """Whether a tactic may start at token `at` (a name or an opening bracket: where the bracket may start one): right
    after a token that stands before a tactic in Lean's parsers (`BEFORE_A_TACTIC`: `try`, `<|>`, `=>`, `;`, …; `:=`
    in `(disch := …)`), at the text's start, on a new line after a name or a closing bracket, after a numeral
    (`iterate 2`) or a symbol not known to stand before a term."""
    while at > 0 and listed[at - 1].kind == SYMBOL and listed[at - 1].text in ("(", "[", "{"):
        at -= 1
    if at == 0:
        return True
    before = listed[at - 1]
    newline = "\n" in text[before.end : listed[at].start]
    if before.kind == IDENT:
        if before.text in BEFORE_A_TACTIC:
            return True
        return not (before.text in _BEFORE_A_TERM or "." in before.name) and newline
    if before.kind != SYMBOL:
        return True  # a numeral (`iterate 2`), a string (`success_if_fail_with_msg "m"`)
    if before.text == ":=":  # `(disch := tac)`, `(norm := tac)`: a tactic; elsewhere a term
        return at >= 3 and listed[at - 2].text in TACTIC_VALUED and listed[at - 3].text == "("
    run = before.text
    for index in range(at - 2, max(at - 5, -1), -1):  # the symbols glued before it: `<|>` is `<`, `|`, `>`
        if listed[index].kind != SYMBOL or listed[index].end != listed[index + 1].start:
            break
        run = listed[index].text + run
    if any(run[cut:] in BEFORE_A_TACTIC for cut in range(len(run))):
        return True
    if before.text in _TERM_SYMBOLS:
        return False
    if before.text in (")", "]", "}", "⟩"):
        return newline
    return True  # a symbol not known to stand before a term


class TacticGuard:
    """Refuses tactics that are empty, too long, carry control characters, match a deny pattern or hold what the
    built-in rules refuse (`builtin_refusal`)."""

    def __init__(self, deny: Sequence[str], max_chars: int = 4000, *, builtin: bool = True,
                 max_text_chars: int = 100_000) -> None:
        """`builtin=False` drops the built-in rules: only for checking the nets under the guard (`burnqed lean
        selftest`, the tests), never from a configuration (`from_config` keeps them). `max_chars`: a tactic's cap
        (`lean.max_tactic_chars`); `max_text_chars`: any model text's (`lean.max_text_chars`, `over_cap`)."""
        self.patterns = tuple(re.compile(p, re.MULTILINE) for p in deny)
        self.max_chars = max_chars
        self.max_text_chars = max_text_chars
        self.builtin = builtin

    @classmethod
    def from_config(cls, config: LeanConfig) -> TacticGuard:
        return cls(config.deny, config.max_tactic_chars, max_text_chars=config.max_text_chars)

    def over_cap(self, text: str | int) -> str | None:
        """Why `text` (a completion, whole proof, answer or sketch a model wrote; or its length) is too long to be
        read at all, or None: asked before any reader lexes it, so that no reader's cost grows past the cap's."""
        length = text if isinstance(text, int) else len(text)
        if length > self.max_text_chars:
            return f"{length} characters, over the cap of {self.max_text_chars} (lean.max_text_chars)"
        return None

    def check(self, tactic: str) -> str | None:
        """The reason to refuse `tactic`, sent to Lean alone (a step, a replayed tactic), or None when it may be:
        over `lean.max_tactic_chars`, or what `check_in_proof` refuses."""
        if len(tactic) > self.max_chars:
            return f"{len(tactic)} characters, over the cap of {self.max_chars} (lean.max_tactic_chars)"
        return self.check_in_proof(tactic)

    def check_in_proof(self, tactic: str) -> str | None:
        """The reason to refuse `tactic`, a top-level tactic of a whole proof (`lean.soundness.check_path`), or None:
        every rule of `check` but the tactic cap (a whole proof's one top-level tactic may be a long `have … := by`
        block); the proof is bounded by `lean.max_text_chars` instead (`over_cap`), and so is each tactic here."""
        over = self.over_cap(tactic)
        if over is not None:
            return over
        if not tactic.strip():
            return "empty tactic"
        if any(ch in tactic for ch in "\x00\x1b"):
            return "tactic contains control characters"
        builtin = builtin_refusal(tactic) if self.builtin else None
        if builtin is not None:
            return builtin
        read = read_as_lean(tactic)
        for pattern in self.patterns:
            if pattern.search(read):
                return f"matches deny pattern {pattern.pattern!r}"
        return None

    def refusal(self, tactic: str) -> TacticResult | None:
        """A REFUSED result for a denied tactic (to record as a failed edge), or None."""
        reason = self.check(tactic)
        if reason is None:
            return None
        return TacticResult(TacticKind.REFUSED, errors=(f"refused by the tactic guard: {reason}",))

    def check_sketch(self, text: str) -> Sketch | str:
        """The sketch in `text` when it may be sent to Lean, else the reason to refuse it: not a sketch (a `sorry`
        outside a hole among the reasons, whatever the deny list), or a skeleton the guard refuses (a command such as
        an axiom or a `set_option`, `native_decide`, …), named; a text over the cap (`over_cap`) is not read."""
        over = self.over_cap(text)
        if over is not None:
            return f"the sketch has {over}"
        sketch = read_sketch(text)
        if isinstance(sketch, str):
            return sketch
        lexical = lexical_problem(text) if self.builtin else None  # as written: the skeleton drops its comments
        if lexical is not None:
            return f"the sketch {lexical}"
        reason = self.check(sketch.skeleton)
        if reason is not None:
            return f"the sketch's skeleton {reason}"
        return sketch

    def sketch_refusal(self, text: str) -> Sketch | SketchResult:
        """The sketch, or a REFUSED result naming the reason (nothing reaches Lean)."""
        checked = self.check_sketch(text)
        if isinstance(checked, Sketch):
            return checked
        return SketchResult(TacticKind.REFUSED, route="", errors=(f"refused by the tactic guard: {checked}",))
