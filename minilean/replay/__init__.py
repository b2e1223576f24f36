"""The replay Lean server: the Pantograph REPL protocol answered from a recorded corpus, so the whole
system runs without a Lean install. Part of the embedded Lean (`minilean`), whose fallback it is for the bundled
theorems outside minilean's fragment (`python -m minilean --fallback-module minilean.replay`).

    python -m minilean.replay [--corpus PATH] [--latency-ms F] [--pantograph-version V]

`replay_server` holds the state machine and the process entry point, `tactic_reader` the tactic text rules,
`leanfile` the parsing of files for `frontend.process`, `replay_frontend` that command and `frontend.distil`,
`corpus_cache` the built corpus kept between starts (`minilean.cache`); the requests are parsed and the replies
shaped by the embedded Lean's one wire layer (`minilean.schema`, `minilean.wire`), minilean's too.
The corpus format is `leankit.corpus` (documented in docs/replay-corpus.md).
"""
