"""Configuration: file < env < --set, JSON values, unknown keys and wrong types as one clear error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from burnqed.config import DEFAULT_DENY, load_config, parse_value
from burnqed.config.loader import JOINT_WITH_RL
from burnqed.errors import ConfigError
from tests.processes import cli


def test_embedded_defaults():
    cfg = load_config()
    assert cfg.lean.argv() == [sys.executable, "-m", "minilean", "--fallback-module", "minilean.replay"]
    assert cfg.lean.tactic_timeout_s == 25.0
    assert cfg.lean.tactic_timeout_s + cfg.lean.watchdog_grace_s == 30.0
    assert cfg.lean.recycle_requests == 1000
    assert cfg.lean.deny == list(DEFAULT_DENY)
    assert 1 <= cfg.lean.resolved_workers() <= 16


def test_precedence_file_env_set(tmp_path: Path):
    path = tmp_path / "burnqed.toml"
    path.write_text('[lean]\nworkers = 2\ntactic_timeout_s = 10\ncwd = "/lake"\n[lean.env]\nLEAN_PATH = "/a"\n')
    env = {"BURNQED_LEAN__WORKERS": "3", "BURNQED_LEAN__TACTIC_TIMEOUT_S": "12.5", "BURNQED_CONFIG": "ignored"}
    cfg = load_config(path, ["lean.workers=4", 'lean.command=["repl","Mathlib"]', "lean.env.LEAN_PATH=/b"], env)
    assert cfg.lean.workers == 4
    assert cfg.lean.tactic_timeout_s == 12.5
    assert cfg.lean.cwd == "/lake"
    assert cfg.lean.command == ["repl", "Mathlib"]
    assert cfg.lean.env == {"LEAN_PATH": "/b"}


@pytest.mark.parametrize(
    ("raw", "value"),
    [("4", 4), ("true", True), ('["a", 1]', ["a", 1]), ("repl", "repl"), ("1e3", 1000.0), ("", "")],
)
def test_values_parse_as_json_else_string(raw: str, value: object):
    assert parse_value(raw) == value


@pytest.mark.parametrize(
    ("sets", "env", "message"),
    [
        (["lean.wrkers=2"], {}, "unknown key lean.wrkers (from --set lean.wrkers)"),
        (["orbit.namespace=x"], {}, "unknown key orbit (from --set orbit.namespace)"),
        (["policy.backend=vllm"], {}, "policy.backend: Input should be 'local' or 'sglang'"),
        (["policy.prompt_format=chatml"], {}, "policy.prompt_format: Input should be"),
        (["search.max_nodes=0"], {}, "search.max_nodes: Input should be greater than or equal to 1"),
        (["lean.workers=many"], {}, "lean.workers: Input should be a valid integer"),
        (["lean.workers=0"], {}, "lean.workers: Input should be greater than or equal to 1"),
        # a list that is not JSON: kept as a string, so pydantic's "Input should be a valid list" named no cause
        (['lean.command=["repl",'], {}, "lean.command: '[\"repl\",' is not valid JSON (Expecting value at column 9) "
         "(from --set lean.command)"),
        # each hidden layer of the value model: [-3] crashed train-ebm after embedding, [0] trained an empty layer
        (["ebm.hidden_dims=[-3]"], {}, "ebm.hidden_dims.0: Input should be greater than or equal to 1; got -3"),
        (["ebm.hidden_dims=[64, 0]"], {}, "ebm.hidden_dims.1: Input should be greater than or equal to 1; got 0"),
        ([], {"BURNQED_LEAN__READY_TIMEOUT_S": "soon"}, "(from env BURNQED_LEAN__READY_TIMEOUT_S)"),
        (["lean.deny=[\"(\"]"], {}, "is not a valid regular expression"),
        (["lean.command=[]"], {}, "lean.command: List should have at least 1 item"),
        (["workers=2"], {}, "expected section.key"),
        (["lean.workers"], {}, "expected section.key=value"),
        (["search.mode=bfs"], {}, "search.mode: Input should be 'step', 'whole', 'hybrid' or 'sketch'"),
        (["search.mode=whole", "search.verify=false"], {}, "a whole proof is checked only by compiling it"),
        (["search.min_proofs=9"], {}, "min_proofs 9 must not exceed num_proofs 8"),
        (["policy.cot=true"], {}, "cot is an option of the deepseek prompt family"),
        (["policy.prompt_format=deepseek-whole"], {}, "whole-proof variant"),
        # a gate's threshold is a fraction that the report prints as points: 20 meant 20 points
        (["pipeline.gate_min_gain=20"], {}, "pipeline.gate_min_gain: Value error, is a gain in solve rate as a "
         "fraction of the theorems, -1 to 1 (0.05 is 5 points, which the report prints as 5.0%); 20 is out of range: "
         "for 20 points give 0.2; got 20 (from --set pipeline.gate_min_gain)"),
        (["pipeline.gate_min_rate=-0.5"], {}, "pipeline.gate_min_rate: Value error, is a solve rate as a fraction of "
         "the theorems, 0 to 1 (0.05 is 5 points, which the report prints as 5.0%); -0.5 is out of range; got -0.5"),
        ([], {"BURNQED_PIPELINE__GATE_MIN_RATE": "5"}, "5 is out of range: for 5 points give 0.05; got 5 (from env "
         "BURNQED_PIPELINE__GATE_MIN_RATE)"),
    ],
)
def test_bad_configuration_is_one_clear_error(sets: list[str], env: dict[str, str], message: str):
    with pytest.raises(ConfigError) as info:
        load_config(None, sets, env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_files(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[lean\nworkers = 2")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(broken)
    typo = tmp_path / "typo.toml"
    typo.write_text("[lean]\nworker = 2\n")
    with pytest.raises(ConfigError, match=r"unknown key lean.worker \(from file .*typo.toml\)"):
        load_config(typo)


@pytest.mark.parametrize(("sets", "env", "message"), [
    (["lean.wrkers=2"], {}, "invalid configuration: unknown key lean.wrkers (from --set lean.wrkers), did you mean "
                            "lean.workers?"),
    (["polcy.model=x"], {}, "invalid configuration: unknown key polcy (from --set polcy.model), did you mean policy?"),
    (["search.max_node=3"], {}, "invalid configuration: unknown key search.max_node (from --set search.max_node), did "
                                "you mean search.max_nodes?"),
    ([], {"BURNQED_POLICY__MODL": "x"}, "invalid configuration: unknown key policy.modl (from env "
                                        "BURNQED_POLICY__MODL), did you mean policy.model?"),
    (["orbit.namespace=x"], {}, "invalid configuration: unknown key orbit (from --set orbit.namespace)"),
    (["lean.zzz=1", "policy.modl=x"], {}, "invalid configuration: unknown key lean.zzz (from --set lean.zzz); unknown "
                                          "key policy.modl (from --set policy.modl), did you mean policy.model?"),
])
def test_an_unknown_key_names_the_key_it_likely_meant(sets: list[str], env: dict[str, str], message: str):
    with pytest.raises(ConfigError) as info:
        load_config(None, sets, env)
    assert str(info.value) == message


def test_the_loaded_configuration_is_frozen():
    from pydantic import ValidationError

    cfg = load_config(sets=["lean.workers=2"], environ={})
    with pytest.raises(ValidationError, match="frozen"):
        cfg.lean.workers = 3  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        cfg.lean = cfg.lean  # type: ignore[misc]
    changed = cfg.model_copy(update={"lean": cfg.lean.model_copy(update={"workers": 3})})
    assert (changed.lean.workers, cfg.lean.workers) == (3, 2)


def test_joint_training_with_the_rl_stage_is_refused_in_one_line(tmp_path: Path) -> None:
    """`sft.joint` trains the value model's head on the SFT policy's hidden states; with `rl.enabled` export reads
    RL's output, another policy. Either alone loads; both are refused, by `iterate` before it writes anything."""
    assert load_config(None, ["sft.joint=true"], {}).sft.joint
    assert load_config(None, ["rl.enabled=true"], {}).rl.enabled
    with pytest.raises(ConfigError) as info:
        load_config(None, ["sft.joint=true", "rl.enabled=true"], {})
    assert str(info.value) == f"invalid configuration: {JOINT_WITH_RL}"
    assert "\n" not in JOINT_WITH_RL
    root = tmp_path / "runs"
    result = cli("iterate", "--iter", "0", "--root", str(root), "--set", "sft.joint=true", "--set", "rl.enabled=true")
    assert (result.returncode, result.stderr) == (2, f"error: invalid configuration: {JOINT_WITH_RL}\n")
    assert not root.exists()
