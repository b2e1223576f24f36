"""Whether a finished stage output may be reused: what the run a command would do is made from, what a finished
output records it was made from, and the verdict (docs/pipeline.md, "Reused or refused").

    now = sft_inputs(cfg, store, data=data, trajectories=trajectories, init=init, iteration=1)
    found = finished_output(store, output)          # None when nothing finished is there
    if found is not None:
        check_reusable(found, now, "sft output")    # InputError naming the first difference and --force
        print(reuse_line(found))                    # "reusing OUTPUT (finished 2026-11-27 10:02 UTC, same inputs); …"
    with store.staged_output(output, "sft", made_from=now) as folder: ...   # recorded in the completion marker

Each stage command builds its `StageInputs` with the builder named after it, from the request it builds of its options
(`runner.requests`); the local runner from the request the stage holds (`runner.request_inputs.made_from`), with the
same builders.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from burnqed.config import Config
from burnqed.config.identity import default_values, identity_keys, identity_values
from burnqed.config.sft import proof_examples_on, proofs_kept, sketch_examples_on
from burnqed.errors import InputError
from burnqed.provenance import INPUTS_NAME, MISSING, InputStamp, StageInputs, when
from burnqed.storage import MARKER_NAME, StageMarker, Store, is_remote, join, normalize

if TYPE_CHECKING:
    from burnqed.eval.identity import EvalIdentity
    from burnqed.eval.result import EvalResult
    from burnqed.records.theorem import TheoremIndex


# ------------------------------------------------------------------------------------------------ inputs


def _uri(uri: str, store: Store) -> str:
    """`uri` as recorded: an existing local path as its absolute file:// URI (so `runs/x` and `./runs/x` agree); a
    remote URI without its trailing slash; anything else (a served model's name) as given."""
    if is_remote(uri):
        return uri.rstrip("/")
    fs, path = store.resolve(uri, probe=False)
    return normalize(uri) if fs.exists(path) else uri


def _given(uri: str, recorded: str) -> str | None:
    """The path as the command named it, kept beside its recorded form when that is another (a relative path):
    a refusal shows both."""
    if recorded == uri or is_remote(uri) or Path(uri.removeprefix("file://")).expanduser().is_absolute():
        return None
    return uri


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _content_digest(fs: Any, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _modified(fs: Any, path: str) -> datetime | None:
    """When the file at `path` was last written, if its file system says."""
    try:
        moment = fs.modified(path)
    except (NotImplementedError, OSError, ValueError):
        return None
    return moment.replace(tzinfo=UTC) if isinstance(moment, datetime) and moment.tzinfo is None else moment


def _written_at(data: bytes) -> datetime | None:
    try:
        raw = json.loads(data)
        return datetime.fromisoformat(raw["written_at"]) if isinstance(raw, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


def stamp(uri: str | None, store: Store) -> InputStamp:
    """An input as a stage reads it now: a folder with a completion marker is stamped with the marker's digest
    (a re-published output has a new one), a local file with its bytes' (an S3 object with its ETag and size), a
    folder without a marker with its listing (names and sizes), and a path with nothing there is `MISSING`."""
    if uri is None:
        return InputStamp(uri=None)
    recorded = _uri(uri, store)
    where = {"uri": recorded, "given": _given(uri, recorded)}
    fs, path = store.resolve(uri)
    if fs.isfile(path):
        if is_remote(uri):  # its ETag and size, not a download of what may be gigabytes (a data source)
            info = fs.info(path)
            described = json.dumps([info.get("ETag"), info.get("size"), str(info.get("LastModified"))]).encode()
            return InputStamp(**where, stamp="object:" + _digest(described), finished=_modified(fs, path))
        return InputStamp(**where, stamp=_content_digest(fs, path), finished=_modified(fs, path))
    if not fs.isdir(path):
        return InputStamp(**where, stamp=MISSING)
    if store.exists(join(uri, MARKER_NAME)):
        marker = store.read_bytes(join(uri, MARKER_NAME))
        return InputStamp(**where, stamp=_digest(marker), finished=_written_at(marker))
    listing = json.dumps(sorted(store.output_files(uri).items())).encode()
    return InputStamp(**where, stamp="files:" + _digest(listing))


def _listed(option: str, uris: Sequence[str], store: Store) -> dict[str, InputStamp]:
    return {f"{option}[{k}]": stamp(uri, store) for k, uri in enumerate(uris)}


def _made(inputs: dict[str, InputStamp], settings: dict[str, object],
          before: dict[str, object] | None = None) -> StageInputs:
    # JSON values, as a record read back from a file holds them (tuples are lists); the keys' defaults beside them,
    # and `before`: what a setting that is no configuration key was in the runs that predate its record
    return StageInputs(inputs=inputs, settings=json.loads(json.dumps(settings, ensure_ascii=False)),
                       defaults={**default_values(Config), **(before or {})})


# ---------------------------------------------------------------------------------------- per stage


def prepare_inputs(cfg: Config, store: Store) -> StageInputs:
    """`data prepare`: the data sources' files, the benchmark its training data is decontaminated against
    (`pipeline.benchmark`, when set; unset, the embedded one follows `data.world_seed` and `data.world_sketches`)
    and the keys of its identity (`config.identity`)."""
    sources = {f"data.sources[{k}]": stamp(source.path, store) for k, source in enumerate(cfg.data.sources)
               if source.path is not None}
    if cfg.pipeline.benchmark is not None:
        sources["pipeline.benchmark"] = stamp(cfg.pipeline.benchmark, store)
    return _made(sources, identity_values(cfg, "prepare-data"))


def trace_inputs(cfg: Config, *, repo: str, commit: str, build_deps: bool) -> StageInputs:
    """`data trace`: the repository at its commit."""
    return _made({}, {"--repo": repo, "--commit": commit, "--build-deps": build_deps,
                      **identity_values(cfg, "trace-data")})


def sft_inputs(cfg: Config, store: Store, *, data: str, trajectories: Sequence[str], init: str | None,
               iteration: int) -> StageInputs:
    """`sft`: the prepared data, the trajectories, the warm start and the base model, the training keys (from
    iteration 1 with those only a later iteration reads, `sft-later`, and the value model's when `sft.joint` trains
    its head too) and whether proof and sketch examples train (`proof examples`, `sketch examples`: the effective
    `sft.proof_examples` and `sft.sketch_examples`; an output recorded before sketch examples existed was made without
    them). `sft.proofs_per_theorem` is recorded as its effective value (`config.sft.proofs_kept`)."""
    later = identity_values(cfg, "sft-later") if iteration >= 1 else {}
    if later:
        later["sft.proofs_per_theorem"] = proofs_kept(cfg.sft, cfg.search)
    joint = identity_values(cfg, "sft-joint") if cfg.sft.joint and iteration >= 1 else {}
    inputs = {"--data": stamp(data, store), **_listed("--trajectories", trajectories, store),
              "--init": stamp(init, store), "base model": stamp(cfg.sft.base_model, store)}
    return _made(inputs, {"--iter": iteration, **identity_values(cfg, "sft"), **later, **joint,
                          "proof examples": proof_examples_on(cfg.sft, cfg.search, cfg.rl),
                          "sketch examples": sketch_examples_on(cfg.sft, cfg.search)},
                 before={"sketch examples": False})


def rl_inputs(cfg: Config, store: Store, *, sft: str, index: TheoremIndex, trajectories: Sequence[str],
              iteration: int) -> StageInputs:
    """`rl`: the SFT output, the theorem set (by content), the trajectories whose proofs leave theorems out (and,
    with repair prompts, whose failed proofs give them), the keys of RL's identity, and how its prompts are written
    (whole search's format and declaration form; `repair prompts`, the repair format, when search.repair_rounds > 0
    serves them: the effective value, as `proof examples` is SFT's)."""
    from burnqed.eval.identity import theorem_digest
    from burnqed.rl.grpo import RlSettings

    reward = RlSettings.from_config(cfg).reward
    repair = {} if reward.repair is None else {"repair prompts": str(reward.repair)}
    return _made({"--sft": stamp(sft, store), **_listed("--trajectories", trajectories, store)},
                 {"--iter": iteration, "theorems": len(index.theorems), "theorem set": theorem_digest(index.theorems),
                  "prompt format": str(reward.fmt), "declaration form": str(reward.form), **repair,
                  **identity_values(cfg, "rl")})


def export_inputs(cfg: Config, store: Store, *, sft: str) -> StageInputs:
    """`export`: the SFT output (whose record names the base model an adapter merges into)."""
    return _made({"--sft": stamp(sft, store)}, identity_values(cfg, "export"))


def train_ebm_inputs(cfg: Config, store: Store, *, trajectories: Sequence[str], model: str | None,
                     init: str | None, joint: str | None, iteration: int) -> StageInputs:
    """`train-ebm`: the trajectories, the policy that embeds them, the head it starts from or publishes."""
    inputs = {**_listed("--trajectories", trajectories, store), "--model": stamp(model or cfg.policy.model, store),
              "--init": stamp(init, store), "--joint": stamp(joint, store)}
    return _made(inputs, {"--iter": iteration, **identity_values(cfg, "train-ebm")})


def joint_study_inputs(cfg: Config, store: Store, *, trajectories: Sequence[str], root: str,
                       iteration: int) -> StageInputs:
    """`joint-study`: the trajectories and the policies and value models of A, B and C."""
    from burnqed.eval.joint_study import study_configurations
    from burnqed.layout import Layout

    configurations = study_configurations(Layout(normalize(root)), iteration)
    models = {f"{name}[{k}]": stamp(uri, store) for name, uris in configurations.items()
              for k, uri in enumerate(uris)}
    return _made({**_listed("--trajectories", trajectories, store), **models},
                 {"--iter": iteration, **identity_values(cfg, "joint-study")})


def report_inputs(cfg: Config, store: Store, *, root: str, iteration: int) -> StageInputs:
    """`report`: every output of iterations 0..`iteration` but the reports (what a report reads is among them)."""
    from burnqed.runner.plan import iteration_of

    outputs = {f"iter_{j} {stage.name}" + (f"[{k}]" if stage.shards > 1 else ""): uri for j in range(iteration + 1)
               for stage in iteration_of(cfg, normalize(root), j).stages if stage.name != "report"
               for k in range(stage.shards) for uri in stage.outputs_for(k)}
    return _made({role: stamp(uri, store) for role, uri in outputs.items()},
                 {"--root": normalize(root), "--iter": iteration, **identity_values(cfg, "report")})


def start_inputs(cfg: Config, store: Store, *, root: str, iteration: int) -> StageInputs:
    """`start`: the published evals of iterations 0..`iteration`-1 it chooses from (`eval.best_so_far`)."""
    from burnqed.layout import Layout

    at = Layout(normalize(root))
    evals = {f"iter_{j} {arm}": uri for j in range(iteration)
             for arm, uri in (("eval", at.eval_result(j)), ("eval-noebm", at.eval_result(j, with_ebm=False)))
             if arm == "eval" or j}
    return _made({role: stamp(uri, store) for role, uri in evals.items()},
                 {"--root": normalize(root), "--iter": iteration, "pipeline.start": cfg.pipeline.start})


MERGE_INPUT = "input"  # merge-trajectories' role of its inputs: `input[0]`, `input[1]`, …


def merge_inputs(store: Store, *, inputs: Sequence[str], judged: bool = False) -> StageInputs:
    """`merge-trajectories`: the shard prefixes, in order (roles `MERGE_INPUT[k]`), and, when comparator judges their
    proofs (`judged`: `stages.judge_merge.judges_merge`), the judge."""
    return _made(_listed(MERGE_INPUT, inputs, store), {"judge": "comparator"} if judged else {},
                 {"judge": "burnqed"})  # a merge recorded without it was never judged: never reused as judged


def _search_settings(mode: str, seed: int | None, lean_backend: str, search: dict[str, object]) -> dict[str, object]:
    return {"search.mode": mode, "policy.seed": seed, "lean backend": lean_backend, **search}


def eval_inputs(identity: EvalIdentity, cfg: Config, store: Store) -> StageInputs:
    """One arm of `eval`: its identity (`eval.identity.EvalIdentity`: the theorem set, budgets, mode and the keys of
    eval's identity in that mode), the policy model, the value model and, in sketch mode, the lemma library
    (`search.lemma_library`, stamped by its listing: its entries are named by their digests)."""
    settings = {"benchmark": identity.benchmark, "theorems": identity.theorems, "theorem set": identity.theorem_digest,
                "--budgets": identity.budgets, "--pass-n": identity.pass_n, "--iter": identity.iteration,
                "not evaluated": identity.not_evaluated,
                **_search_settings(identity.mode, identity.seed, identity.lean_backend, identity.search)}
    library = ({"search.lemma_library": stamp(cfg.search.lemma_library, store)}
               if identity.mode == "sketch" and cfg.search.lemma_library is not None else {})
    return _made({"model": stamp(cfg.policy.model, store), "--ebm": stamp(identity.ebm, store), **library}, settings)


def search_inputs(cfg: Config, store: Store, index: TheoremIndex, *, shard: str | None, iteration: int,
                  ebm: str | None, unsolved_from: str | None = None) -> StageInputs:
    """`search`: the theorem set (by content) and shard, the keys of search's identity in its mode, the policy and
    value models, and with `unsolved_from` (--unsolved-from) those trajectories and the factor of the budget their
    unsolved theorems get (`search.unsolved_budget_factor`). `--run-id` is a label, not an input."""
    from burnqed.eval.identity import search_identity, theorem_digest
    from burnqed.lean.backend import lean_backend_label

    unsolved = ({"--unsolved-from": stamp(unsolved_from, store)} if unsolved_from is not None else {})
    larger = ({"search.unsolved_budget_factor": cfg.search.unsolved_budget_factor}
              if unsolved_from is not None else {})
    return _made({"model": stamp(cfg.policy.model, store), "--ebm": stamp(ebm, store), **unsolved},
                 {"theorems": len(index.theorems), "theorem set": theorem_digest(index.theorems), "--shard": shard,
                  "--iter": iteration, **_search_settings(str(cfg.search.mode), cfg.policy.seed,
                                                          lean_backend_label(cfg.lean.command),
                                                          search_identity(cfg, "search")), **larger})


def inputs_from_settings(result: EvalResult) -> StageInputs:
    """What an eval result without `made_from` says of its inputs: its settings, not its theorems'
    content nor its models' stamps. Each configuration key its settings record (`EvalSettings.config`, a result of an
    earlier schema read into it by `eval.migrations`) that is a key of eval's identity in its mode is compared; one
    it left unset, or no such key, is not."""
    from burnqed.search.modes import MODES

    keys = set(identity_keys(Config, "eval", MODES[result.mode].reads()))
    recorded = result.settings.config if result.settings is not None else {}
    search: dict[str, object] = {key: value for key, value in recorded.items() if key in keys and value is not None}
    return _made({}, {"benchmark": result.benchmark, "theorems": result.total,
                      "--budgets": [row.budget for row in result.budgets], "--pass-n": result.pass_n,
                      "--iter": result.iteration, **_search_settings(str(result.mode), result.seed,
                                                                     result.lean_backend, search)})


# ---------------------------------------------------------------------------------------- what is there


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished output as found: when it finished and what it records being made from."""

    output: str
    finished: datetime | None
    made_from: StageInputs | None  # None: not recorded (an older burnqed's output)
    partial: bool = False  # `made_from` was rebuilt from what an older output records (its settings)

    def difference(self, now: StageInputs) -> str | None:
        """How `now` differs from what this output was made from (None: the same, or nothing recorded). A record
        rebuilt from an older output's settings (`partial`) is compared on what it holds only: what it does not
        record is unknown, not its default."""
        if self.made_from is None:
            return None
        return self.made_from.difference(now.model_copy(update={"defaults": {}}) if self.partial else now)


class _Marker(BaseModel):
    model_config = ConfigDict(extra="allow")

    stage: str | None = None


def finished_output(store: Store, output: str) -> Finished | None:
    """The finished output at `output` (a folder with its completion marker, a trajectory prefix, an eval result
    file), or None when nothing finished is there."""
    if output.endswith(".json"):
        return _finished_eval(store, output)
    marker_uri = join(output, MARKER_NAME)
    if not store.exists(marker_uri):
        return None
    data = store.read_bytes(marker_uri)
    try:
        raw = _Marker.model_validate_json(data)
    except ValidationError:
        raise InputError(f"{marker_uri} is not a completion marker (not JSON): delete it, or choose another "
                         "--output") from None
    if raw.stage is not None:  # a stage's folder output
        marker = store.read_model(marker_uri, StageMarker, "completion marker")
        return Finished(output, marker.written_at, marker.made_from)
    inputs_uri = join(output, INPUTS_NAME)  # a trajectory prefix: what it was made from is beside its marker
    made = store.read_model(inputs_uri, StageInputs, "record of inputs") if store.exists(inputs_uri) else None
    return Finished(output, _written_at(data), made)


def finished_start(store: Store, output: str) -> Finished | None:
    """The start record at `output` (`burnqed start`'s) as a finished output, or None when there is none."""
    from burnqed.eval.best_so_far import StartRecord

    if not store.exists(output):
        return None
    return Finished(output, None, store.read_model(output, StartRecord, "start record").made_from)


def _finished_eval(store: Store, output: str) -> Finished | None:
    from burnqed.eval.result import load_eval_result

    if not store.exists(output):
        return None
    return finished_eval(output, load_eval_result(output, store=store))


def finished_eval(output: str, result: EvalResult) -> Finished:
    """The eval result `result`, read from `output`, as a finished output."""
    if result.made_from is not None:
        return Finished(output, result.timestamp, result.made_from)
    return Finished(output, result.timestamp, inputs_from_settings(result), partial=True)


def check_reusable(found: Finished, now: StageInputs, what: str) -> None:
    """`InputError` when `found` was made from other inputs than `now` (one line: the first difference, and that
    --force redoes it)."""
    if found.made_from is None:
        return
    difference = found.difference(now)
    if difference is not None:
        raise InputError(f"{found.output} is a finished {what} made with other inputs: {difference}; --force redoes "
                         "it, or choose another --output")


def reuse_line(found: Finished) -> str:
    """The line a command prints first when it reuses `found`."""
    if found.made_from is None:
        why = "made by an older burnqed: its inputs were not recorded, so they could not be compared"
    elif found.partial:
        why = "made by an older burnqed: compared on the settings it records, not on its inputs' content"
    else:
        why = "same inputs"
    return f"reusing {found.output} (finished {when(found.finished)}, {why}); --force redoes it"


def resume_prefix(store: Store, output: str, now: StageInputs, *, resume: bool) -> Finished | None:
    """Before a search writes into the trajectory prefix `output`: the finished output to reuse (with `resume`, made
    with the same inputs), or None to go on (nothing there, or an interrupted run: `resume` continues it, and without
    it the search refuses a prefix holding theorems). `InputError` for a finished search without `resume`, and when
    `resume` finds a run, finished or interrupted, made with other inputs."""
    found = finished_output(store, output)
    if found is not None and not resume:
        raise InputError(f"output {output} holds a finished search: pass --resume to reuse it (when made with the "
                         "same inputs), --force to search again from nothing, or choose another --output")
    if found is not None:
        check_reusable(found, now, "search output")
        return found
    recorded = join(output, INPUTS_NAME)
    if resume and store.exists(recorded):
        difference = store.read_model(recorded, StageInputs, "record of inputs").difference(now)
        if difference is not None:
            raise InputError(f"{output} holds an interrupted search made with other inputs: {difference}; resume "
                             "with its settings, or --force searches again from nothing")
    return None
