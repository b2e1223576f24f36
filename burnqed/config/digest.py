"""Digests of a configuration, and the pods' check that they run the configuration their workflow was rendered
from (docs/cluster.md, "One configuration").

    config_digest(cfg)                 # sha256 of the canonical JSON, 16 hex characters (eval results record it)
    pod_config_digest(cfg)             # of the keys it sets (defaults and cluster.namespace left out): what a
                                       # workflow carries
    verify_mounted_config(os.environ)  # in a pod: BURNQED_CONFIG's file must have BURNQED_CONFIG_DIGEST

`burnqed render` puts `pod_config_digest` of the configuration it renders from into every container that mounts
the config ConfigMap (`BURNQED_CONFIG_DIGEST`) and into the workflow's annotation `burnqed.io/config-digest`;
`burnqed submit` renders from the namespace's ConfigMap (or refuses when the local configuration differs). Each
command a pod runs loads the mounted file alone (no `BURNQED_*` variables, no `--set`: those are the workflow's
own per-stage settings) and refuses to start when its digest differs: the ConfigMap was changed after the
templates were rendered, or the chart was installed with another file than the one rendered from.
The namespace and the Argo Server's address are left out (`CLIENT_ONLY`): `submit --namespace` renders for the
namespace it submits to, and nothing a pod runs reads them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from burnqed.errors import ConfigError

DIGEST_ENV = "BURNQED_CONFIG_DIGEST"
DIGEST_ANNOTATION = "burnqed.io/config-digest"
CONFIG_ENV = "BURNQED_CONFIG"


def config_digest(config: BaseModel) -> str:
    """First 16 hex characters of the sha256 of the config's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


# where `submit` and `cluster check` reach the cluster from: nothing a pod runs reads these
CLIENT_ONLY = ("namespace", "argo_server", "argo_service", "argo_token_env", "insecure_skip_verify")


def pod_config_digest(config: BaseModel) -> str:
    """The digest of what the configuration sets: the canonical JSON of every key whose value is not its default
    (a key set to its default counts as unset), without the `cluster` keys only the submitting side reads
    (`CLIENT_ONLY`: the namespace submitted to, where the Argo Server is).

    Defaults are left out so that a key added to burnqed, or a default left as it was, moves no workflow: the
    rendered templates (and the golden files, `manifests/rendered/`, the chart's copy) change only when a value the
    configuration sets changes. What the pods' check guards is unchanged: the ConfigMap a pod mounts sets the same
    values as the configuration its workflow was rendered from, under the burnqed of the images (one version: the
    images install the release that rendered them)."""
    data = config.model_dump(mode="json", exclude_defaults=True)
    if isinstance(data.get("cluster"), dict):
        for key in CLIENT_ONLY:
            data["cluster"].pop(key, None)
        if not data["cluster"]:
            del data["cluster"]
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def verify_mounted_config(environ: Mapping[str, str]) -> None:
    """When `BURNQED_CONFIG_DIGEST` is set (a workflow pod), the file `BURNQED_CONFIG` names must load, by itself,
    to a configuration with that digest; `ConfigError` (exit 2, not retried) otherwise."""
    expected = environ.get(DIGEST_ENV)
    if not expected:
        return
    from burnqed.config.loader import load_config

    path = environ.get(CONFIG_ENV)
    if not path:
        raise ConfigError(f"{DIGEST_ENV} is set but {CONFIG_ENV} is not: this pod cannot check the configuration it "
                          "was rendered for")
    found = pod_config_digest(load_config(Path(path), (), {}))
    if found != expected:
        raise ConfigError(
            f"the configuration mounted at {path} (digest {found}) is not the one this workflow was rendered from "
            f"(digest {expected}): the config ConfigMap changed after the templates were rendered, or they were "
            "rendered from another file. Render and install from the same file (burnqed render --helm --config "
            "FILE --output build/burnqed/files/workflowtemplates into a copy of the chart, cp -r helm/burnqed build/; "
            "helm upgrade burnqed build/burnqed … --set-file config.toml=FILE), or submit again with `burnqed "
            "submit`, which renders from the ConfigMap"
        )


# ------------------------------------------------------------------------ the keys that shape each stage's output

# What a stage output depends on besides its inputs, by configuration key: a finished output made with other values
# of these is refused (`burnqed.reuse`), and no other key matters to it. Explicit lists, not the whole
# configuration: a new configuration field does not make every finished output differ. A key shapes the output when
# changing it changes what the stage writes (weights, rows, numbers); cadences, devices, thread and worker counts,
# timeouts of the machinery and where things are stored do not.

# Everything of the `sft` section that changes the trained weights (the export_* keys are export's; logging, eval and
# save cadences, checkpoint keeping, threads and the device do not change them). The SFT stage's list, meant to be
# the one SFT's checkpoint resume decides from too (issue 46).
SFT_TRAINING_KEYS = tuple(f"sft.{key}" for key in (
    "method", "base_model", "lora_r", "lora_alpha", "lora_dropout", "target_modules",  # what is trained
    "learning_rate", "lr_decay_per_iter", "scheduler", "warmup_steps", "max_steps", "warm_steps",  # the schedule
    "batch_size", "grad_accum", "processes",  # the batches (a process count changes how a batch is summed)
    "max_length", "packing", "attn_implementation", "bf16",  # the rows and the numerics
    "weight_decay", "max_grad_norm", "seed",  # the optimizer and the data order
    "eval_fraction", "base_subsample", "positive_upsample", "proof_examples",  # which examples train
    "joint", "joint_weight", "joint_head_learning_rate", "joint_groups",  # joint training's objective
))
# The value model's head and its training (train-ebm, and sft.joint's head): architecture, negatives, objective,
# schedule, the train/valid split and the embeddings it reads (pooling, normalisation, the encoder and its length).
EBM_TRAINING_KEYS = tuple(f"ebm.{key}" for key in (
    "hidden_dims", "dropout", "spectral_norm", "first_layer_scale", "init_temperature", "temperature_min",
    "temperature_max", "negatives", "sibling_ratio", "same_theorem_ratio", "other_theorem_ratio", "farther_negatives",
    "depth_loss_weight", "learning_rate", "weight_decay", "grad_clip", "steps", "batch_size", "valid_fraction",
    "encoder_backend", "pooling", "normalize", "encoder_max_tokens", "seed",
))
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    # the sources, the split and the tactic guard that filters the pairs; lean.command replays the proofs
    "prepare-data": ("data.sources", "data.world_seed", "data.valid_fraction", "data.split_salt",
                     "data.contrastive_min_depth", "data.replay", "lean.command", "lean.deny", "lean.max_tactic_chars"),
    "trace-data": ("data.valid_fraction", "data.split_salt", "data.contrastive_min_depth", "lean.deny",
                   "lean.max_tactic_chars"),
    # the prompts the examples are written in, which theorems are held out, and (joint) the value model's head
    "sft": (*SFT_TRAINING_KEYS, "policy.prompt_format", "policy.declaration_form", "policy.cot", "search.mode",
            "data.split_salt"),
    "sft-joint": EBM_TRAINING_KEYS,  # added to "sft" when sft.joint trains the head too
    "export": ("sft.export_dtype", "sft.export_max_shard_size"),
    "train-ebm": (*EBM_TRAINING_KEYS, "policy.prompt_format", "data.split_salt"),
    # search and eval record the effective search settings instead (eval.run.EvalIdentity: only the mode's own)
    "report": ("pipeline.gate_min_rate", "pipeline.gate_min_gain", "pipeline.gate_max_lost",
               "pipeline.gate_gain_interval", "pipeline.eval_modes", "pipeline.eval_base"),
    "joint-study": (*EBM_TRAINING_KEYS, "policy.prompt_format", "data.split_salt"),
}


def shaping_values(config: BaseModel, keys: tuple[str, ...]) -> dict[str, object]:
    """`section.key` → its value (JSON) in `config`, for each of `keys`."""
    data = config.model_dump(mode="json")
    values: dict[str, object] = {}
    for key in keys:
        section, _, name = key.partition(".")
        values[key] = data[section][name]
    return values
