"""Counts the processes a test's children start, when the suite runs with BURNQED_COUNT_PROCESSES (tests/counting/
__init__.py puts this folder first on the children's PYTHONPATH). Then runs the interpreter's own sitecustomize."""

from __future__ import annotations

import importlib.util
import os
import sys

if os.environ.get("BURNQED_COUNT_PROCESSES"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests.counting import install

    install(lambda: os.environ.get("BURNQED_COUNT_TEST", "?"))
    del sys.path[0]

# The interpreter's own sitecustomize, which this module hides by coming first on sys.path.
_here = os.path.dirname(os.path.abspath(__file__))
for _folder in sys.path:
    try:
        _other = bool(_folder) and os.path.abspath(_folder) != _here
    except OSError:  # a relative entry in a working folder that is gone (tests/commands/test_odd_environment.py)
        continue
    if _other:
        _path = os.path.join(_folder, "sitecustomize.py")
        if os.path.isfile(_path):
            _spec = importlib.util.spec_from_file_location("_site_sitecustomize", _path)
            if _spec is not None and _spec.loader is not None:
                _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
            break
