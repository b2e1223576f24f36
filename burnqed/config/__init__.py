"""Typed configuration, one module per section; `burnqed.config.loader` builds it from file < env < `--set`.

    cfg = load_config(Path("burnqed.toml"), sets=["lean.workers=4"], environ=os.environ)

Every name callers use is exported here (`from burnqed.config import LeanConfig`); every key: docs/config.md.
"""

from __future__ import annotations

from burnqed.config.cluster import ClusterConfig
from burnqed.config.data import DataConfig, SourceSpec
from burnqed.config.ebm import EbmConfig
from burnqed.config.lean import DEFAULT_DENY, LeanConfig
from burnqed.config.loader import ENV_PREFIX, Config, load_config, parse_value
from burnqed.config.pipeline import PipelineConfig
from burnqed.config.planner import PlannerConfig
from burnqed.config.policy import PolicyConfig
from burnqed.config.rl import RlConfig
from burnqed.config.search import SearchConfig
from burnqed.config.section import PYTHON_PLACEHOLDER, Section
from burnqed.config.serving import ServingConfig
from burnqed.config.sft import SftConfig
from burnqed.config.storage import StorageConfig

__all__ = [
    "DEFAULT_DENY",
    "ENV_PREFIX",
    "PYTHON_PLACEHOLDER",
    "ClusterConfig",
    "Config",
    "DataConfig",
    "EbmConfig",
    "LeanConfig",
    "PipelineConfig",
    "PlannerConfig",
    "PolicyConfig",
    "RlConfig",
    "SearchConfig",
    "Section",
    "ServingConfig",
    "SftConfig",
    "SourceSpec",
    "StorageConfig",
    "load_config",
    "parse_value",
]
