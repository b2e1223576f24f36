"""Every double in tests/doubles/ is listed in that package's docstring and says where it is more lenient than the
peer it stands in for."""

from __future__ import annotations

import ast
from pathlib import Path

import tests.doubles

DOUBLES = Path(tests.doubles.__file__).parent
NOT_A_DOUBLE = {"json_http.py"}  # the transport the HTTP doubles are served with


def test_every_double_is_listed_and_states_its_leniency() -> None:
    listing = tests.doubles.__doc__ or ""
    modules = sorted(p for p in DOUBLES.glob("*.py") if p.name != "__init__.py")
    assert len(modules) >= 10
    for path in modules:
        assert f"`{path.name}`" in listing, f"{path.name} is missing from tests/doubles/__init__.py"
        if path.name in NOT_A_DOUBLE:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert "lenient" in doc.lower(), f"{path.name}'s docstring does not say where it is more lenient"
    listed = {line.split("`")[1] for line in listing.splitlines() if line.startswith("- `")}
    assert listed == {p.name for p in modules}, listed ^ {p.name for p in modules}
