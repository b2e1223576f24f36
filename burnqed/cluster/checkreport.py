"""The report of `burnqed cluster check` (`burnqed.cluster.preflight`): one row per thing a workflow needs, with its
verdict and, for each one missing, its fix; and the rows as the checks add them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

from burnqed.cluster.kubereader import Lookup


class Verdict(StrEnum):
    OK = "ok"
    MISSING = "missing"
    UNKNOWN = "unknown"  # could not be read (forbidden): not a pass
    WARN = "warn"  # worth knowing, does not stop a submit
    NOT_CHECKED = "not checked"  # never asked (no kubeconfig): not a pass either


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the report."""

    what: str
    verdict: Verdict
    detail: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Report:
    namespace: str
    checks: tuple[Check, ...]

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if c.verdict in (Verdict.MISSING, Verdict.UNKNOWN)]

    @property
    def not_checked(self) -> list[Check]:
        return [c for c in self.checks if c.verdict is Verdict.NOT_CHECKED]

    @property
    def ready(self) -> bool:
        return bool(self.checks) and not self.problems and not self.not_checked


@dataclass
class Rows:
    rows: list[Check] = field(default_factory=list)

    def add(self, what: str, verdict: Verdict, detail: str, fix: str = "") -> None:
        self.rows.append(Check(what, verdict, detail, fix))


def cannot_read(rows: Rows, what: str, lookup: Lookup, grant: str) -> None:
    if lookup.not_read:
        rows.add(what, Verdict.NOT_CHECKED, f"not read: {lookup.not_read}")
        return
    rows.add(what, Verdict.UNKNOWN, f"cannot read it (HTTP {lookup.status}: {lookup.message})",
             f"grant {grant} (manifests/20-rbac.yaml: Role burnqed-submitter, ClusterRole burnqed-preflight) or ask "
             "an admin to run `burnqed cluster check`")


def report_json(report: Report) -> str:
    return json.dumps({"namespace": report.namespace, "ready": report.ready,
                       "checks": [{"what": c.what, "verdict": str(c.verdict), "detail": c.detail, "fix": c.fix}
                                  for c in report.checks]}, indent=2, ensure_ascii=False)
