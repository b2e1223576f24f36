"""burnqed: Lean 4 theorem proving by expert iteration.

Nothing happens at import: no environment reads, no logging set-up, no heavy imports.
Run `burnqed --help` for the command line.
"""

__version__ = "0.1.0"
