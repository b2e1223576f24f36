"""One configuration: the commands the chart's NOTES print run as printed against the fake Kubernetes API and
Argo Server (the namespace as the chart installs it), the workflow `submit` creates carries the ConfigMap's digest,
and a pod refuses to start on a mounted configuration with another digest (`burnqed.config.digest`)."""

from __future__ import annotations

import shlex

import helm_python as helm
import pytest

from burnqed.cluster.source import load_text
from burnqed.config import Config
from burnqed.config.digest import DIGEST_ANNOTATION, pod_config_digest
from tests.cluster.conftest import CHART
from tests.cluster.test_check import ARGO, install
from tests.processes import cli


def notes(values: dict[str, object] | None = None) -> str:
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values or {}, name="burnqed", namespace="burnqed", is_install=True)
    return next(text for path, text in out.items() if path.endswith("NOTES.txt"))


def printed_commands(text: str) -> list[list[str]]:
    """Every command line the NOTES print (after a `label:`), split as a shell would."""
    commands = []
    for line in text.splitlines():
        _, sep, command = line.partition(":  ")
        if sep and command.strip().startswith(("burnqed ", "argo ")):
            commands.append(shlex.split(command.strip()))
    return commands


@pytest.mark.slow
def test_the_notes_commands_run_as_printed(fake_kube) -> None:
    install(fake_kube)
    commands = printed_commands(notes())
    assert [c[:2] for c in commands] == [["burnqed", "cluster"], ["burnqed", "submit"], ["argo", "submit"]]
    check, submit, argo = commands
    result = cli(*check[1:], env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    result = cli(*submit[1:])
    assert result.returncode == 0, result.stderr
    server = fake_kube.services[ARGO]
    assert server is not None
    (created,) = server.created
    toml = fake_kube.objects["/api/v1/namespaces/burnqed/configmaps/burnqed-config"]["data"]["burnqed.toml"]
    pods = load_text(toml, "the chart's ConfigMap")
    assert pods != Config()  # the chart's configuration (Pantograph, an S3 root), not the embedded defaults
    workflow = created["workflow"]
    assert workflow["metadata"]["annotations"][DIGEST_ANNOTATION] == pod_config_digest(pods)
    values = {p["name"]: p["value"] for p in workflow["spec"]["arguments"]["parameters"]}
    assert values["root"] == pods.storage.root
    # the argo CLI is not here: its line must name an installed template and exactly its required parameters
    assert argo[:4] == ["argo", "submit", "-n", "burnqed"]
    template = argo[argo.index("--from") + 1].removeprefix("workflowtemplate/")
    assert template in notes().split("WorkflowTemplates: ", 1)[1].splitlines()[0].split()
    assert [argo[i + 1].split("=")[0] for i, word in enumerate(argo) if word == "-p"] == ["root", "run"]


def test_a_pod_refuses_a_mounted_configuration_of_another_digest(tmp_path) -> None:
    mounted = tmp_path / "burnqed.toml"
    mounted.write_text('[pipeline]\nsearch_shards = 4\n')
    source = tmp_path / "model.txt"
    source.write_text("weights")
    right = pod_config_digest(Config.model_validate({"pipeline": {"search_shards": 4}}))
    env = {"BURNQED_CONFIG": str(mounted), "BURNQED_CONFIG_DIGEST": right}
    result = cli("fetch", str(source), str(tmp_path / "out"), env=env)
    assert result.returncode == 0, result.stderr
    # the pod's own per-stage settings (variables, --set) are not part of what it checks
    result = cli("fetch", str(source), str(tmp_path / "out2"), "--set", "lean.workers=3",
                 env={**env, "BURNQED_LEAN__WORKERS": "5"})
    assert result.returncode == 0, result.stderr
    mounted.write_text('[pipeline]\nsearch_shards = 6\n')  # the ConfigMap changed after rendering
    result = cli("fetch", str(source), str(tmp_path / "out3"), env=env)
    assert result.returncode == 2
    found = pod_config_digest(Config.model_validate({"pipeline": {"search_shards": 6}}))
    assert result.stderr.startswith(f"error: the configuration mounted at {mounted} (digest {found}) is not the one "
                                    f"this workflow was rendered from (digest {right})")
    assert not (tmp_path / "out3").exists()


def test_every_container_that_mounts_the_config_checks_it(rendered) -> None:
    for doc in rendered:
        annotations = doc.doc["metadata"].get("annotations") or {}
        for template in doc.doc["spec"]["templates"]:
            for container in [template.get("container"), *(template.get("initContainers") or []),
                              *(template.get("sidecars") or [])]:
                if not container:
                    continue
                env = {e["name"]: e["value"] for e in container.get("env") or []}
                if "BURNQED_CONFIG" in env:
                    assert env["BURNQED_CONFIG_DIGEST"] == annotations[DIGEST_ANNOTATION] == pod_config_digest(
                        Config()), (doc.name, template["name"])
                else:  # the smoke workflow (embedded defaults) and a sidecar without burnqed's encoder
                    assert "BURNQED_CONFIG_DIGEST" not in env
                    assert container is not template["container"] or (
                        doc.source == "smoke" and DIGEST_ANNOTATION not in annotations)


def test_a_key_added_with_its_default_moves_no_workflow_and_a_value_set_does() -> None:
    """The digest a workflow carries is of what the configuration sets: a new key left at its default (a knob added
    to burnqed) renders the same workflows, so no golden file moves with it; setting any key, even to a value that
    is another section's default, moves it."""
    from pydantic import Field

    from burnqed.config.sft import SftConfig

    class SftWithAKnob(SftConfig):
        new_knob: int = 3

    class ConfigWithAKnob(Config):
        sft: SftWithAKnob = Field(default_factory=SftWithAKnob)

    assert pod_config_digest(ConfigWithAKnob()) == pod_config_digest(Config())
    assert pod_config_digest(ConfigWithAKnob(sft=SftWithAKnob(new_knob=3))) == pod_config_digest(Config())
    assert pod_config_digest(ConfigWithAKnob(sft=SftWithAKnob(new_knob=4))) != pod_config_digest(Config())
    default_steps = SftConfig().max_steps
    assert pod_config_digest(Config.model_validate({"sft": {"max_steps": default_steps + 1}})) != pod_config_digest(
        Config())
    # the namespace and the Argo Server are the submitting side's: set or not, the pods' digest is the same
    assert pod_config_digest(Config.model_validate({"cluster": {"namespace": "elsewhere"}})) == pod_config_digest(
        Config())


def test_the_pods_digest_leaves_out_exactly_the_client_keys() -> None:
    """Each `cluster` key set to another value moves the pods' digest unless its mark's role is "client"
    (`CLIENT_ONLY`, derived from the marks): a key added with either role is counted, or left out, with no list to
    edit."""
    from burnqed.config.cluster import ClusterConfig
    from burnqed.config.digest import CLIENT_ONLY

    assert CLIENT_ONLY == ("namespace", "argo_server", "argo_service", "argo_token_env", "insecure_skip_verify")
    base = Config()
    moved = set()
    for name, info in ClusterConfig.model_fields.items():
        default = info.get_default(call_default_factory=True)
        item = {"x": "y"} if "dict" in str(info.annotation) else "x"
        other = (not default if isinstance(default, bool) else default + 1 if isinstance(default, int)
                 else [*default, item] if isinstance(default, list) else {**default, "x": "y"}
                 if isinstance(default, dict) else f"{default}-other")
        cluster = base.cluster.model_copy(update={name: other})
        if pod_config_digest(base.model_copy(update={"cluster": cluster})) != pod_config_digest(base):
            moved.add(name)
    assert moved == set(ClusterConfig.model_fields) - set(CLIENT_ONLY)
