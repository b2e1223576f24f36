"""The text the policy reads and writes: `prompt` (every prompt format, docs/search.md), `feedback` (Lean's messages on
a failed proof as a repair prompt shows them) and `completion` (tactics and proofs read back out of a completion)."""
