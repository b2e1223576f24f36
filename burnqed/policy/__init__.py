"""The policy edge: what proposes tactics (docs/architecture.md, "Seams").

- `base`: the `Policy` and `Encoder` protocols and their records (`Sampling`, `Completion`).
- `candidates`: raw completions → deduplicated tactic candidates (pure; every backend's output goes through it).
- `sglang` (+ `sglang_replies`, `breaker`): the HTTP client for SGLang's native API (and `burnqed serve`).
- `batching`: many searches' asks coalesced into few requests.
- `localmodel`: the in-process backend (true log-probs, mean-pooled embeddings); `sampler`: SGLang's penalties and
  filters it samples with; `decoder`: its Llama forward pass in plain torch (`TorchLlama`, read without transformers
  on the CPU); `localpolicy`: the `Policy` and `Encoder` protocols on it (`LocalPolicy`, `LocalEncoder`).
- `modelfolder`: the model folder every transformers major reads alike (`load_tokenizer`, `TokenizersOnlyTokenizer`);
  `fingerprint`: its content digest.
- `server` (+ `wire`, `adapters`): `burnqed serve`, the SGLang-compatible HTTP server over the local backend.
- `tiny`: `burnqed model init-tiny`, the tiny embedded model; `modelpath`: the model folder to load (`ensure_model`:
  a path given, or the default tiny model built on first use); `oracle`: the corpus oracle of benchmarks and tests.
"""
