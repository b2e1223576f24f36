"""The Lean edge, the client side only: Pantograph client, worker pool, tactic guard, soundness rules, the
in-process worker. The servers burnqed runs without a Lean install (minilean and its replay
server) are the embedded Lean, a peer package of their own (`minilean`), reached only through the protocol; what both
know of Lean is `leankit`."""
