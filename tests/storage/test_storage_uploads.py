"""No multipart upload is left open on S3 (moto): artifacts built in memory (trajectory parts, cache chunks, markers)
go up in one PUT, never as a multipart upload a killed process would leave behind; an upload from disk that a killed
run left open (model files and checkpoints go multipart above 100 MiB) is aborted by the next run of the stage that
owns the prefix, and nothing outside that prefix is touched."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from burnqed.sft.checkpoints import CheckpointStore
from burnqed.storage import Store


@pytest.fixture
def s3(s3_root: str) -> Iterator[tuple[Any, str]]:
    """A boto3 client of the moto server and the bucket of `s3_root`."""
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    yield client, s3_root.removeprefix("s3://").split("/", 1)[0]
    client.close()


def leave_open(client: Any, bucket: str, key: str) -> None:
    """What an upload SIGKILLed after its first part leaves: a multipart upload never completed nor aborted."""
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)
    client.upload_part(Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"weights")


def open_uploads(client: Any, bucket: str) -> list[str]:
    return sorted(upload["Key"] for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


@pytest.mark.slow  # 100 MiB through moto
def test_an_artifact_built_in_memory_goes_up_in_one_put_whatever_its_size(
    s3: tuple[Any, str], s3_root: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import s3fs

    client, bucket = s3
    calls: list[str] = []
    real = s3fs.S3FileSystem._call_s3

    async def recorded(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(method)
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", recorded)
    data = os.urandom(1 << 20) * 100 + b"!"  # above the 2 × 50 MiB from which s3fs would go multipart
    store.write_bytes(f"{s3_root}/iter_0/search/shard-0/part-000000.parquet", data)
    assert "put_object" in calls and "create_multipart_upload" not in calls
    head = client.head_object(Bucket=bucket, Key="run/iter_0/search/shard-0/part-000000.parquet")
    assert head["ContentLength"] == len(data) and open_uploads(client, bucket) == []


@pytest.mark.slow  # the moto server
def test_an_sft_run_aborts_the_upload_its_killed_predecessor_left_open(
    s3: tuple[Any, str], s3_root: str, tmp_path: Path
) -> None:
    client, bucket = s3
    leave_open(client, bucket, "run/iter_0/sft-checkpoints/checkpoint-4/model.safetensors")
    leave_open(client, bucket, "run/iter_0/sft-checkpoints-other/model.safetensors")  # another prefix: not ours
    leave_open(client, bucket, "run/iter_1/export/model.safetensors")
    checkpoints = CheckpointStore.for_output(f"{s3_root}/iter_0/sft", store=Store(cache_dir=tmp_path / "cache"))
    checkpoints.prepare({"sft.seed": 0}, fresh=False)
    assert open_uploads(client, bucket) == ["run/iter_0/sft-checkpoints-other/model.safetensors",
                                            "run/iter_1/export/model.safetensors"]


@pytest.mark.slow  # the moto server
def test_publishing_a_stage_output_aborts_the_uploads_left_open_under_it(
    s3: tuple[Any, str], s3_root: str, store: Store
) -> None:
    client, bucket = s3
    leave_open(client, bucket, "run/iter_0/export/model.safetensors")
    leave_open(client, bucket, "run/iter_0/export-noebm/model.safetensors")
    with store.staged_output(f"{s3_root}/iter_0/export", "export") as folder:
        (folder / "config.json").write_text("{}", encoding="utf-8")
    assert open_uploads(client, bucket) == ["run/iter_0/export-noebm/model.safetensors"]
    assert store.is_done(f"{s3_root}/iter_0/export")
