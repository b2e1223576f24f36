"""Completion markers and whose output a folder is: a finished stage output carries `_SUCCESS.json` (a
`StageMarker`: the stage, the files, what it was made from), written last; an S3 upload under way leaves
`_PUBLISHING.json`. A folder may be replaced by a stage only when it is empty or that stage's own output.

    marker = StageMarker(stage="sft", written_at=now, files={"model.safetensors": 1234})
    (folder / MARKER_NAME).write_text(marker.model_dump_json())

`Store.staged_output` writes them, `Store.foreign_output` reads them (docs/errors.md, "Never over somebody's files").
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from burnqed.provenance import StageInputs

MARKER_NAME = "_SUCCESS.json"


PUBLISHING_NAME = "_PUBLISHING.json"  # S3: what an upload under way may leave (`publish_prefix`)
_MARKERS = (MARKER_NAME, PUBLISHING_NAME)
_NOT_A_FOLDER = "is a file, not a folder"


class StageMarker(BaseModel):
    """`_SUCCESS.json` of a finished stage output (trajectory prefixes carry their own richer marker)."""

    stage: str = Field(description="The stage that wrote the output.")
    written_at: datetime = Field(description="When the output was published (UTC).")
    files: dict[str, int] = Field(default_factory=dict, description="Relative path → size in bytes.")
    extra: dict[str, object] = Field(default_factory=dict, description="Stage-specific facts (metrics, digests).")
    made_from: StageInputs | None = Field(
        default=None, description="The inputs and settings it was made from (None: an older burnqed's output)."
    )


def _files_of(folder: Path) -> dict[str, int]:
    return {
        str(path.relative_to(folder)): path.stat().st_size
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MARKER_NAME
    }


def _count(names: Sequence[str]) -> str:
    return f"{len(names)} file{'s' if len(names) != 1 else ''}"


def _sample(names: Sequence[str], shown: int = 3) -> str:
    more = f", … and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def other_stage(found: str, stage: str) -> str:
    """Why a folder that is the output of stage `found` is not `stage`'s to replace (`Store.foreign_output`, and the
    trajectory prefixes' writer, `commands.outputs.trajectory_stage`)."""
    return f"is the output of stage {found}, not {stage}"


def _foreign(files: Mapping[str, int], marker_at: Callable[[str], StageMarker | None], stage: str) -> str | None:
    """`Store.foreign_output` of a listing; `marker_at(name)` reads one of its markers (None: not a stage
    marker)."""
    if not files:
        return None
    names = list(files)
    present = [name for name in _MARKERS if name in files]
    if not present:
        return f"holds {_count(names)} and no {MARKER_NAME} ({_sample(names)})"
    listed: set[str] = set()
    for name in present:
        marker = marker_at(name)
        if marker is None:
            return f"holds a {name} that is not a stage's completion marker (a trajectory prefix's, or another file)"
        if marker.stage != stage:
            return other_stage(marker.stage, stage)
        listed.update(marker.files)
    # `_files_of` leaves out every file named like the marker, at any depth
    stray = [name for name in names if name not in listed and name not in _MARKERS
             and posixpath.basename(name) != MARKER_NAME]
    if stray:
        return f"holds {_count(stray)} its {MARKER_NAME} does not list ({_sample(stray)})"
    return None
