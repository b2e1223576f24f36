"""The tactic guard: generated tactics are untrusted code, refused before they reach Lean (docs/lean.md, "The tactic
guard").

    guard = TacticGuard.from_config(cfg.lean)
    reason = guard.check("run_tac do IO.println 1")   # -> "refused: matches deny pattern ..."
    reason = guard.check_sketch("have h : P := by sorry\nsorry")   # -> "a `sorry` outside a … hole"

A refusal is a domain outcome (`TacticKind.REFUSED`), recorded like a failed tactic. The deny list is `lean.deny`
(default `burnqed.config.DEFAULT_DENY`), the same list the soundness rules reject a proof path by. The patterns see
the tactic as Lean reads its identifiers (`«…»` escapes dropped), and any `set_option` inside a tactic is refused.
A sketch (`burnqed.text.sketch`) is checked whole: its holes are the only `sorry`s allowed, and its skeleton (the
sketch with each hole's `:= by sorry` dropped) must pass the same deny list as a tactic.
The guard is the first fence, not the only one: the compile's checks and the cluster's sandboxed Lean pods follow.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from burnqed.records import SketchResult, TacticKind, TacticResult
from burnqed.text.sketch import Sketch, read_sketch
from leankit.text import read_as_lean

if TYPE_CHECKING:
    from burnqed.config import LeanConfig

class TacticGuard:
    """Refuses tactics that match a deny pattern, are empty, too long or carry control characters."""

    def __init__(self, deny: Sequence[str], max_chars: int = 4000) -> None:
        self.patterns = tuple(re.compile(p, re.MULTILINE) for p in deny)
        self.max_chars = max_chars

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
        outside a hole among the reasons, whatever the deny list), or a skeleton the deny list refuses (an axiom,
        `native_decide`, a `set_option`, …), named."""
        sketch = read_sketch(text)
        if isinstance(sketch, str):
            return sketch
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
