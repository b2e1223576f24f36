"""minilean: a small Lean 4 with real semantics behind the Pantograph REPL protocol, the embedded Lean of
burnqed's embedded defaults; its fallback, the replay server (`minilean.replay`), answers from a recorded corpus
what lies outside the fragment.

    python -m minilean [--pantograph-version 0.3.4] [--fallback-module minilean.replay]
    python -m minilean.replay [--corpus PATH]

A peer of burnqed: reached only through the protocol, it imports nothing of burnqed and shares `leankit` with it
(docs/architecture.md, "The embedded Lean"). `syntax` is the terms and their printing and `parser` reads them,
`elab` types and `elaborator` elaborates; `tactics`, `terms` (over `lemmas`), `simp`, `defeq`, `arith` and
`procedures` prove; `server` is the REPL (`python -m minilean` runs `minilean.server.main`), `frontend` its file
commands (over `source`, a file's text), `fallback` the hand-off to the replay server; `schema` and `wire` are both
servers' one wire layer, `cache` the entries on disk that spare a start what an earlier one built. The package
itself imports none of them: a process that needs only the wire layer (a test's Pantograph double) loads no parser.
docs/minilean.md describes the fragment and the tactics.
"""
