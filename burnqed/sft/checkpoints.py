"""Where an SFT run keeps its checkpoints so a crashed or preempted run resumes: `{output}-checkpoints`.

    store = CheckpointStore.for_output("s3://b/run/iter_0/sft")   # remote: a local mirror + the S3 prefix
    store.prepare({**training_settings(cfg.sft, None), "--data": ...}, fresh=False)  # refuse checkpoints of
                                                 # other training settings or inputs; pull the latest
    trainer = ...(output_dir=store.local)        # transformers writes checkpoint-N folders here
    store.latest()                               # Path of the newest complete checkpoint, or None
    store.push(store.local / "checkpoint-40")    # after each save (a TrainerCallback): upload, prune older ones
    store.clear()                                # once the output is published

A checkpoint is complete once its mark exists (written and uploaded last): SFT's is transformers' last file,
`trainer_state.json`; a stage that adds files after the trainer's (RL's journal, in its `TrainerCallback.on_save`)
names its own mark (`mark=`), written by `seal` once they are there; resuming under another value of a
`TRAINING_KEYS` key is refused naming it (docs/training.md, "Checkpoints and resume").

    store = CheckpointStore.for_output(output, store=store, mark="complete.json")
    store.seal(store.local / "checkpoint-40")    # in on_save, after the stage's own files: the mark, older ones gone
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from burnqed.config import Config
from burnqed.config.identity import identity_keys
from burnqed.errors import InputError, StorageError
from burnqed.storage import Store, abort_uploads, is_remote, local_path, put_bytes

if TYPE_CHECKING:
    from burnqed.config import EbmConfig, SftConfig

RUN_FILE = "run.json"
STATE_FILE = "trainer_state.json"  # transformers' last file of a checkpoint
CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
SUFFIX = "-checkpoints"
T = TypeVar("T")


# The keys that shape what a run trains: a checkpoint resumes only under the same values. Those whose mark names the
# `sft-checkpoints` identity (`burnqed.config.identity`); every other key may change between a run and its resumption,
# a key added later too. `ebm.*` and `sft.joint_*` count only when the run trains the value model's head (joint
# training).
TRAINING_KEYS: tuple[str, ...] = identity_keys(Config, "sft-checkpoints")


def training_settings(sft: SftConfig, ebm: EbmConfig | None) -> dict[str, Any]:
    """The values of `TRAINING_KEYS` for a run: `ebm` is the value model's section of a joint run, None for plain
    SFT (whose checkpoints the head's settings and the joint keys do not shape)."""
    sections = {"sft": sft.model_dump(mode="json"), "ebm": ebm.model_dump(mode="json") if ebm is not None else {}}
    values: dict[str, Any] = {}
    for key in TRAINING_KEYS:
        section, name = key.split(".", 1)
        if ebm is not None or not (section == "ebm" or name.startswith("joint_")):
            values[key] = sections[section][name]
    return values


def checkpoints_uri(output: str) -> str:
    """`{output}-checkpoints`: next to the output, so a re-run of the same stage finds it."""
    return output.rstrip("/") + SUFFIX


def fingerprint(payload: dict[str, Any]) -> str:
    """sha256 of a JSON-serialisable description of a run."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _shown(value: Any) -> str:
    """A setting's value as the refusal prints it (JSON, `unset` when the run had none)."""
    return "unset" if value is None else json.dumps(value, ensure_ascii=False)


def _step(name: str) -> int | None:
    match = CHECKPOINT_RE.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class CheckpointStore:
    """A run's checkpoint folder (`local`, what the trainer writes) and its remote copy (`remote`, or None)."""

    local: Path
    remote: str | None
    store: Store  # reaches `remote`
    mark: str = STATE_FILE  # a checkpoint's last file: it is complete once this exists

    @classmethod
    def for_output(cls, output: str, *, store: Store, mark: str = STATE_FILE) -> CheckpointStore:
        """The checkpoint folder of `output`; a remote one is worked on in the store's cache folder."""
        uri = checkpoints_uri(output)
        if not is_remote(uri):
            return cls(local_path(uri), None, store, mark)
        key = hashlib.sha256(uri.encode()).hexdigest()[:16]
        return cls(store.cache() / "sft-checkpoints" / key, uri, store, mark)

    # -------------------------------------------------------------------------------------- local

    def latest(self) -> Path | None:
        """The newest complete checkpoint in `local`, or None."""
        found = self._complete_local()
        return found[-1] if found else None

    def _complete_local(self) -> list[Path]:
        if not self.local.is_dir():
            return []
        steps = [(step, path) for path in self.local.iterdir()
                 if (step := _step(path.name)) is not None and (path / self.mark).is_file()]
        return [path for _, path in sorted(steps)]

    def _drop_incomplete_local(self) -> None:
        if not self.local.is_dir():
            return
        for path in self.local.iterdir():
            if _step(path.name) is not None and not (path / self.mark).is_file():
                shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------------------------------ lifecycle

    def prepare(self, settings: Mapping[str, Any], *, fresh: bool) -> None:
        """Make the store ready for a run of `settings` (its training settings and inputs, JSON values): with
        `fresh`, forget every checkpoint; otherwise refuse checkpoints written under other settings (one line
        naming what differs), pull the newest remote checkpoint when the mirror lacks it, and drop incomplete
        checkpoints."""
        if fresh:
            self.clear()
        run_print = fingerprint(dict(settings))
        recorded = self._read_run_file()
        if recorded is None:
            # Checkpoints nobody vouches for (a mirror whose remote copy is gone): start clean.
            shutil.rmtree(self.local, ignore_errors=True)
        elif recorded.get("fingerprint") != run_print:
            raise InputError(self._refusal(recorded.get("settings"), settings))
        self.local.mkdir(parents=True, exist_ok=True)
        payload = json.dumps({"fingerprint": run_print, "settings": dict(settings)}, ensure_ascii=False) + "\n"
        (self.local / RUN_FILE).write_text(payload, encoding="utf-8")
        if self.remote is not None:
            # A run killed while it uploaded a checkpoint left that upload open (model files go multipart).
            self._remote_call("clean up", abort_uploads)
            self._remote_call("write", lambda fs, root: put_bytes(fs, posixpath.join(root, RUN_FILE), payload.encode()))
            self._pull_latest()
        self._drop_incomplete_local()

    def _refusal(self, recorded: Any, settings: Mapping[str, Any]) -> str:
        where = self.remote or str(self.local)
        advice = "resume with the same ones, or pass --force to start over (deletes them)"
        if not isinstance(recorded, dict):
            return (f"checkpoints in {where} were written by a run with other settings or inputs (an older burnqed "
                    f"recorded no list of them); {advice}")
        changed = [f"{key} was {_shown(recorded.get(key))}, is {_shown(settings.get(key))}"
                   for key in sorted(set(recorded) | set(settings)) if recorded.get(key) != settings.get(key)]
        return f"checkpoints in {where} were written under other settings: {'; '.join(changed)}; {advice}"

    def seal(self, checkpoint: Path) -> None:
        """Mark a just-saved checkpoint complete (its mark written under a temporary name and renamed: never half
        there), then delete the older local ones: there is always a complete checkpoint to resume from. For a store
        whose mark is not the trainer's own last file (`mark=`), called once the stage's files are written."""
        partial = checkpoint / f".{self.mark}.partial"
        partial.write_text(json.dumps({"step": _step(checkpoint.name)}) + "\n", encoding="utf-8")
        os.replace(partial, checkpoint / self.mark)
        for path in self.local.iterdir():
            if (step := _step(path.name)) is not None and step < (_step(checkpoint.name) or 0):
                shutil.rmtree(path, ignore_errors=True)

    def push(self, checkpoint: Path) -> None:
        """Upload a just-saved checkpoint (its mark last) and delete older remote checkpoints."""
        if self.remote is None or not (checkpoint / self.mark).is_file():
            return

        def upload(fs: Any, root: str) -> None:
            target = posixpath.join(root, checkpoint.name)
            files = sorted(p for p in checkpoint.rglob("*") if p.is_file())
            for path in [p for p in files if p.name != self.mark] + [checkpoint / self.mark]:
                fs.put_file(str(path), posixpath.join(target, path.relative_to(checkpoint).as_posix()))
            for name in self._remote_names(fs, root):
                if _step(name) is not None and name != checkpoint.name:
                    fs.rm(posixpath.join(root, name), recursive=True)

        self._remote_call("upload a checkpoint to", upload)

    def clear(self) -> None:
        """Delete the checkpoints (local and remote)."""
        shutil.rmtree(self.local, ignore_errors=True)
        if self.remote is not None:

            def remove(fs: Any, root: str) -> None:
                if fs.exists(root):
                    fs.rm(root, recursive=True)

            self._remote_call("delete", remove)

    # ---------------------------------------------------------------------------------------- remote

    def _read_run_file(self) -> dict[str, Any] | None:
        """run.json of the checkpoints (`fingerprint`, `settings` when a newer burnqed wrote it), or None."""
        if self.remote is not None:
            def read(fs: Any, root: str) -> bytes | None:
                path = posixpath.join(root, RUN_FILE)
                return bytes(fs.cat_file(path)) if fs.exists(path) else None

            raw = self._remote_call("read", read)
        else:
            path = self.local / RUN_FILE
            raw = path.read_bytes() if path.is_file() else None
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) and value.get("fingerprint") else None

    def _pull_latest(self) -> None:
        def newest(fs: Any, root: str) -> str | None:
            complete = [(step, name) for name in self._remote_names(fs, root)
                        if (step := _step(name)) is not None and fs.exists(posixpath.join(root, name, self.mark))]
            return max(complete)[1] if complete else None

        name = self._remote_call("list", newest)
        if name is None or (self.local / name / self.mark).is_file():
            return
        staging = self.local / f".{name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        self._remote_call("download", lambda fs, root: fs.get(posixpath.join(root, name) + "/", str(staging) + "/",
                                                            recursive=True))
        shutil.rmtree(self.local / name, ignore_errors=True)
        staging.rename(self.local / name)

    @staticmethod
    def _remote_names(fs: Any, root: str) -> list[str]:
        if not fs.exists(root):
            return []
        return [posixpath.basename(str(entry).rstrip("/")) for entry in fs.ls(root, detail=False, refresh=True)]

    def _remote_call(self, verb: str, action: Callable[[Any, str], T]) -> T:
        if self.remote is None:
            raise RuntimeError("no remote checkpoint folder")
        fs, root = self.store.resolve(self.remote)
        try:
            return action(fs, root)
        except OSError as exc:
            raise StorageError(f"cannot {verb} checkpoints at {self.remote}: {exc}") from None
