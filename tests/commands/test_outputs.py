"""Outputs are never written over somebody's files (docs/errors.md, "Never over somebody's files"): every command
that takes an output, pointed at a folder (or file) that is not its own output, refuses in one line with exit 2
before any work and leaves everything as it was; a stage replaces only an empty folder or its own output, checked
again at publish time (the folder may change while the stage runs), locally and on S3.

The command matrix runs in-process (typer's runner) with settings under which any work would wait a minute for a
policy server, so a case that passes was refused before work; a few cases run `burnqed` in a subprocess, as a user
does.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.errors import InputError, StorageError
from burnqed.storage import MARKER_NAME, PUBLISHING_NAME, StageMarker, Store, markers
from burnqed.storage import store as store_module
from tests.processes import cli
from tests.storage.test_storage_faults import WOULD_WAIT, assert_one_line, invoke

USER_FILE = "notes.txt"
USER_TEXT = "my notes, not burnqed's\n"

# command → (its arguments with the output `u` and a scratch folder `t`, the name of the user's file at `u`, the
# words the refusal must hold). `u` is a folder holding that file; for file outputs, `u` is the user's file itself.
Args = Callable[[str, Path], list[str]]
FOLDER_OUTPUTS: dict[str, tuple[Args, str, str]] = {
    "report": (lambda u, t: ["report", "--iter", "0", "--root", str(t), "--output", u], USER_FILE,
               "holds 1 file and no _SUCCESS.json (notes.txt)"),
    "data prepare": (lambda u, t: ["data", "prepare", "--output", u, "--force"], USER_FILE, "prepare-data writes"),
    "data trace": (lambda u, t: ["data", "trace", "--repo", "r", "--commit", "c", "--output", u], USER_FILE,
                   "trace-data writes"),
    "sft": (lambda u, t: ["sft", "--data", str(t), "--output", u, "--force"], USER_FILE, "sft writes"),
    "export": (lambda u, t: ["export", "--sft", str(t), "--output", u, "--force"], USER_FILE, "export writes"),
    "train-ebm": (lambda u, t: ["train-ebm", "--trajectories", str(t), "--output", u], USER_FILE,
                  "train-ebm writes"),
    "joint-study": (lambda u, t: ["joint-study", "--iter", "1", "--trajectories", str(t), "--root", str(t),
                                  "--output", u], USER_FILE, "joint-study writes"),
    "search": (lambda u, t: ["search", "--output", u], USER_FILE, "a trajectory prefix does not hold (notes.txt)"),
    "merge-trajectories": (lambda u, t: ["merge-trajectories", str(t), "--output", u], USER_FILE,
                           "a trajectory prefix does not hold"),
    "eval --trajectories-out": (lambda u, t: ["eval", "--output", str(t / "r.json"), "--trajectories-out", u],
                                USER_FILE, "--trajectories-out"),
    "sft checkpoints": (lambda u, t: ["sft", "--data", str(t), "--output", u.removesuffix("-checkpoints")],
                        USER_FILE, "its checkpoint folder"),
    # TRL's trainers write a README.md there (their model card): one that is not is the user's
    "sft checkpoints (a README.md not TRL's)": (
        lambda u, t: ["sft", "--data", str(t), "--output", u.removesuffix("-checkpoints")], "README.md",
        "holds a README.md that is not the model card TRL's trainer writes there"),
    "rl checkpoints (a README.md not TRL's)": (
        lambda u, t: ["rl", "--sft", str(t), "--output", u.removesuffix("-checkpoints")], "README.md",
        "holds a README.md that is not the model card TRL's trainer writes there"),
    # a base model for eval-base's sidecar: WOULD_WAIT's sglang policy on loopback has none to serve otherwise, which
    # render refuses (workflows/_shared.py, check_unserved) before it looks at the output
    "render": (lambda u, t: ["render", "--output", u, "--set", "sft.base_model=s3://b/base"], "burnqed-smoke.yaml",
               "was not written by `burnqed render`"),
    "model init-tiny --force": (lambda u, t: ["model", "init-tiny", "--output", u, "--force"], USER_FILE,
                                "not a tiny model folder"),
    "fetch": (lambda u, t: ["fetch", str(t), u], USER_FILE, "fetch replaces only an empty folder or one it filled"),
}
FILE_OUTPUTS: dict[str, tuple[Args, str]] = {
    "eval --output --force": (lambda u, t: ["eval", "--output", u, "--force"], "is not an eval result"),
    "eval --ablation (its -noebm twin)": (lambda u, t: ["eval", "--output", u.replace("-noebm", ""), "--ebm",
                                                        str(t), "--ablation"], "is not an eval result"),
    "lean check --output": (lambda u, t: ["lean", "check", "--output", u], "is not a lean check report"),
    "compare --output": (lambda u, t: ["compare", str(t / "a.json"), str(t / "b.json"), "--output", u],
                         "is not a comparison"),
}


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


SLOW = {"render", "data prepare"}  # render renders every workflow first; data prepare imports the data stage


@pytest.mark.parametrize("command", [pytest.param(name, marks=pytest.mark.slow if name in SLOW else ())
                                     for name in sorted(FOLDER_OUTPUTS)])
def test_every_folder_output_holding_a_users_file_is_refused_before_work(command: str, tmp_path: Path) -> None:
    args, name, needle = FOLDER_OUTPUTS[command]
    out = tmp_path / ("work-checkpoints" if "checkpoints" in command else "work")
    out.mkdir()
    (out / name).write_text(USER_TEXT)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = snapshot(tmp_path)
    code, lines = invoke([*args(str(out), scratch), *WOULD_WAIT], {})
    assert_one_line(code, lines, 2, str(out.name), needle)
    assert snapshot(tmp_path) == before  # the user's file as it was, and nothing written beside it


@pytest.mark.parametrize("command", sorted(FILE_OUTPUTS))
def test_every_file_output_that_is_a_users_file_is_refused_before_work(command: str, tmp_path: Path) -> None:
    args, needle = FILE_OUTPUTS[command]
    user = tmp_path / ("r-noebm.json" if "noebm" in command else "notes.json")
    user.write_text('{"mine": true}\n')
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = snapshot(tmp_path)
    code, lines = invoke([*args(str(user), scratch), *WOULD_WAIT], {})
    assert_one_line(code, lines, 2, user.name, needle, "it is never replaced")
    assert snapshot(tmp_path) == before


@pytest.mark.slow  # one command
def test_report_output_dot_in_a_project_folder_deletes_nothing(tmp_path: Path) -> None:
    """The case of the issue: `report --output .` in a project folder deleted the project's files, then failed."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('hi')\n")
    (project / "README.md").write_text("# mine\n")
    before = snapshot(project)
    done = cli("report", "--iter", "0", "--output", ".", cwd=project)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("error: --output . holds 2 files and no _SUCCESS.json (README.md, src/main.py): report "
                           "writes only to a new or empty folder or over its own output, and deletes nothing else "
                           "(--force neither); choose another path\n")
    assert snapshot(project) == before


# ------------------------------------------------------------------------------ the store


def stage_marker(stage: str, files: dict[str, int]) -> bytes:
    return StageMarker(stage=stage, written_at=datetime(2026, 1, 1, tzinfo=UTC), files=files).model_dump_json().encode()


@pytest.mark.parametrize(("layout", "problem"), [
    ({}, None),
    ({"sub/": b""}, None),  # only empty folders: nothing to lose
    ({"weights.bin": b"w", MARKER_NAME: stage_marker("sft", {"weights.bin": 1})}, None),
    ({"weights.bin": b"w", MARKER_NAME: stage_marker("sft", {"weights.bin": 1, "gone.bin": 3})}, None),
    ({"weights.bin": b"w", MARKER_NAME: stage_marker("export", {"weights.bin": 1})},
     "is the output of stage export, not sft"),
    ({"weights.bin": b"w", "notes.txt": b"n", MARKER_NAME: stage_marker("sft", {"weights.bin": 1})},
     "holds 1 file its _SUCCESS.json does not list (notes.txt)"),
    ({"a": b"", "b/c": b"", "d": b"", "e": b""}, "holds 4 files and no _SUCCESS.json (a, b/c, d, … and 1 more)"),
    ({"part-000000.json": b"{}", MARKER_NAME: b'{"run_id": "r", "parts": []}'},
     "holds a _SUCCESS.json that is not a stage's completion marker (a trajectory prefix's, or another file)"),
    ({"weights.bin": b"w", PUBLISHING_NAME: stage_marker("sft", {"weights.bin": 1, "tok.json": 2})}, None),
    ({"weights.bin": b"w", PUBLISHING_NAME: stage_marker("report", {"weights.bin": 1})},
     "is the output of stage report, not sft"),
], ids=["absent", "empty-folders", "own", "own-fewer-files", "other-stage", "own-plus-user-file", "no-marker",
        "trajectory-marker", "own-interrupted-upload", "other-interrupted-upload"])
def test_which_folders_a_stage_may_replace(layout: dict[str, bytes], problem: str | None, tmp_path: Path,
                                           store: Store) -> None:
    out = tmp_path / "out"
    for name, data in layout.items():
        path = out / name
        if name.endswith("/"):
            path.mkdir(parents=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    assert store.foreign_output(str(out), "sft") == problem
    if problem is None:
        store.check_replaceable(str(out), "sft")
    else:
        with pytest.raises(InputError, match="sft writes only to a new or empty folder"):
            store.check_replaceable(str(out), "sft")


def test_a_stage_replaces_its_own_output_whole(tmp_path: Path, store: Store) -> None:
    out = str(tmp_path / "sft")
    with store.staged_output(out, "sft") as folder:
        (folder / "old.bin").write_bytes(b"old")
        (folder / "keep.bin").write_bytes(b"1")
    with store.staged_output(out, "sft", {"steps": 2}) as folder:
        (folder / "keep.bin").write_bytes(b"2")
    assert sorted(p.name for p in (tmp_path / "sft").iterdir()) == [MARKER_NAME, "keep.bin"]
    marker = store.read_marker(out)
    assert marker is not None and (marker.files, marker.extra) == ({"keep.bin": 1}, {"steps": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sft"]  # no staging or old folder left beside it


def test_a_users_file_that_appears_while_the_stage_runs_is_kept_and_so_is_the_result(tmp_path: Path,
                                                                                       store: Store) -> None:
    out = tmp_path / "report"
    with store.staged_output(str(out), "report") as folder:
        (folder / "report.md").write_text("# old\n")
    with pytest.raises(InputError) as refused, store.staged_output(str(out), "report") as folder:
        (folder / "report.md").write_text("# new\n")
        (out / USER_FILE).write_text(USER_TEXT)  # the user saves a file there meanwhile
    message = str(refused.value)
    kept = Path(message.split("output is kept in ")[1].split(":", maxsplit=1)[0])
    assert message == (f"output {out} holds 1 file its _SUCCESS.json does not list (notes.txt) (it changed while "
                       f"report ran): nothing there was deleted or replaced; the finished report output is kept in "
                       f"{kept}: move it into place yourself, or run again with another --output")
    assert (out / USER_FILE).read_text() == USER_TEXT and (out / "report.md").read_text() == "# old\n"
    assert (kept / "report.md").read_text() == "# new\n" and (kept / MARKER_NAME).exists()


def test_a_file_written_between_the_check_and_the_rename_is_never_deleted(tmp_path: Path, store: Store,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The publish check passes, then a file lands in the old output: it is found where the old output was moved
    aside, and the old output goes back whole."""
    out = tmp_path / "ebm"
    with store.staged_output(str(out), "train-ebm") as folder:
        (folder / "head.safetensors").write_bytes(b"h")
    real = markers._foreign
    calls = 0

    def late_writer(*args: object, **kwargs: object) -> str | None:
        nonlocal calls
        answer = real(*args, **kwargs)  # type: ignore[arg-type]
        calls += 1
        if calls == 1:  # right after the publish check said yes
            (out / USER_FILE).write_text(USER_TEXT)
        return answer

    monkeypatch.setattr(store_module, "_foreign", late_writer)
    with pytest.raises(InputError, match=r"holds 1 file its _SUCCESS.json does not list \(notes.txt\)"), \
            store.staged_output(str(out), "train-ebm") as folder:
        (folder / "head.safetensors").write_bytes(b"new")
    assert sorted(p.name for p in out.iterdir()) == [MARKER_NAME, "head.safetensors", USER_FILE]
    assert (out / "head.safetensors").read_bytes() == b"h"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".old")]


@pytest.mark.parametrize("kind", ["file", "link to nothing"])
def test_a_file_that_appears_at_the_output_path_while_the_stage_runs_is_kept_and_so_is_the_result(
    kind: str, tmp_path: Path, store: Store
) -> None:
    """The path was free when the stage started; a file (or a link) stands there at publish: it is nobody's output,
    so it stays, and the finished result waits in its staging folder."""
    out = tmp_path / "report"
    with pytest.raises(InputError) as refused, store.staged_output(str(out), "report") as folder:
        (folder / "report.md").write_text("# new\n")
        if kind == "file":
            out.write_text(USER_TEXT)
        else:
            out.symlink_to(tmp_path / "nowhere")
    message = str(refused.value)
    kept = Path(message.split("output is kept in ")[1].split(":", maxsplit=1)[0])
    assert message == (f"output {out} is a file, not a folder (it changed while report ran): nothing there was "
                       f"deleted or replaced; the finished report output is kept in {kept}: move it into place "
                       "yourself, or run again with another --output")
    if kind == "file":
        assert out.read_text() == USER_TEXT
    else:
        assert out.is_symlink() and out.readlink() == tmp_path / "nowhere"
    assert (kept / "report.md").read_text() == "# new\n" and (kept / MARKER_NAME).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["report", kept.name])  # nothing set aside


def test_a_file_that_lands_at_the_output_path_just_before_the_rename_is_kept(tmp_path: Path, store: Store,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is free at the publish check, and a file lands there before the staged folder is renamed onto it:
    the rename fails, and what stands there is looked at like anything found at publish."""
    out = tmp_path / "report"
    real = os.replace

    def late_writer(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == out and not out.exists():
            out.write_text(USER_TEXT)
        real(src, dst)

    monkeypatch.setattr(os, "replace", late_writer)
    with pytest.raises(InputError, match="is a file, not a folder") as refused, \
            store.staged_output(str(out), "report") as folder:
        (folder / "report.md").write_text("# new\n")
    monkeypatch.undo()
    kept = Path(str(refused.value).split("output is kept in ")[1].split(":", maxsplit=1)[0])
    assert out.read_text() == USER_TEXT and (kept / "report.md").read_text() == "# new\n"


# ------------------------------------------------------------------------------ S3


def s3_keys(store: Store, uri: str) -> dict[str, bytes]:
    fs, path = store.resolve(uri)
    fs.invalidate_cache()
    return {key[len(path) + 1:]: fs.cat_file(key) for key in fs.find(path)}


@pytest.mark.slow  # moto
def test_s3_a_prefix_holding_a_users_objects_is_refused_and_kept(s3_root: str, store: Store) -> None:
    out = f"{s3_root}/mine"
    store.write_bytes(f"{out}/{USER_FILE}", USER_TEXT.encode())
    with pytest.raises(InputError, match=r"holds 1 file and no _SUCCESS.json \(notes.txt\)"):
        store.check_replaceable(out, "report")
    with pytest.raises(InputError, match="kept in") as refused, store.staged_output(out, "report") as folder:
        (folder / "report.md").write_text("# r\n")
    assert s3_keys(store, out) == {USER_FILE: USER_TEXT.encode()}
    kept = Path(str(refused.value).split("output is kept in ")[1].split(":", maxsplit=1)[0])
    assert kept == folder and (kept / "report.md").read_text() == "# r\n" and (kept / MARKER_NAME).is_file()
    shutil.rmtree(kept.parent)  # a local staging folder under the temporary directory: not this test's to leave


@pytest.mark.slow  # moto
def test_s3_an_object_at_the_output_key_is_refused_before_work_and_at_publish_and_kept(s3_root: str,
                                                                                        store: Store) -> None:
    """S3 has no folders: an object whose key is the output's path may stand beside the prefix the output would
    fill. It is somebody's file, refused like one, before work and when it appears while the stage runs."""
    out = f"{s3_root}/report"
    with pytest.raises(InputError) as refused, store.staged_output(out, "report") as folder:
        (folder / "report.md").write_text("# r\n")
        store.write_bytes(out, USER_TEXT.encode())  # the user's object lands at the key meanwhile
    kept = Path(str(refused.value).split("output is kept in ")[1].split(":", maxsplit=1)[0])
    assert str(refused.value).startswith(f"output {out} is a file, not a folder (it changed while report ran): "
                                         "nothing there was deleted or replaced")
    assert (kept / "report.md").read_text() == "# r\n" and (kept / MARKER_NAME).is_file()
    shutil.rmtree(kept.parent)
    fs, path = store.resolve(out)
    fs.invalidate_cache()
    assert fs.find(s3_root.removeprefix("s3://")) == [path]  # the user's object, and nothing under the prefix
    assert store.read_bytes(out) == USER_TEXT.encode()
    with pytest.raises(InputError, match=r"--output s3://\S+/report is a file, not a folder: report writes only"):
        store.check_replaceable(out, "report")


@pytest.mark.slow  # moto
def test_s3_an_object_written_into_the_prefix_after_the_publish_check_is_never_deleted(
    s3_root: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The publish deletes the files of the listing it checked: one written after that check stays (and the next
    check names it), where a listing read again at the deletion would have taken it for the old output's."""
    out = f"{s3_root}/ebm"
    with store.staged_output(out, "train-ebm") as folder:
        (folder / "head.safetensors").write_bytes(b"h")
    real = markers._foreign
    calls = 0

    def late_writer(*args: object, **kwargs: object) -> str | None:
        nonlocal calls
        answer = real(*args, **kwargs)  # type: ignore[arg-type]
        calls += 1
        if calls == 1:  # right after the publish check said yes
            store.write_bytes(f"{out}/{USER_FILE}", USER_TEXT.encode())
        return answer

    monkeypatch.setattr(store_module, "_foreign", late_writer)
    with store.staged_output(out, "train-ebm") as folder:
        (folder / "head.safetensors").write_bytes(b"new")
    monkeypatch.undo()
    assert s3_keys(store, out) == {MARKER_NAME: s3_keys(store, out)[MARKER_NAME], "head.safetensors": b"new",
                                   USER_FILE: USER_TEXT.encode()}
    assert store.foreign_output(out, "train-ebm") == "holds 1 file its _SUCCESS.json does not list (notes.txt)"


@pytest.mark.slow  # moto
def test_s3_an_own_prefix_is_replaced_and_an_interrupted_upload_is_this_stages_to_finish(
    s3_root: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = f"{s3_root}/export"
    with store.staged_output(out, "export") as folder:
        (folder / "old.bin").write_bytes(b"old")
    assert sorted(s3_keys(store, out)) == [MARKER_NAME, "old.bin"]
    fs, _ = store.resolve(out)  # the store's one cached filesystem for this endpoint
    real_put = fs.put

    def dies_mid_upload(*args: object, **kwargs: object) -> None:
        raise OSError("connection reset by peer")

    monkeypatch.setattr(fs, "put", dies_mid_upload)
    with pytest.raises(StorageError, match="cannot upload export output"), \
            store.staged_output(out, "export") as folder:
        (folder / "new.bin").write_bytes(b"new")
    left = s3_keys(store, out)
    assert sorted(left) == [PUBLISHING_NAME]  # old files gone, new not there: never taken for finished
    assert not store.is_done(out)
    assert store.foreign_output(out, "export") is None  # the interrupted upload is export's own
    assert store.foreign_output(out, "sft") == "is the output of stage export, not sft"
    monkeypatch.setattr(fs, "put", real_put)
    with store.staged_output(out, "export") as folder:
        (folder / "new.bin").write_bytes(b"new")
    assert sorted(s3_keys(store, out)) == [MARKER_NAME, "new.bin"]
    assert store.is_done(out)


@pytest.mark.slow  # moto and two commands in-process
def test_s3_commands_refuse_a_prefix_holding_a_users_objects(s3_root: str, store: Store, tmp_path: Path) -> None:
    for args, out in [(["report", "--iter", "0", "--root", str(tmp_path)], f"{s3_root}/report"),
                      (["data", "prepare", "--force"], f"{s3_root}/data")]:
        store.write_bytes(f"{out}/{USER_FILE}", USER_TEXT.encode())
        code, lines = invoke([*args, "--output", out, *WOULD_WAIT], {})
        assert_one_line(code, lines, 2, out, "holds 1 file and no _SUCCESS.json (notes.txt)")
        assert s3_keys(store, out) == {USER_FILE: USER_TEXT.encode()}


# ------------------------------------------------------------------------------ the other kinds of output


def test_a_trajectory_prefix_may_hold_what_burnqed_writes_there_and_nothing_else() -> None:
    from burnqed.commands.outputs import checkpoint_file, trajectory_file

    ours = ["part-000000.parquet", "part-000012.json", "_SUCCESS.json", "_LEASE.json", "_EVAL.json",
            "_inflight/ab12/round-000001.json", ".part-000003.parquet.x1.tmp", "._LEASE.json.abc.tmp"]
    assert all(trajectory_file(name) for name in ours)
    assert not any(trajectory_file(name) for name in ["notes.txt", "part-1.parquet", "sub/part-000000.json",
                                                      "pass-0/part-000000.json", "_inflight"])
    assert trajectory_file("pass-0/part-000000.json", passes=True)
    assert not trajectory_file("pass-0/notes.txt", passes=True)
    assert all(checkpoint_file(name) for name in ["run.json", "abort.json", "checkpoint-40/trainer_state.json",
                                                  "checkpoint-40/model.safetensors", ".checkpoint-40.partial/a"])
    assert not any(checkpoint_file(name) for name in ["notes.txt", "checkpoint-x/a", "sub/run.json", "checkpoint-4",
                                                      "readme.md", "checkpoint-40.md"])
    assert checkpoint_file("README.md")  # TRL's model card; its content is checked (below)


def search_output(prefix: Path, store: Store) -> Path:
    """A finished search's trajectory prefix, with its record of inputs, as `burnqed search` leaves it."""
    from burnqed.provenance import INPUTS_NAME, InputStamp, StageInputs
    from tests.trajectory.factories import simple_theorem, write_trajectory

    write_trajectory(str(prefix), [simple_theorem("a", proved=True), simple_theorem("b")], every=1, store=store)
    record = StageInputs(inputs={"model": InputStamp(uri="m", stamp="1")}, settings={"--shard": None, "theorems": 2})
    (prefix / INPUTS_NAME).write_text(record.model_dump_json())
    return prefix


def merge_output(prefix: Path, inputs: list[str], store: Store) -> Path:
    from burnqed.runner.reuse import merge_inputs
    from burnqed.stages.merge import merge_trajectories

    merge_trajectories(inputs, str(prefix), made_from=merge_inputs(store, inputs=inputs), store=store)
    return prefix


def eval_prefix(prefix: Path, store: Store) -> Path:
    from burnqed.provenance import IDENTITY_NAME
    from tests.trajectory.factories import simple_theorem, write_trajectory

    write_trajectory(str(prefix), [simple_theorem("a")], store=store)
    (prefix / IDENTITY_NAME).write_text("{}")
    return prefix


def test_which_command_wrote_a_trajectory_prefix(tmp_path: Path, store: Store) -> None:
    from burnqed.commands.outputs import trajectory_stage
    from tests.trajectory.factories import simple_theorem, write_trajectory

    searched = search_output(tmp_path / "s", store)
    assert trajectory_stage(store, str(searched)) == "search"
    assert trajectory_stage(store, str(merge_output(tmp_path / "m", [str(searched)], store))) == "merge-trajectories"
    assert trajectory_stage(store, str(eval_prefix(tmp_path / "e", store))) == "eval"
    passes = eval_prefix(tmp_path / "p" / "pass-1", store).parent
    assert trajectory_stage(store, str(passes)) == "eval"
    write_trajectory(str(tmp_path / "old"), [simple_theorem("a")], store=store)  # no record: its marker says search
    assert trajectory_stage(store, str(tmp_path / "old")) == "search"
    (tmp_path / "m" / "_SUCCESS.json").unlink()
    (tmp_path / "m" / "_INPUTS.json").unlink()  # an interrupted merge of an older burnqed: its parts were copied
    assert trajectory_stage(store, str(tmp_path / "m")) == "merge-trajectories"
    (tmp_path / "lease").mkdir()
    (tmp_path / "lease" / "_LEASE.json").write_text("{}")
    assert trajectory_stage(store, str(tmp_path / "lease")) is None
    assert trajectory_stage(store, str(tmp_path / "nothing")) is None


@pytest.mark.parametrize("extra", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("output", ["same", "same-spelled-otherwise", "inside", "holding"])
def test_merge_never_writes_into_one_of_its_inputs(output: str, extra: list[str], tmp_path: Path,
                                                   store: Store) -> None:
    """The case of the audit: `merge-trajectories P --output P` on a search's output, with --force, deleted every
    part and then failed on an input with no parts."""
    searched = search_output(tmp_path / "trcopy", store)
    other = search_output(tmp_path / "other", store)
    inputs, out = {"same": ([searched], searched),
                   "same-spelled-otherwise": ([searched], f"{tmp_path}/other/../trcopy/"),
                   "inside": ([searched], searched / "merged"),
                   "holding": ([tmp_path / "all" / "s"], tmp_path / "all")}[output]
    if output == "holding":
        search_output(tmp_path / "all" / "s", store)
    before = snapshot(tmp_path)
    code, lines = invoke(["merge-trajectories", *map(str, [*inputs, other]), "--output", str(out), *extra], {})
    needle = "is also an input" if output.startswith("same") else "are one inside the other"
    assert_one_line(code, lines, 2, str(out), needle)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(("command", "owner"), [
    ("merge-trajectories --force", "search"), ("merge-trajectories", "search"),
    ("eval --trajectories-out --force", "search"), ("eval --trajectories-out", "search"),
    ("eval --trajectories-out --resume", "search"), ("eval --trajectories-out --force", "merge-trajectories"),
    ("search --force", "merge-trajectories"), ("search --force", "eval"), ("search --resume", "eval"),
    ("merge-trajectories --force", "eval"),
])
def test_a_trajectory_prefix_is_written_into_or_started_over_only_by_the_command_that_wrote_it(
        command: str, owner: str, tmp_path: Path, store: Store) -> None:
    """The audit's cases: `eval --trajectories-out P --force` and `merge-trajectories … --output P --force` on a
    search's output P deleted it; a prefix is another command's whatever the flags (docs/errors.md)."""
    shard = search_output(tmp_path / "shard", store)
    prefix = {"search": lambda p: search_output(p, store), "eval": lambda p: eval_prefix(p, store),
              "merge-trajectories": lambda p: merge_output(p, [str(shard)], store)}[owner](tmp_path / "p")
    name, *flags = command.split()
    args = {"merge-trajectories": ["merge-trajectories", str(shard), "--output", str(prefix)],
            "eval": ["eval", "--output", str(tmp_path / "r.json"), "--trajectories-out", str(prefix)],
            "search": ["search", "--output", str(prefix)]}[name]
    before = snapshot(tmp_path)
    code, lines = invoke([*args, *(flag for flag in flags if flag != "--trajectories-out"), *WOULD_WAIT], {})
    assert_one_line(code, lines, 2, f"{prefix} is the output of stage {owner}, not {name}: {name} writes only to "
                    "a new or empty folder or over its own output, and deletes nothing else (--force neither)")
    assert snapshot(tmp_path) == before


@pytest.mark.slow  # imports trl
@pytest.mark.parametrize("trainer", ["sft_trainer.SFTTrainer", "grpo_trainer.GRPOTrainer"])
def test_a_checkpoint_folder_accepts_the_model_card_trls_trainer_writes_there_and_no_other_readme(
    trainer: str, tmp_path: Path, store: Store
) -> None:
    """TRL's trainers write their model card into the folder they checkpoint into at every save (`_save_checkpoint`
    calls `create_model_card`, which renders `generate_model_card` into OUTPUT_DIR/README.md); after a Ctrl-C the
    continue command found it there and refused it (issue 68). Here the card is rendered as `create_model_card`
    renders it for a local model, with the trainer's own name, tags and paper."""
    import importlib

    from trl.trainer.utils import generate_model_card

    from burnqed.commands.outputs import check_checkpoint_folder

    module, name = trainer.split(".")
    cls = getattr(importlib.import_module(f"trl.trainer.{module}"), name)
    folder = tmp_path / "sft-checkpoints"
    (folder / "checkpoint-20").mkdir(parents=True)
    (folder / "run.json").write_text("{}")
    card = generate_model_card(  # hub_model_id: the trainer's, None without a Hub repository (TRL's typing says str)
        base_model=None, model_name=folder.name, hub_model_id=None,  # type: ignore[arg-type]
        dataset_name=None, tags=list(cls._tag_names),
        wandb_url=None, trackio_url=None, comet_url=None, trainer_name=cls._name,
        trainer_citation=cls._paper.get("citation"), template_file=cls._template_file,
        paper_title=cls._paper.get("title"), paper_id=cls._paper.get("id"))
    card.save(str(folder / "README.md"))
    check_checkpoint_folder(store, str(tmp_path / "sft"))  # accepted

    for text in ("# my notes on this run\n", "\n",
                 (folder / "README.md").read_text().replace("generated_from_trainer", "x"),
                 "---\n" + "- generated_from_trainer\n" * 5000):
        (folder / "README.md").write_text(text)
        with pytest.raises(InputError) as refused:
            check_checkpoint_folder(store, str(tmp_path / "sft"))
        assert str(refused.value) == (
            f"--output {tmp_path}/sft: its checkpoint folder {folder} holds a README.md that is not the model card "
            "TRL's trainer writes there: choose a new or empty folder, or move it away")
    # A stop between `RepoCard.save`'s open (which empties the file) and its write leaves the card empty (CI, stop 96:
    # the SIGTERM test's continue command refused it): accepted, it holds nothing of the user's.
    (folder / "README.md").write_bytes(b"")
    check_checkpoint_folder(store, str(tmp_path / "sft"))


@pytest.mark.slow  # builds the tiny model (a few seconds)
def test_init_tiny_force_replaces_its_own_model_and_never_a_file_added_to_it(tmp_path: Path) -> None:
    from burnqed.policy.tiny import METADATA_FILE, build_tiny_model

    out = tmp_path / "tiny"
    build_tiny_model(out, steps=1, seed=0)
    first = (out / METADATA_FILE).read_text()
    build_tiny_model(out, steps=2, seed=0, force=True)
    assert json.loads((out / METADATA_FILE).read_text())["steps"] == 2 != json.loads(first)["steps"]
    (out / USER_FILE).write_text(USER_TEXT)
    before = snapshot(out)
    with pytest.raises(InputError, match=r"holds files a tiny model build does not write \(notes.txt\)"):
        build_tiny_model(out, steps=1, seed=0, force=True)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny"]


@pytest.mark.slow  # a burnqed process
def test_an_output_inside_a_symlink_loop_is_one_line_from_a_real_process(tmp_path: Path) -> None:
    """The case of the issue: a traceback and exit 1 before; one line and exit 2 now, nothing written."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    done = cli("report", "--iter", "0", "--output", "a/report", cwd=tmp_path, process=True, timeout=120)
    assert (done.returncode, done.stderr) == (2, "error: --output a/report: a symbolic link in this path points "
                                              "back into it (a loop): fix or remove the link, or choose another path\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
