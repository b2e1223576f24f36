"""Data: public sources → theorem index + tactic pairs, run by `burnqed data prepare` (docs/data.md).

Modules, in pipeline order: `rows` (JSON/JSONL/Parquet/Lean files, folders, URIs, hub datasets), `leanfile` (a
`.lean` file's theorems as rows), `sources` (one converter per dataset schema), `collect` (grouping, sorry filter,
dedup, splits), `decontaminate` (training statements against benchmark statements, every route), `replay` (whole
proofs through the Lean edge), `prepare` (the stage), `data_report` (the data report), `trace` (LeanDojo, extra
`trace`); `pairs` (the prepared-data layout), `index` (theorem index files) and `theorems` (what `--theorems`
reads). `bundled/` holds the bundled replay corpus' theorem indexes.
"""
