"""Data: public sources → theorem index + tactic pairs, run by `burnqed data prepare` (docs/data.md).

Modules, in pipeline order: `rows` (reading JSON/JSONL/Parquet/Lean files, folders, URIs, hub datasets),
`leanfile` (a `.lean` file's theorems as rows, with their headers), `sources` (one converter per dataset
schema), `collect` (grouping, sorry
filter, dedup, decontamination against benchmarks, splits), `decontaminate` (the one comparison of training
statements with benchmark statements, for every route a benchmark takes: a source, `pipeline.benchmark`, an eval's
model's training data), `replay` (whole proofs through the Lean
edge), `prepare` (the stage), `report` (the data report), `trace` (LeanDojo tracing, extra `trace`); `pairs`
(the prepared-data layout and tactic-pair schema) and `index` (theorem index files). `bundled/` holds the
bundled replay corpus and its theorem indexes. Pure text work the stage shares with others lives below it:
Lean declarations as text in `leankit.declaration`, statements up to renaming (for decontamination) in
`leankit.normal_form`.
"""
