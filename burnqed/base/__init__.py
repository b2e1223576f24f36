"""The bottom of burnqed: what every layer may use and what imports nothing of burnqed but `errors`.

`signals` (SIGTERM/SIGINT as exit 128 + N), `resources` (the machine's worker count), `cpu_kernels` (the pinned CPU
kernels and training threads), `uris` (URI syntax), `progress` (rich bars or log lines on stderr), `sandbox` (the
sealed environment a Lean process runs in).
"""
