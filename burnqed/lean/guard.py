"""The tactic guard: generated tactics are untrusted code, refused before they reach Lean (docs/lean.md, "The tactic
guard").

    guard = TacticGuard.from_config(cfg.lean)
    reason = guard.check("run_tac do IO.println 1")   # -> "matches deny pattern ..."
    reason = guard.check("simp; instance : Add ℕ := ⟨(· * ·)⟩")   # -> "holds the command keyword 'instance' …"
    reason = guard.check_sketch("have h : P := by sorry\nsorry")   # -> "a `sorry` outside a … hole"

A refusal is a domain outcome (`TacticKind.REFUSED`), recorded like a failed tactic. The deny list is `lean.deny`
(default `burnqed.config.DEFAULT_DENY`), the same list the soundness rules reject a proof path by. The patterns see
the tactic as Lean reads its identifiers (`«…»` escapes dropped). Four rules are built in, whatever `lean.deny`
says, all on Lean's tokens (`leankit.commands`, `leankit.text`): no token that starts a command (`instance`,
`axiom«x»`, `infixl`, `open`, `end`, `#eval`, `@[`, … at any column: Lean would run it as a command of its own), no
name `sorryAx`, no text Lean may read otherwise (a token it breaks off inside and reads on from, `'aopen X'`,
`0xopen`; an opener glued to a symbol, `<--`, read by the notation tokens in scope), and no string holding `{` (an
interpolated string's `{…}` is code).
A sketch (`burnqed.text.sketch`) is checked whole: its holes are the only `sorry`s allowed, and its skeleton (the
sketch with each hole's `:= by sorry` dropped) must pass the same rules as a tactic.
The guard is the first fence, not the only one: the compile's checks and the cluster's sandboxed Lean pods follow.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from burnqed.records.replies import SketchResult, TacticKind, TacticResult
from burnqed.text.sketch import Sketch, read_sketch
from leankit.commands import IDENT, command_tokens, lexical_problem, tokens
from leankit.text import read_as_lean

if TYPE_CHECKING:
    from burnqed.config import LeanConfig


def builtin_refusal(text: str) -> str | None:
    """The reason the guard's built-in rules refuse `text` (a tactic, a proof, an answer), or None: a command token
    anywhere (`leankit.commands.command_tokens`: Lean ends the term or tactic there and runs a command of its own, which
    may redefine `+` or add an axiom), the name `sorryAx` (what `sorry` elaborates to, named directly), text Lean may
    read otherwise than these rules (`leankit.commands.lexical_problem`: a token Lean breaks off inside, a comment
    or literal the notation tokens in scope decide, a string holding `{`, whose `{…}` an interpolated string runs)."""
    found = command_tokens(text)
    if found:
        return f"holds the command keyword {found[0].text!r}: Lean would run a command of its own there"
    for token in tokens(text):
        if token.kind == IDENT and token.name.split(".")[-1] == "sorryAx":
            return "names `sorryAx`, what `sorry` elaborates to"
    return lexical_problem(text)


class TacticGuard:
    """Refuses tactics that are empty, too long, carry control characters, match a deny pattern or hold what the
    built-in rules refuse (`builtin_refusal`)."""

    def __init__(self, deny: Sequence[str], max_chars: int = 4000, *, builtin: bool = True) -> None:
        """`builtin=False` drops the built-in rules: only for checking the nets under the guard (`burnqed lean
        selftest`, the tests), never from a configuration (`from_config` keeps them)."""
        self.patterns = tuple(re.compile(p, re.MULTILINE) for p in deny)
        self.max_chars = max_chars
        self.builtin = builtin

    @classmethod
    def from_config(cls, config: LeanConfig) -> TacticGuard:
        return cls(config.deny, config.max_tactic_chars)

    def check(self, tactic: str) -> str | None:
        """The reason to refuse `tactic`, or None when it may be sent to Lean."""
        if not tactic.strip():
            return "empty tactic"
        if len(tactic) > self.max_chars:
            return f"tactic longer than {self.max_chars} characters"
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
        an axiom or a `set_option`, `native_decide`, …), named."""
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
