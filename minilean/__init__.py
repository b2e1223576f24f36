"""minilean: a small Lean 4 with real semantics, spoken to through the Pantograph REPL protocol; the embedded
Lean of burnqed's embedded defaults, with its fallback for what lies outside the fragment, the replay server
(`minilean.replay`, answering from a recorded corpus).

    python -m minilean [--pantograph-version 0.3.4] [--fallback-module minilean.replay]
    python -m minilean.replay [--corpus PATH]

A peer of burnqed, not part of it: burnqed reaches it only through the wire protocol, like real Pantograph, and
imports nothing of it. Both servers speak through one wire layer (`schema` parses requests per Pantograph version,
`wire` frames lines and shapes replies), on burnqed's one version table (`leankit.version`); of burnqed they
import only such leaves and Lean text, and the replay server the corpus format and the generated world it answers
from, never the Lean client (docs/architecture.md, "The embedded Lean").

The fragment: ℕ ℤ ℚ ℝ with `+ - * / % ^`, `∣`, `= ≠ < ≤`, the connectives and quantifiers, sets with
`∈ ∩ ∪ \\ ⊆` — parsed with a `lark` grammar (`syntax`), elaborated with
Lean's numeral typing (`elab`), proved by tactics with Lean's behaviour and messages (`tactics`, `terms`,
`simp`), the arithmetic decision tactics decided by z3 on exactly the facts each may use (`arith`).
`server` is the REPL, `frontend` compiles files, `fallback` hands the rest to the replay server.
docs/minilean.md describes the fragment, the tactics and what is approximated.
"""

from minilean.server import Server, main, serve

__all__ = ["Server", "main", "serve"]
