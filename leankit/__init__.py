"""What burnqed and its embedded Lean (minilean) both know of Lean; it imports neither (docs/architecture.md).

`version` and `names` (Pantograph's versions, Lean `Name`s on each version's wire), `text` (Lean source: comments,
literals, brackets), `declaration` (declarations and their scope), `proof_text` (a proof's top-level tactics),
`normal_form` (statements up to renaming), `recheck` (the kernel recheck a compile ends with), `corpus` (the replay
corpus format, with the bundled corpus), `world` (the generated world) and `failures` (what leankit raises).
"""
