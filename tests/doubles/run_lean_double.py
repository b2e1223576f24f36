"""Starts the Pantograph double (tests/doubles/lean_double.py, whose docstring says what it emulates and how
strictly) with the same arguments: `python tests/doubles/run_lean_double.py [options]`. Python compiles a script
at every start (~15 ms for the double's 1,400 lines, started hundreds of times a test run), while a module it
imports is read from its cached bytecode; this file is the script, the double the module."""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, where `tests` is a package
    from tests.doubles.lean_double import main

    main()
