"""The `[storage]` section: where a run's artifacts live."""

from __future__ import annotations

from pydantic import Field, field_validator

from burnqed.base.uris import check_http_url, check_uri
from burnqed.config.identity import neutral
from burnqed.config.section import Section
from burnqed.errors import InputError


class StorageConfig(Section):
    """Where a run's artifacts live (docs/architecture.md, "Artifacts and storage")."""

    root: str = Field(
        default="file://./runs",
        description="Run root URI: file://PATH (relative to the working directory) or s3://bucket/prefix. "
        "Artifacts go to {root}/iter_{i}/{stage}/.",
        json_schema_extra=neutral("where runs are stored; report and joint-study record it as --root"),
    )
    endpoint_url: str | None = Field(
        default=None, description="S3 endpoint (MinIO, moto, other clouds); unset = AWS (or AWS_ENDPOINT_URL).",
        json_schema_extra=neutral("where S3 is reached"),
    )
    region: str | None = Field(default=None, description="S3 region; unset = from the environment.",
                               json_schema_extra=neutral("where S3 is reached"))
    cache_dir: str | None = Field(
        default=None,
        description="Local folder for downloaded remote artifacts (models); unset = $BURNQED_HOME or the user "
        "cache. Credentials always come from the environment (AWS_* variables, IRSA), never from config.",
        json_schema_extra=neutral("where downloads are cached"),
    )

    @field_validator("root")
    @classmethod
    def _root_is_a_uri(cls, value: str) -> str:
        try:
            return check_uri(value, "root")
        except InputError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint_is_http(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value, "endpoint_url")
