"""minilean: a small Lean 4 with real semantics, spoken to through the Pantograph REPL protocol; the embedded
Lean of burnqed's embedded defaults, with its fallback for what lies outside the fragment, the replay server
(`minilean.replay`, answering from a recorded corpus).

    python -m minilean [--pantograph-version 0.3.4] [--fallback-module minilean.replay]
    python -m minilean.replay [--corpus PATH]

A peer of burnqed, not part of it: burnqed reaches it only through the wire protocol, like real Pantograph, and
imports nothing of it. minilean itself imports nothing from burnqed; the replay server reads burnqed's corpus
format and generated world (docs/architecture.md, "The embedded Lean").

The fragment: ℕ ℤ ℚ ℝ with `+ - * / % ^`, `∣`, `= ≠ < ≤`, the connectives and quantifiers, sets with
`∈ ∩ ∪ \\ ⊆` — parsed with a `lark` grammar (`syntax`), elaborated with
Lean's numeral typing (`elab`), proved by tactics with Lean's behaviour and messages (`tactics`, `terms`,
`simp`), the arithmetic decision tactics decided by z3 on exactly the facts each may use (`arith`).
`server` is the REPL, `frontend` compiles files, `protocol` holds the version-specific wire rules.
docs/minilean.md describes the fragment, the tactics and what is approximated.
"""

from minilean.server import Server, main, serve

__all__ = ["Server", "main", "serve"]
