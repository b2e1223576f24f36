"""A moto S3 server in a thread, for tests that put a run root on s3:// (fixture `s3_root` in conftest).

moto is an S3 emulation, not S3: more lenient than AWS (and GCS through its S3 API) in that it takes any
credentials ("testing"), any region, has no eventual consistency, rate limits or request-size limits, and serves
plain HTTP on localhost. What burnqed needs from S3's failures (unreachable endpoint, a missing bucket, refused
credentials) is played by tests/storage/test_storage_faults.py's own servers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def moto_s3(bucket: str = "burnqed-test") -> Iterator[str]:
    """Start moto's S3 server on a free port, create `bucket`, yield the endpoint URL; env must carry fake
    credentials (the caller sets AWS_* and AWS_ENDPOINT_URL)."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        server.stop()
