"""Data: theorem indexes, sources and tactic pairs; `bundled/` holds the indexes of the bundled corpus."""
