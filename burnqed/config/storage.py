"""The `[storage]` section: where a run's artifacts live."""

from __future__ import annotations

from pydantic import Field

from burnqed.config.section import Section


class StorageConfig(Section):
    """Where a run's artifacts live (docs/architecture.md, "Artifacts and storage")."""

    root: str = Field(
        default="file://./runs",
        description="Run root URI: file://PATH (relative to the working directory) or s3://bucket/prefix. "
        "Artifacts go to {root}/iter_{i}/{stage}/.",
    )
    endpoint_url: str | None = Field(
        default=None, description="S3 endpoint (MinIO, moto, other clouds); unset = AWS (or AWS_ENDPOINT_URL)."
    )
    region: str | None = Field(default=None, description="S3 region; unset = from the environment.")
    cache_dir: str | None = Field(
        default=None,
        description="Local folder for downloaded remote artifacts (models); unset = $BURNQED_HOME or the user "
        "cache. Credentials always come from the environment (AWS_* variables, IRSA), never from config.",
    )
