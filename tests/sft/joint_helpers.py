"""Builders for the joint-training tests: a prepared-data folder and trajectories of proved and unproved trees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from burnqed.config import EbmConfig, SftConfig
from burnqed.sft.train import SftOutcome, SftRequest, run_sft
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat
from tests.doubles.ebm_doubles import proved_tree, unproved_tree
from tests.sft.helpers import write_data_folder
from tests.trajectory.factories import result, write_trajectory

FMT = PromptFormat.PLAIN_TACTIC


def write_trees(uri: str, theorems: int, store: Store) -> None:
    """`theorems` proved trees (states `t{k}/state n`, goals as Lean-like text) and a few unproved ones."""
    items = []
    for k in range(theorems):
        edges = proved_tree(f"x{k} : ℕ\n⊢ x{k} + {k} = {k} + x{k} ")
        items.append((result(f"t{k}", True, edges=len(edges), depth=3), edges))
    for k in range(max(1, theorems // 4)):
        edges = unproved_tree(f"y{k} : ℕ\n⊢ y{k} * {k} = 0 ")
        items.append((result(f"u{k}", False, edges=len(edges)), edges))
    write_trajectory(uri, items, store=store)


def joint_config(tiny: Path, **overrides: Any) -> SftConfig:
    settings: dict[str, Any] = {
        "base_model": str(tiny), "device": "cpu", "method": "lora", "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0,
        "batch_size": 2, "warm_steps": 6, "max_steps": 6, "later_epochs": 0, "warmup_steps": 0, "logging_steps": 1,
        "eval_steps": 100, "save_steps": 2, "base_subsample": 40, "joint": True, "joint_groups": 4,
        "joint_log_every": 2, "joint_probe_every": 3, "learning_rate": 1e-3, "joint_head_learning_rate": 1e-3,
    }
    return SftConfig(**{**settings, **overrides})


def ebm_config(**overrides: Any) -> EbmConfig:
    settings: dict[str, Any] = {"hidden_dims": [32], "negatives": 3, "valid_fraction": 0.3, "dropout": 0.0}
    return EbmConfig(**{**settings, **overrides})


def joint_run(tmp_path: Path, cfg: SftConfig, ebm: EbmConfig, *, name: str = "joint", theorems: int = 12,
              lines: list[str] | None = None, force: bool = False) -> SftOutcome:
    store = Store(cache_dir=tmp_path / "cache")
    data = tmp_path / "data"
    if not data.exists():
        write_data_folder(data)
    trajectories = f"file://{tmp_path}/traj0"
    if not (tmp_path / "traj0").exists():
        write_trees(trajectories, theorems, store)
    request = SftRequest(iteration=1, data=str(data), output=str(tmp_path / name), trajectories=(trajectories,),
                         force=force)
    sink = lines if lines is not None else []
    return run_sft(request, cfg, FMT, echo=sink.append, store=store, ebm=ebm)
