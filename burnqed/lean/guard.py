"""The tactic guard: generated tactics are untrusted code, refused before they reach Lean.

    guard = TacticGuard.from_config(cfg.lean)
    reason = guard.check("run_tac do IO.println 1")   # -> "refused: matches deny pattern ..."

A refusal is a domain outcome (`TacticKind.REFUSED`), recorded like a failed tactic. The deny list is
`lean.deny` (regular expressions; the default is `DEFAULT_DENY` below); the same list is what the
soundness rules use to reject a proof path, so sorry/admit/cheat/native_decide never count.

The patterns see the tactic as Lean reads its identifiers (`read_as_lean`): Lean's `«…»` escapes are
dropped, so `set_option «debug».skipKernelTC true` is matched as `debug.skipKernelTC`, the option Lean sets.
Any `set_option` inside a tactic is refused: the options a theorem runs under are its header's, and an option
set mid-proof can switch the kernel off (`debug.skipKernelTC`) or lift a resource bound a worker shares
(`maxRecDepth`). Every rule has a case that only it refuses (`tests/lean/test_guard_soundness.py`).
In the cluster the Lean pods are also sandboxed (no egress, no token, read-only root, memory limits):
the guard is the first fence, not the only one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from burnqed.records import TacticKind, TacticResult

if TYPE_CHECKING:
    from burnqed.config import LeanConfig

DEFAULT_DENY: tuple[str, ...] = (
    # Proof-faking tactics: never a proof, refused outright.
    r"\bsorry\b",
    r"\badmit\b",
    r"\bcheat\b",
    # Trusting the compiler instead of the kernel (the Lean.ofReduceBool / ofReduceNat axioms).
    r"\bnative_decide\b",
    r"\+native\b",  # decide +native
    r"\bnative\s*:=",  # decide (config := { native := true })
    r"\bofReduce(Bool|Nat)\b",
    r"\btrustCompiler\b",
    r"\bbv_decide\b",
    # Running arbitrary code inside Lean.
    r"\brun_tac\b",
    r"\brun_cmd\b",
    r"\brun_elab\b",
    r"\brun_meta\b",
    r"#[A-Za-z]",  # #eval, #exit, #print, #guard_msgs, ... (an array literal `#[` stays allowed)
    r"\bIO\.",
    r"\bSystem\.",
    r"\bunsafe",  # unsafe, unsafeCast, unsafeIO, ...
    r"\bimplemented_by\b",
    r"\bextern\b",
    r"\bcsimp\b",
    r"@\[",
    # Metaprograms in terms: elaborate, or add declarations (an axiom) to the environment.
    r"\bby_elab\b",
    r"\b(Lean\.)?(Elab|Meta)\.",  # Lean.Elab.*, Lean.Meta.*, also after `open Lean`
    r"\bLean\.(Environment|Kernel|Compiler|Parser|Syntax|Macro|Declaration|IR|Core)\b",
    r"\b(addDecl|addAndCompile|axiomDecl|modifyEnv|setEnv)\b",
    # Commands that change how later code elaborates, smuggled in as or after a tactic.
    r"\b(macro_rules|elab_rules|declare_syntax_cat|macro|syntax|elab|notation)\b",
    r"\b(local|scoped)\s+(infix|infixl|infixr|prefix|postfix)\b",
    r"\battribute\s*\[",  # attribute [simp] foo in ..., attribute [local instance] ...
    r"(?<![\w.'])open\b[^\n]*\bin\b",  # open Foo in ... (anywhere on a line)
    r"^\s*(import|open|namespace|section|end|variable|universe|initialize|builtin_initialize)\b",
    r"^\s*(theorem|lemma|example|abbrev|structure|inductive|class|mutual)\b",
    r"\b(axiom|opaque|instance|def)\s",
    # Options: a theorem runs under its header's. Set inside a proof, one switches the kernel off
    # (`set_option «debug».skipKernelTC true in decide +kernel`) or lifts a limit a shared worker relies on.
    r"\bset_option\b",
    # The same options named outside `set_option` (a metaprogram's `withOptions`, `Options.setBool`).
    r"\bdebug\.",
    r"\ballowUnsafeReducibility\b",
)
# Lean's escaped identifier component: `«debug»` is the name `debug`.
_ESCAPED_NAME = re.compile(r"«([^»]*)»")


def read_as_lean(tactic: str) -> str:
    """The tactic with every `«…»`-escaped identifier component written plainly, as Lean reads the name
    (`«debug».skipKernelTC` is the option `debug.skipKernelTC`), so the deny list cannot be dodged by escaping."""
    return _ESCAPED_NAME.sub(lambda match: match.group(1), tactic)


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
