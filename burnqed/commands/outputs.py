"""What an existing output may hold before a command writes to it (docs/errors.md, "Never over somebody's files"):
the rules of the outputs written into over time rather than replaced, checked before any work. (Outputs published
whole are checked by `Store.check_replaceable`.)

    check_trajectory_prefix(store, "runs/iter_0/search/shard-0", stage="search")    # search, merge, eval
    restart_trajectory_prefix(store, "results/r.trajectories", stage="eval")        # eval, search, merge --force
    check_checkpoint_folder(store, "runs/iter_0/sft")                                # sft's {output}-checkpoints
    check_not_an_input("runs/t", ["runs/iter_0/search/shard-0"])                     # merge, compare

A trajectory prefix may hold only what the trajectory writers, the eval and the lease put there, and is written
into or started over only by the command that wrote it (a search's output is never an eval's or a merge's); a
checkpoint folder (SFT's and RL's) only what the trainer, `sft.checkpoints` and a joint run put there: TRL's
trainers write their model card (`README.md`) beside the checkpoints, and it is accepted when it is one. Anything
else is the user's, and the command refuses (`InputError`, exit 2) instead of mixing its files in or deleting them.
An output is never one of the command's own inputs, nor inside one or holding one (`check_not_an_input`).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence

from burnqed.errors import InputError
from burnqed.provenance import IDENTITY_NAME, INPUTS_NAME
from burnqed.storage import Store, join, normalize
from burnqed.storage.markers import other_stage
from burnqed.storage.place_lease import LEASE_NAME
from burnqed.storage.store import not_replaceable

_PASS = re.compile(r"^pass-\d+$")  # eval --pass-n N > 1: one prefix per pass under --trajectories-out
_CHECKPOINT = re.compile(r"^checkpoint-\d+$")
_PARTIAL = re.compile(r"^\.checkpoint-\d+\.partial$")
# TRL's trainers (SFTTrainer, GRPOTrainer: `_save_checkpoint` calls `create_model_card`) write their model card into
# the output folder they checkpoint into, beside the checkpoints, at every save (trl 1.16, `BaseTrainer`).
MODEL_CARD = "README.md"
# What every card TRL renders holds (trl/trainer/utils.py `generate_model_card`: the tag it always adds; its
# lm_model_card.md template's line), and the most a card of a few tags and URLs takes.
_CARD_MARKS = (b"- generated_from_trainer\n", b"It has been trained using [TRL](https://github.com/huggingface/trl).")
_CARD_MAX_BYTES = 64 * 1024


def _temp_file(name: str) -> bool:
    """A writer's temporary file (`.NAME.XXXX.tmp`): published by rename, left behind only by a crash."""
    base = posixpath.basename(name)
    return base.startswith(".") and base.endswith(".tmp")


def trajectory_file(name: str, *, passes: bool = False) -> bool:
    """True for a path (relative to a trajectory prefix) that burnqed writes there: parts and their manifests, the
    completion marker, the lease, the eval's identity, the record of what it is made from, the hybrid search's
    journal of half-searched theorems and temporary files; with `passes` also the same under `pass-K/` (an eval's
    pass prefixes)."""
    from burnqed.layout import INFLIGHT
    from burnqed.trajectory.schema import PART_RE, SUCCESS_NAME

    first, _, rest = name.partition("/")
    if passes and rest and _PASS.match(first):
        return trajectory_file(rest)
    if first == INFLIGHT and rest:
        return True
    if rest:
        return False
    return bool(PART_RE.match(name)) or name in (SUCCESS_NAME, LEASE_NAME, IDENTITY_NAME, INPUTS_NAME) or \
        _temp_file(name)


def check_not_an_input(output: str, inputs: Sequence[str], *, what: str = "--output") -> None:
    """`InputError` when `output` is one of `inputs`, or one of them is inside the other (compared as normalized
    URIs: `./a` and `a`, a link and its target are one path): writing it would change or delete what the command
    reads, so it is refused before any work, --force or not."""
    out = normalize(output)
    for given in inputs:
        source = normalize(given)
        if out == source:
            raise InputError(f"{what} {output} is also an input ({given}): the command would write over what it "
                             f"reads; choose another {what}")
        if out.startswith(source.rstrip("/") + "/") or source.startswith(out.rstrip("/") + "/"):
            raise InputError(f"{what} {output} and the input {given} are one inside the other: the command would "
                             f"write into what it reads; choose another {what}")


def _json_object(store: Store, uri: str) -> dict[str, object] | None:
    """The JSON object in the file `uri`, or None when it is not one (a damaged record decides nothing)."""
    try:
        raw = json.loads(store.read_bytes(uri))
    except ValueError:
        return None
    return raw if isinstance(raw, dict) else None


def trajectory_stage(store: Store, uri: str) -> str | None:
    """Which command wrote the trajectory prefix `uri`, from what it records: "eval" when an eval's identity
    (`_EVAL.json`, in it or in a pass prefix) is there or its marker records an eval's pass; "merge-trajectories"
    when its record of inputs (`_INPUTS.json`) names merge's inputs, its marker lists the prefixes it merged or its
    first part was copied from another prefix; "search" for any other record, marker or part; the stage a
    `StageMarker` names (a folder output, not a prefix). None when it holds none of these (nothing, a lease,
    temporary files): nobody's yet. A search's output is thus never taken for an eval's or a merge's, which
    `check_trajectory_prefix` refuses to write into or start over, --force or not."""
    from burnqed.runner.reuse import MERGE_INPUT
    from burnqed.trajectory.schema import PART_RE, SUCCESS_NAME

    names = store.output_files(uri)
    if any(posixpath.basename(name) == IDENTITY_NAME for name in names):
        return "eval"
    if INPUTS_NAME in names and (inputs := _json_object(store, join(uri, INPUTS_NAME))) is not None:
        roles = inputs.get("inputs")
        merged = isinstance(roles, dict) and any(role.startswith(f"{MERGE_INPUT}[") for role in roles)
        return "merge-trajectories" if merged else "search"
    if SUCCESS_NAME in names and (marker := _json_object(store, join(uri, SUCCESS_NAME))) is not None:
        extra = marker.get("extra")
        if isinstance(marker.get("stage"), str):
            return str(marker["stage"])
        return "merge-trajectories" if marker.get("sources") else \
            "eval" if isinstance(extra, dict) and "eval" in extra else "search"
    manifests = sorted(name for name in names if PART_RE.match(name) and name.endswith(".json"))
    if not manifests:
        return None
    first = _json_object(store, join(uri, manifests[0])) or {}
    return "merge-trajectories" if first.get("source") else "search"


def check_trajectory_prefix(store: Store, uri: str, *, stage: str, what: str = "--output",
                            passes: bool = False) -> None:
    """`InputError` when the folder `uri` holds a file a trajectory prefix does not (`trajectory_file`), or is the
    trajectory prefix of another command than `stage` (`trajectory_stage`: a search's output is not an eval's or
    a merge's to write into or start over)."""
    store.check_holds_only(uri, lambda name: trajectory_file(name, passes=passes), "a trajectory prefix", what=what)
    found = trajectory_stage(store, uri)
    if found is not None and found != stage:
        raise not_replaceable(uri, other_stage(found, stage), stage, what=what)


def restart_trajectory_prefix(store: Store, uri: str, *, stage: str, what: str = "--output",
                              passes: bool = False) -> int:
    """Delete what an earlier run of `stage` wrote under the trajectory prefix `uri` (`eval --force` starts its
    trajectories over, `search --force` and `merge-trajectories --force` their output), keeping only the lease the
    caller holds there; returns how many files went. Refuses (`InputError`) when anything there is not a trajectory
    file or the prefix is another command's (`check_trajectory_prefix`), and deletes nothing then. The completion
    marker goes first and each part's manifest before its data, so an interruption leaves a prefix that is not
    complete and whose remaining parts are whole (a data file without its manifest is ignored by every reader)."""
    from burnqed.trajectory.schema import SUCCESS_NAME

    check_trajectory_prefix(store, uri, stage=stage, what=what, passes=passes)
    names = [name for name in store.output_files(uri) if name != LEASE_NAME]

    def order(name: str) -> tuple[int, str]:
        base = posixpath.basename(name)
        return (0 if base == SUCCESS_NAME else 1 if base.endswith(".json") else 2), name

    fs, root = store.resolve(uri)
    for name in sorted(names, key=order):
        fs.rm_file(posixpath.join(root, name))
    return len(names)


def checkpoint_file(name: str) -> bool:
    """True for a path (relative to `{output}-checkpoints`) the SFT or RL stage writes there: its run fingerprint, a
    joint run's abort record, the trainer's `checkpoint-N/` folders (and a download's `.checkpoint-N.partial/`) and
    its model card (`MODEL_CARD`, whose content `check_checkpoint_folder` checks)."""
    from burnqed.sft.checkpoints import RUN_FILE
    from burnqed.sft.joint_records import ABORT_FILE

    first, _, rest = name.partition("/")
    if rest:
        return bool(_CHECKPOINT.match(first) or _PARTIAL.match(first))
    return name in (RUN_FILE, ABORT_FILE, MODEL_CARD) or _temp_file(name)


def trainer_model_card(data: bytes) -> bool:
    """True when `data` is a model card as TRL's trainers write it (`MODEL_CARD`), not a file of the user's."""
    return len(data) <= _CARD_MAX_BYTES and data.startswith(b"---\n") and all(mark in data for mark in _CARD_MARKS)


def check_checkpoint_folder(store: Store, output: str, *, what: str = "--output") -> None:
    """`InputError` when the checkpoint folder next to `output` (`{output}-checkpoints`, which sft and rl delete when
    they finish, or with --force when they start) holds anything the stage and its trainer do not write there: a
    file `checkpoint_file` does not name, or a `README.md` that is neither TRL's model card nor empty."""
    from burnqed.sft.checkpoints import checkpoints_uri

    uri = checkpoints_uri(output)
    where = f"{what} {output}: its checkpoint folder"
    store.check_holds_only(uri, checkpoint_file, "a checkpoint folder", what=where)
    card = join(uri, MODEL_CARD)
    # An empty card is the trainer's, cut at its write: huggingface_hub's `RepoCard.save` opens the file for writing
    # (emptying it) and then writes the card, so a stop between the two leaves it empty; it holds nothing to lose.
    if store.exists(card) and (data := store.read_bytes(card)) and not trainer_model_card(data):
        raise InputError(f"{where} {uri} holds a {MODEL_CARD} that is not the model card TRL's trainer writes "
                         "there: choose a new or empty folder, or move it away")
