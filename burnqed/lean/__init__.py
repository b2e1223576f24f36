"""The Lean edge: Pantograph client, worker pool, tactic guard, and the replay server with its corpus."""
