"""The judge step in the workflows (lean.judge = "comparator"; docs/cluster.md, "The judge step"): every eval defers
its judge and a `burnqed judge` step in a pod of its own (CPU pool, core image, comparator's sandbox) writes the
result the report reads; a pod spec without what the sandbox needs is refused in one line
(`burnqed.cluster.judge_pod`). The judged renders are golden files (manifests/judged/); the default renders, with
burnqed as the judge, stay as they were (tests/cluster/test_render.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.judge_pod import answer_slot_refusal, check_judge_pods, judge_pod_refusal, sandbox_kind
from burnqed.cluster.render import load, render_templates, write_documents
from burnqed.cluster.validate import validate_documents
from burnqed.config import Config
from burnqed.errors import ConfigError
from burnqed.runner.checks import check_stage_inputs
from burnqed.runner.plan import Resource, iteration_of
from burnqed.storage import Store
from tests.cluster.conftest import ROOT, WORKFLOWS, template
from tests.cluster.test_render import compare_or_update

JUDGED = {"lean": {"command": ["pantograph-repl", "Mathlib"], "judge": "comparator"}}
GOLDEN = ROOT / "manifests" / "judged"


def judged(**lean: object) -> Config:
    return Config.model_validate({"lean": {**JUDGED["lean"], **lean}})


def test_each_eval_of_an_iteration_is_judged_by_a_step_of_its_own(tmp_path: Path) -> None:
    stages = {s.name: s for s in iteration_of(judged(), "s3://b/run", 1).stages}
    names = list(stages)
    for name in ("eval", "eval-noebm"):
        judge = stages[f"judge-{name}"]
        assert names.index(judge.name) == names.index(name) + 1
        assert (judge.resource, judge.after, judge.inputs) == (
            Resource.JUDGE, (name,), (f"s3://b/run/iter_1/eval/{name}.unjudged.json",))
        assert judge.argv == ("judge", "--input", f"s3://b/run/iter_1/eval/{name}.unjudged.json", "--output",
                              f"s3://b/run/iter_1/eval/{name}.json")
        assert stages[name].argv[-5:] == ("--defer-judge", "--trajectories-out",
                                          f"s3://b/run/iter_1/eval/{name}.trajectories", "--output",
                                          f"s3://b/run/iter_1/eval/{name}.unjudged.json")
    assert {"judge-eval", "judge-eval-noebm"} <= set(stages["report"].after)
    # the report reads the eval's trajectories, which the eval still makes (--trajectories-out): nothing refused
    check_stage_inputs(iteration_of(judged(), f"file://{tmp_path}/run", 0), Store.from_config(Config().storage))
    plain = iteration_of(Config.model_validate({"lean": JUDGED["lean"] | {"judge": "burnqed"}}), "s3://b/run", 1)
    assert not any(s.name.startswith("judge-") or "--defer-judge" in s.argv for s in plain.stages)


def test_the_judge_pod_runs_comparator_sandboxed_on_the_cpu_pool() -> None:
    cfg = judged()
    doc = load("eval", WORKFLOWS).templates(cfg)[0].to_dict()
    main = next(t for t in doc["spec"]["templates"] if t["name"] == "main")
    assert [(t["name"], t.get("depends")) for t in main["dag"]["tasks"]] == [("eval", None), ("judge-eval", "eval")]
    judge = template(doc, "judge-eval")
    container = judge["container"]
    assert container["args"] == ["judge", "--input", "{{workflow.parameters.root}}/evals/{{workflow.name}}/"
                                 "eval.unjudged.json", "--output",
                                 "{{workflow.parameters.root}}/evals/{{workflow.name}}/eval.json"]
    assert container["securityContext"] == {
        "privileged": False, "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"}}
    assert container["resources"] == {"limits": {"memory": "16Gi"}, "requests": {"cpu": "4", "memory": "16Gi"}}
    assert container["image"].split("/")[-1].startswith("burnqed-core:")
    assert "nvidia.com/gpu" not in str(judge) and "sidecars" not in judge
    assert judge["metadata"]["labels"]["burnqed.io/node-pool"] == "cpu"
    assert judge["metadata"]["labels"]["burnqed.io/lean"] == "true"  # egress restricted
    assert judge["retryStrategy"] == template(doc, "eval")["retryStrategy"]  # retried like the others
    standalone = judged(comparator_command=["lake", "env", "/opt/comparator/bin/comparator", "{config}"])
    landrun = template(load("eval", WORKFLOWS).templates(standalone)[0].to_dict(), "judge-eval")
    assert "seccompProfile" not in landrun["container"]["securityContext"]  # Landlock needs no profile of its own


def test_the_merge_judges_the_search_proofs_in_the_judge_pod() -> None:
    """The search's proofs train only once comparator judged them (`stages.judge_merge`): the merge runs in the judge
    pod, reading the search's theorems, and `cluster check`/render read its sandbox as a judge step's."""
    stages = {s.name: s for s in iteration_of(judged(), "s3://b/run", 1).stages}
    merge, search = stages["merge-trajectories"], stages["search"]
    assert merge.resource is Resource.JUDGE
    assert merge.argv == ("merge-trajectories", "s3://b/run/iter_1/search/shard-0", "s3://b/run/iter_1/search/shard-1",
                          "--theorems", "s3://b/run/iter_0/data/theorems.json", "--split", "train,pool",
                          "--output", "s3://b/run/iter_1/trajectories")
    assert search.argv[search.argv.index("--theorems"):][:4] == merge.argv[3:7]
    plain = iteration_of(Config.model_validate({"lean": JUDGED["lean"] | {"judge": "burnqed"}}), "s3://b/run", 1)
    assert plain.stage("merge-trajectories").resource is Resource.CPU
    assert "--theorems" not in plain.stage("merge-trajectories").argv
    doc = next(t for t in load("iteration", WORKFLOWS).templates(judged()) if t.name == "burnqed-iteration-1")
    rendered = doc.to_dict()
    assert template(rendered, "merge-trajectories")["metadata"]["labels"]["burnqed.io/judge"] == "true"
    changed = copy.deepcopy(rendered)
    template(changed, "merge-trajectories")["container"]["securityContext"] = {"privileged": True}
    assert (judge_pod_refusal(changed, "bubblewrap") or "").startswith(
        "step merge-trajectories: comparator's sandbox (bubblewrap) needs not privileged (privileged: true)")


def refused(doc: dict[str, Any], **container: object) -> dict[str, Any]:
    """`doc` with the judge step's securityContext replaced by `container` (the pod's left as rendered)."""
    changed = copy.deepcopy(doc)
    template(changed, "judge-eval")["container"]["securityContext"] = dict(container)
    return changed


def test_a_judge_pod_without_what_the_sandbox_needs_is_refused_in_one_line() -> None:
    cfg = judged()
    doc = load("eval", WORKFLOWS).templates(cfg)[0].to_dict()
    check_judge_pods(doc, sandbox_kind(cfg.lean))  # as rendered: nothing missing
    with pytest.raises(ConfigError) as caught:
        check_judge_pods(refused(doc, privileged=True, runAsUser=0), sandbox_kind(cfg.lean))
    assert str(caught.value) == (
        "step judge-eval: comparator's sandbox (bubblewrap) needs not privileged (privileged: true); a non-root uid "
        "(runAsUser 0); allowPrivilegeEscalation: false (no_new_privs); user namespaces for bubblewrap "
        "(seccompProfile RuntimeDefault refuses them: Unconfined, or a Localhost profile that allows unshare); an "
        "AppArmor profile that lets bubblewrap mount (appArmorProfile RuntimeDefault): render the judge step from "
        "burnqed's workflows, or set lean.comparator_no_sandbox = true (every result says so)")
    # the standalone comparator (landrun): Landlock needs no_new_privs and a non-root uid, no profile
    assert judge_pod_refusal(refused(doc, allowPrivilegeEscalation=True), "landrun") == (
        "step judge-eval: comparator's sandbox (landrun) needs allowPrivilegeEscalation: false (no_new_privs, which "
        "Landlock needs): render the judge step from burnqed's workflows, or set lean.comparator_no_sandbox = true "
        "(every result says so)")
    assert judge_pod_refusal(refused(doc, allowPrivilegeEscalation=False), "landrun") is None  # the pod's uid holds
    assert judge_pod_refusal(refused(doc, privileged=True), "none") is None  # --inadvisably-no-sandbox: said instead


def test_the_judged_renders_match_their_golden_files(tmp_path: Path) -> None:
    """The eval workflow and iteration 1 rendered with comparator as the judge (regenerate as test_render.py says)."""
    docs = [doc for doc in render_templates(judged(), ["eval", "iteration"], WORKFLOWS)
            if doc.name in ("burnqed-eval", "burnqed-iteration-1")]
    assert validate_documents([doc.doc for doc in docs]) == []  # Argo's schema knows every field the judge sets
    write_documents(docs, tmp_path, prune=True)
    compare_or_update(tmp_path, GOLDEN)


def test_render_refuses_answer_slots_to_a_comparator_without_definition_holes(tmp_path: Path) -> None:
    """The core image's triples are on Lean before v4.30.0-rc2: their standalone comparator ignores definition holes,
    so a configuration indexing open answer slots (a benchmark source, answers 'both' or 'produced') is refused in
    one line before any step runs; with the slots given, burnqed as the judge or a newer Lean it renders."""
    putnam = {"sources": [{"kind": "benchmark", "path": "s3://b/putnam", "answers": "both"}]}
    cfg = Config.model_validate({"lean": JUDGED["lean"], "data": putnam})
    with pytest.raises(ConfigError) as caught:
        render_templates(cfg, ["eval"], WORKFLOWS)
    assert str(caught.value) == (
        "lean.judge = 'comparator': data.sources index open answer slots (s3://b/putnam, answers = 'both'), and the "
        "comparator for Lean leanprover/lean4:v4.29.1 (triple lean-4.29, comparator 2a00b30d) predates definition "
        "holes (leanprover/comparator 71b52ec, Lean v4.30.0-rc2): it refuses every filled answer slot, a false alarm; "
        "set lean.judge = 'burnqed' for them (or answers = 'given'), or use a triple on Lean >= v4.30.0-rc2")
    older = cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"image_tag": "0.9.0-lean-4.27"})})
    assert "Lean leanprover/lean4:v4.27.0 (triple lean-4.27, comparator 6c40ab4f)" in (answer_slot_refusal(older) or "")
    for fine in ({"lean": JUDGED["lean"] | {"toolchain": "leanprover/lean4:v4.35.0"}, "data": putnam},
                 {"lean": JUDGED["lean"] | {"judge": "burnqed"}, "data": putnam},
                 {"lean": JUDGED["lean"], "data": {"sources": [{**putnam["sources"][0], "answers": "given"}]}}):
        assert answer_slot_refusal(Config.model_validate(fine)) is None
