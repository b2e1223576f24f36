"""The Kubernetes reads of `burnqed cluster check`: `ClusterReader`, the protocol the checks read through (a 404 or
403 is a `Lookup` with that status, a transport failure `ClusterError`), and `KubeReader`, that protocol on the
`kubernetes` client (and `NotRead`, the protocol where there is no cluster to read).

    reader = KubeReader(kube.api_client(), kube.host)       # burnqed.cluster.kube.connect
    lookup = reader.get("Secret", "burnqed-s3", "burnqed")  # lookup.found, lookup.status, lookup.forbidden
    reader = NotRead("no usable kubeconfig: …")             # no cluster to read: every lookup not_read
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from burnqed.errors import ClusterError


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the API server answered for one object or list: the object (or items), else the HTTP status; or, with
    `not_read`, why nothing was asked (`NotRead`)."""

    found: dict[str, Any] | None
    status: int = 200
    message: str = ""
    not_read: str = ""

    @property
    def forbidden(self) -> bool:
        return self.status == 403

    @property
    def unseen(self) -> bool:
        """Nothing to judge the object by: the API server refused the read (403), or it was never asked."""
        return self.forbidden or bool(self.not_read)


class ClusterReader(Protocol):
    """Reads of the Kubernetes API the checks make; 404/403 come back as a `Lookup`, transport failures raise
    `ClusterError`."""

    def get(self, kind: str, name: str, namespace: str | None = None) -> Lookup: ...

    def items(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> Lookup: ...


@dataclass(frozen=True, slots=True)
class NotRead:
    """`ClusterReader` of a cluster this process cannot read (no usable kubeconfig: `why`): every lookup is
    `not_read`, so that each check says it was not checked, and why, instead of passing or failing."""

    why: str

    def get(self, kind: str, name: str, namespace: str | None = None) -> Lookup:
        return Lookup(None, 0, self.why, not_read=self.why)

    def items(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> Lookup:
        return Lookup(None, 0, self.why, not_read=self.why)


class KubeReader:
    """`ClusterReader` on the `kubernetes` client (kubeconfig or in-cluster; burnqed.cluster.kube). Objects come
    back as the JSON the API server sent (no client-side models)."""

    TIMEOUT_S = 15

    def __init__(self, api_client: Any, host: str) -> None:
        import kubernetes.client as k8s

        self._core = k8s.CoreV1Api(api_client)
        self._scheduling = k8s.SchedulingV1Api(api_client)
        self._custom = k8s.CustomObjectsApi(api_client)
        self._host = host

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Lookup:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            with _retries_unlogged():
                response = method(*args, _preload_content=False, _request_timeout=self.TIMEOUT_S, **kwargs)
        except ApiException as exc:
            message = _status_message(exc.body) or str(exc.reason or "")
            if exc.status == 401:  # every read would fail alike: one line, not a table of unknowns
                raise ClusterError(f"the Kubernetes API at {self._host} refused the kubeconfig's credentials (HTTP "
                                   f"401: {message}): renew them (e.g. your cloud's get-credentials command)") from None
            return Lookup(None, int(exc.status or 0), message)
        except (HTTPError, OSError) as exc:
            raise ClusterError(f"cannot reach the Kubernetes API at {self._host}: {' '.join(str(exc).split())}; "
                               "check the kubeconfig's current context") from None
        try:
            data = json.loads(response.data)
        except ValueError:
            raise ClusterError(f"the Kubernetes API at {self._host} answered something that is not JSON") from None
        return Lookup(data if isinstance(data, dict) else None)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Lookup:
        core = self._core
        calls: dict[str, Any] = {
            "Namespace": lambda: self._call(core.read_namespace, name),
            "ServiceAccount": lambda: self._call(core.read_namespaced_service_account, name, namespace),
            "Secret": lambda: self._call(core.read_namespaced_secret, name, namespace),
            "ConfigMap": lambda: self._call(core.read_namespaced_config_map, name, namespace),
            "PriorityClass": lambda: self._call(self._scheduling.read_priority_class, name),
        }
        lookup: Lookup = calls[kind]()  # a 404 or 403 is a Lookup with that status
        return lookup

    def items(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> Lookup:
        if kind == "Node":
            return self._call(self._core.list_node)
        if kind == "Service":
            return self._call(self._core.list_service_for_all_namespaces, label_selector=label_selector or "")
        if kind == "WorkflowTemplate":
            return self._call(self._custom.list_namespaced_custom_object, "argoproj.io", "v1alpha1", namespace,
                              "workflowtemplates")
        raise ValueError(f"no list of {kind}")


class _ThreadsUnlogged(logging.Filter):
    """Drops the records below ERROR that the threads in `threads` log."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.thread not in self.threads


_RETRIES = _ThreadsUnlogged()  # on urllib3's connection pool logger from the first read on (added once)


@contextmanager
def _retries_unlogged() -> Iterator[None]:
    """Inside: urllib3's warning for each retry of a broken connection (`Retrying (Retry(total=2, …)) after
    connection broken by …`, three per read of an API server that is down) is not logged from this thread; a read
    that still fails raises, and `KubeReader` says so in one line. The logger's level and other threads' records
    are left as they are."""
    logging.getLogger("urllib3.connectionpool").addFilter(_RETRIES)  # a filter already there is not added again
    thread = threading.get_ident()
    _RETRIES.threads.add(thread)
    try:
        yield
    finally:
        _RETRIES.threads.discard(thread)


def _status_message(body: Any) -> str:
    try:
        data = json.loads(body) if isinstance(body, str | bytes) else None
    except ValueError:
        return ""
    return " ".join(str(data.get("message", "")).split())[:300] if isinstance(data, dict) else ""
