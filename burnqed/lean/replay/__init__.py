"""The replay Lean server: the Pantograph REPL protocol answered from a recorded corpus, so the whole
system runs without a Lean install.

    python -m burnqed.lean.replay [--corpus PATH] [--latency-ms F]

`server` holds the state machine and the process loop, `tactics` the tactic text rules and Lean-style
error messages, `leanfile` the parsing of files for `frontend.process`, `wire` the reply shapes.
The corpus format is `burnqed.lean.corpus` (documented in docs/replay-corpus.md).
"""

from burnqed.lean.replay.server import ReplayServer, main, serve

__all__ = ["ReplayServer", "main", "serve"]
