"""The replay Lean server: the Pantograph REPL protocol answered from a recorded corpus, so the whole
system runs without a Lean install. Part of the embedded Lean (`minilean`), whose fallback it is for the bundled
theorems outside minilean's fragment (`python -m minilean --fallback-module minilean.replay`).

    python -m minilean.replay [--corpus PATH] [--latency-ms F] [--pantograph-version V]

`server` holds the state machine and the process loop, `tactics` the tactic text rules and Lean-style
error messages, `leanfile` the parsing of files for `frontend.process`, `wire` the reply shapes.
The corpus format is `burnqed.lean.corpus` (documented in docs/replay-corpus.md).
"""

from minilean.replay.server import ReplayServer, main, serve

__all__ = ["ReplayServer", "main", "serve"]
