"""The base of every configuration section: unknown keys are errors, and a loaded section is frozen."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

PYTHON_PLACEHOLDER = "{python}"  # in lean.command: the running interpreter


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, and a section is frozen once loaded: stages get
    immutable settings (derive a changed copy with `model_copy(update=...)`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # A section whose fields split in two names the roles here; each field's mark then gives its own
    # (`identity.with_role`, checked by `identity.misplaced_roles`).
    ROLES: ClassVar[tuple[str, ...]] = ()
