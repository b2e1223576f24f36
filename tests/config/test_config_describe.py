"""`burnqed config describe`: every configuration key with its type, default and description, from the models;
docs/config.md is its `--markdown` output and must not be stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.config import Config
from burnqed.config.describe import all_keys, describe, markdown
from burnqed.errors import ConfigError
from tests.processes import cli

DOC = Path(__file__).parents[2] / "docs" / "config.md"


def _leaf_paths(model: type, prefix: str = "") -> set[str]:
    from pydantic import BaseModel

    paths = set()
    for name, info in model.model_fields.items():  # type: ignore[attr-defined]
        annotation = info.annotation
        if prefix == "" and isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths |= _leaf_paths(annotation, f"{name}.")
        else:
            paths.add(f"{prefix}{name}")
    return paths


def test_docs_config_md_is_what_the_models_say_and_what_the_command_prints() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), (
        "docs/config.md is stale: regenerate it with `burnqed config describe --markdown > docs/config.md`")
    printed = cli("config", "describe", "--markdown")
    assert (printed.returncode, printed.stdout, printed.stderr) == (0, markdown(), "")


def test_every_key_of_every_section_is_described_with_a_type_and_a_default() -> None:
    keys = all_keys()
    settable = {k.path for k in keys if k.settable}
    assert settable == _leaf_paths(Config)
    assert all(k.description and k.type and k.default for k in keys), [k.path for k in keys if not k.description]
    assert {k.section for k in keys} == set(Config.model_fields)


def test_one_key_a_section_and_a_lists_entries() -> None:
    (workers,) = describe("lean.workers")
    assert (workers.type, workers.default, workers.env) == ("integer or null", "null", "BURNQED_LEAN__WORKERS")
    (mode,) = describe("search.mode")
    assert mode.type == "one of step, whole, hybrid, sketch" and mode.default == '"step"'
    assert {k.path for k in describe("search")} == {k.path for k in all_keys() if k.path.startswith("search.")}
    sources = [k.path for k in describe("data.sources")]
    assert sources[0] == "data.sources" and "data.sources[].kind" in sources
    (default_sources,) = [k for k in describe("data.sources") if k.path == "data.sources"]
    assert default_sources.default == '[{"kind": "bundled"}, {"kind": "world"}]'


@pytest.mark.parametrize(("key", "hint"), [("serch.max_nodes", "did you mean search.max_nodes?"),
                                           ("nothing.at_all", "`burnqed config describe` lists every key")])
def test_a_name_that_is_no_key_is_refused_naming_the_closest(key: str, hint: str) -> None:
    with pytest.raises(ConfigError) as refused:
        describe(key)
    assert str(refused.value) == f"no configuration key or section {key!r}; {hint}"


@pytest.mark.slow
def test_the_command_prints_a_key_and_refuses_a_typo_in_one_line() -> None:
    done = cli("config", "describe", "policy.top_k")
    assert done.returncode == 0, done.stderr
    first, description = done.stdout.splitlines()
    assert first == "policy.top_k  integer  default -1  (BURNQED_POLICY__TOP_K)" and description.startswith("    ")
    typo = cli("config", "describe", "polcy.top_k")
    assert typo.returncode == 2 and typo.stderr == ("error: no configuration key or section 'polcy.top_k'; did you "
                                                    "mean policy.top_k?\n")


def test_markdown_with_a_key_prints_only_its_rows_and_refuses_a_typo() -> None:
    done = cli("config", "describe", "--markdown", "lean.workers")
    header, _, row = done.stdout.splitlines()
    assert done.returncode == 0 and header.startswith("| key |")
    assert row.startswith("| `lean.workers` | integer or null")
    section = cli("config", "describe", "search", "--markdown").stdout.splitlines()[2:]
    assert [line.split(" | ")[0] for line in section] == [f"| `{k.path}`" for k in describe("search")]
    typo = cli("config", "describe", "--markdown", "polcy.top_k")
    assert typo.returncode == 2 and "did you mean policy.top_k?" in typo.stderr
