"""The memory rule of Lean pods: render refuses a container whose memory limit is below (lean.workers +
lean.verifier_workers) × lean.recycle_rss_mb plus burnqed's own allowance (an OOM kill is not retried), resolves
an unset lean.workers from the container's CPU request and memory limit, and pins what it checked in the pod's
environment."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.memory import PlanKeys, lean_memory_plan, parse_quantity
from burnqed.cluster.render import render_templates
from burnqed.config import Config, LeanConfig, load_config
from burnqed.errors import ConfigError
from tests.cluster.conftest import WORKFLOWS, by_name, template
from tests.processes import cli

KEYS = PlanKeys(cpu="cluster.search_cpu", memory="cluster.search_memory", main="cluster.lean_main_memory")


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


@pytest.mark.parametrize(("text", "value"), [
    ("96Gi", 96 * 2**30), ("64000Mi", 64000 * 2**20), ("100G", 10**11), ("16", 16), ("500m", Decimal("0.5")),
    ("1.5Gi", Decimal("1.5") * 2**30), ("1e3", 1000), ("2E", 2 * 10**18), ("12k", 12000),
])
def test_kubernetes_quantities(text: str, value: int | Decimal) -> None:
    assert parse_quantity(text, "k") == value


@pytest.mark.parametrize("text", ["96GB", "-1Gi", "Gi", "1.2.3", "96 Gi", "12KiB", ""])
def test_what_is_not_a_quantity_names_the_key(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^cluster\.search_memory = .* is not a Kubernetes quantity"):
        parse_quantity(text, "cluster.search_memory")


def plan(lean: LeanConfig, cpu: str = "16", memory: str = "96Gi", main: str = "4Gi"):
    return lean_memory_plan(lean, cpu_request=cpu, memory_limit=memory, main_memory=main, keys=KEYS,
                            where="step search")


def test_an_unset_worker_count_resolves_to_what_fits() -> None:
    # 12000 MiB per Lean process: (98304 - 4096) // 12000 = 7, one of them the verifier: 6, below ¾ × 16 = 12
    resolved = plan(LeanConfig())
    assert (resolved.workers, resolved.recycle_rss_mb, resolved.main_mib, resolved.limit_mib) == (6, 12000, 4096, 98304)
    assert resolved.resolved and resolved.needed_mib == 88096  # (6 + 1) × 12000 + 4096 <= 98304
    assert plan(LeanConfig(verifier_workers=0)).workers == 7
    assert plan(LeanConfig(recycle_rss_mb=4000)).workers == 12  # then the CPUs bound it: int(0.75 × 16)
    assert plan(LeanConfig(recycle_rss_mb=1000), cpu="64", memory="512Gi").workers == 16  # and at most 16
    assert plan(LeanConfig(recycle_rss_mb=1000), cpu="1500m").workers == 1


def test_explicit_workers_that_fit_are_kept() -> None:
    kept = plan(LeanConfig(workers=11, recycle_rss_mb=7500))
    assert (kept.workers, kept.needed_mib, kept.resolved) == (11, (11 + 1) * 7500 + 4096, False)
    with pytest.raises(ConfigError, match=r"lean\.verifier_workers=1\) × lean\.recycle_rss_mb=7500 MiB"):
        plan(LeanConfig(workers=12, recycle_rss_mb=7500))  # the verifier is one Lean process more


def test_an_over_committed_plan_is_refused_with_its_numbers() -> None:
    with pytest.raises(ConfigError) as refused:
        plan(LeanConfig(workers=12))
    assert str(refused.value) == (
        "step search: the Lean container's memory limit cluster.search_memory=96Gi (98304 MiB) is below "
        "(lean.workers=12 + lean.verifier_workers=1) × lean.recycle_rss_mb=12000 MiB + cluster.lean_main_memory=4Gi "
        "(4096 MiB) for burnqed itself = 160096 MiB: raise cluster.search_memory, or lower lean.workers or "
        "lean.recycle_rss_mb (an OOM kill is not retried)"
    )


def test_no_room_for_one_worker_and_no_recycling_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"has room for no Lean worker: one needs lean\.recycle_rss_mb=12000 MiB"):
        plan(LeanConfig(), memory="12Gi")
    with pytest.raises(ConfigError, match=r"has room for no Lean worker"):
        plan(LeanConfig(recycle_rss_mb=1000), cpu="1")  # int(0.75 × 1) = 0
    with pytest.raises(ConfigError, match=r"lean\.recycle_rss_mb = 0 never recycles a Lean worker"):
        plan(LeanConfig(workers=1, recycle_rss_mb=0))


def test_render_refuses_an_over_committed_memory_plan(tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    result = cli("render", "-o", str(out), "--set", "lean.workers=12")
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: step ")
    assert "memory limit cluster.search_memory=96Gi (98304 MiB) is below (lean.workers=12 + " in line
    assert "= 160096 MiB: raise cluster.search_memory, or lower lean.workers or lean.recycle_rss_mb" in line
    assert not out.exists() or list(out.iterdir()) == []
    fits = cli("render", "iteration", "-o", str(out), "--set", "lean.workers=11", "--set", "lean.recycle_rss_mb=7500")
    assert fits.returncode == 0, fits.stderr


def test_submit_refuses_it_too_and_sends_nothing(fake_argo, fake_kube) -> None:
    fake_kube.add({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "burnqed-config", "namespace": "burnqed"},
                   "data": {"burnqed.toml": "[lean]\nworkers = 12\n"}})  # the configuration the pods read
    result = cli("submit", "eval", "--model", "s3://m/x", "--root", "s3://b/r", "--server", fake_argo.url)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: step eval: the Lean container's memory limit cluster.search_memory=96Gi")
    assert fake_argo.requests == []


def test_lean_containers_run_what_render_checked(rendered) -> None:
    iteration = by_name(rendered, "burnqed-iteration-0")
    for name in ("prepare-data", "search", "search-noise", "eval"):
        env = env_of(template(iteration, name)["container"])
        assert (env["BURNQED_LEAN__WORKERS"], env["BURNQED_LEAN__RECYCLE_RSS_MB"]) == ("6", "12000"), name
    for name in ("sft", "export", "merge-trajectories", "report"):
        assert "BURNQED_LEAN__WORKERS" not in env_of(template(iteration, name)["container"]), name
    smoke = by_name(rendered, "burnqed-smoke")
    env = env_of(template(smoke, "search")["container"])
    assert (env["BURNQED_LEAN__WORKERS"], env["BURNQED_LEAN__RECYCLE_RSS_MB"]) == ("1", "1024")  # 2 CPUs, 8Gi


def test_explicit_workers_are_pinned_as_given() -> None:
    cfg = Config.model_validate({"lean": {"workers": 10, "recycle_rss_mb": 8000},
                                 "cluster": {"search_memory": "100Gi"}})
    doc = render_templates(cfg, ["eval"], WORKFLOWS)[0].doc
    env = env_of(template(doc, "eval")["container"])
    assert (env["BURNQED_LEAN__WORKERS"], env["BURNQED_LEAN__RECYCLE_RSS_MB"]) == ("10", "8000")
    # each worker's hard memory limit: its share of 100Gi beside lean_main_memory (4Gi) and the verifier, since
    # lean.worker_memory_limit_mb (16000) would not fit: (102400 - 4096) // 11
    assert env["BURNQED_LEAN__WORKER_MEMORY_LIMIT_MB"] == "8936"


@pytest.mark.parametrize(("configured", "pinned"), [(6000, "6000"), (0, "8936"), (16000, "8936")])
def test_a_pods_worker_memory_limit_is_the_configured_one_or_its_share(configured: int, pinned: str) -> None:
    cfg = Config.model_validate({"lean": {"workers": 10, "recycle_rss_mb": 8000,
                                          "worker_memory_limit_mb": configured},
                                 "cluster": {"search_memory": "100Gi"}})
    doc = render_templates(cfg, ["eval"], WORKFLOWS)[0].doc
    assert env_of(template(doc, "eval")["container"])["BURNQED_LEAN__WORKER_MEMORY_LIMIT_MB"] == pinned


def test_the_pinned_environment_beats_the_mounted_config_file(tmp_path: Path) -> None:
    mounted = tmp_path / "burnqed.toml"
    mounted.write_text("[lean]\nworkers = 12\nrecycle_rss_mb = 12000\n")
    cfg = load_config(mounted, (), {"BURNQED_LEAN__WORKERS": "7", "BURNQED_LEAN__RECYCLE_RSS_MB": "9000"})
    assert (cfg.lean.workers, cfg.lean.recycle_rss_mb) == (7, 9000)
