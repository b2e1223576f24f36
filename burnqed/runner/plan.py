"""One expert iteration as data (docs/pipeline.md): its stages, the `burnqed …` command each runs, the URIs each
reads and writes under the run root (`burnqed.layout.Layout`), the resources each needs and how search fans out.

    it = build_iteration(cfg.pipeline, root="s3://bucket/run", iteration=2)
    for stage in it.stages:                  # dependency order
        print(stage.name, stage.resource, stage.argv_for(0))   # its request (`runner.requests`) rendered

Both runners read this and nothing else: `burnqed.runner.local` runs the stages as subprocesses on this machine,
`burnqed/workflows/iteration.py` renders them as Argo container templates. No I/O happens here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TypedDict

from burnqed.config import Config, PipelineConfig
from burnqed.config.pipeline import proof_ladder
from burnqed.layout import Layout, trajectories_beside
from burnqed.records.enums import SearchMode
from burnqed.records.results import EXPANSION_MODES
from burnqed.runner.requests import (
    SHARD,
    EvalRequest,
    ExportRequest,
    JointStudyRequest,
    JudgeRequest,
    MergeRequest,
    PrepareRequest,
    ReportRequest,
    RlRequest,
    SearchRequest,
    SftRequest,
    StageRequest,
    StartRequest,
    TrainEbmRequest,
)

__all__ = ["SHARD", "Iteration", "Resource", "Stage", "build_iteration", "iteration_of", "sft_reads"]


class Resource(StrEnum):
    """What a stage's pod needs (the workflow maps these to images, requests and node pools)."""

    CPU = "cpu"  # core image, no Lean: merges, reports
    LEAN = "lean"  # core image with Lean workers: data replay
    GPU = "gpu"  # train image on a GPU node: SFT, export, EBM training
    GPU_LEAN = "gpu+lean"  # core image with Lean workers + an SGLang sidecar on one GPU: search, eval
    TRAIN_LEAN = "train+lean"  # rl image on a GPU node: one GPU in the main container beside its Lean workers: rl
    JUDGE = "judge"  # core image, CPU, comparator's sandbox (Landlock, an unprivileged uid): the judge step


@dataclass(frozen=True, slots=True)
class Stage:
    """One step of an iteration. Invariant: `after` names stages that come earlier in `Iteration.stages`."""

    name: str
    summary: str
    request: StageRequest  # the command it runs (`runner.requests`); may hold SHARD when shards > 1
    outputs: tuple[str, ...]  # URIs; the stage is done when all are done (Store.is_done)
    inputs: tuple[str, ...]  # URIs it reads (for humans, checks and artifact listings)
    resource: Resource
    after: tuple[str, ...] = ()
    shards: int = 1
    policy_model: str | None = None  # URI of the model the SGLang sidecar serves (GPU_LEAN stages)
    ebm: str | None = None  # URI of the value model the stage scores with (needs an embedding server)

    @property
    def argv(self) -> tuple[str, ...]:
        """The command line after `burnqed`, rendered from the request; may hold SHARD when shards > 1."""
        return self.request.argv()

    @property
    def fanned_out(self) -> bool:
        return SHARD in " ".join((*self.argv, *self.outputs))

    def request_for(self, shard: int) -> StageRequest:
        """The request of one shard (all of it when not fanned out)."""
        return self.request.for_shard(shard)

    def argv_for(self, shard: int) -> list[str]:
        """The command line of one shard (all of it when not fanned out)."""
        return list(self.request_for(shard).argv())

    def outputs_for(self, shard: int) -> list[str]:
        return [uri.replace(SHARD, str(shard)) for uri in self.outputs]

    def all_outputs(self) -> list[str]:
        return [uri for k in range(self.shards) for uri in self.outputs_for(k)]


@dataclass(frozen=True, slots=True)
class Iteration:
    """The stages of iteration `index` in dependency order."""

    index: int
    root: str
    stages: tuple[Stage, ...] = field(default=())

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"iteration {self.index} has no stage {name!r} (stages: {', '.join(self.names)})")

    @property
    def names(self) -> list[str]:
        return [stage.name for stage in self.stages]


def sft_reads(at: Layout, iteration: int, *, rl: bool) -> list[str]:
    """The trajectories iteration `iteration`'s SFT reads: each earlier iteration's search trajectories, then, with
    the rl stage (`rl`), its rollouts (whole proofs, verified or failed with Lean's messages: `Layout.rl_trajectories`).
    The value model reads the search trajectories alone: a whole rollout holds no proof state."""
    return [uri for j in range(iteration)
            for uri in (at.trajectories(j), *((at.rl_trajectories(j),) if rl else ()))]


def _cache_set(at: Layout, sketch: bool) -> tuple[str, ...]:
    """A sketch-mode search's share of the run's subgoal cache (`search.subgoal_cache`); nothing in other modes."""
    return (f"search.subgoal_cache={at.subgoal_cache()}",) if sketch else ()


def iteration_of(config: Config, root: str, iteration: int) -> Iteration:
    """The stages of `iteration` as `config` asks for them: `build_iteration` with every option read from the
    settings that shape the plan (what every runner, the reuse check and the workflows build)."""
    built = build_iteration(config.pipeline, root, iteration, base_model=config.sft.base_model,
                            joint=config.sft.joint, max_proofs=config.search.max_proofs, rl=config.rl.enabled,
                            sketch=config.search.mode is SearchMode.SKETCH,
                            unsolved_larger=config.search.unsolved_budget_factor > 1)
    return with_judge_steps(built) if config.lean.judged_by()[0] == "comparator" else built


def build_iteration(cfg: PipelineConfig, root: str, iteration: int, *, base_model: str | None = None,
                    joint: bool = False, max_proofs: int | None = None, rl: bool = False,
                    sketch: bool = False, unsolved_larger: bool = False) -> Iteration:
    """The stages of one iteration (docs/pipeline.md): at iteration 0 the base policy's eval (`eval_base`), no
    EBM, and a noise search when `noise_temperature` is set; the EBM ablation eval from iteration 1.
    `base_model` is the model SFT starts from (`sft.base_model`; None = the embedded default), which eval-base
    evaluates. `joint` (`sft.joint`): from iteration 1 the SFT stage trains the value model's head with the
    policy, and train-ebm publishes that head (`--joint`, checked against the export) instead of training one.
    `max_proofs` (`search.max_proofs`) sets the budgets of the whole and hybrid `eval_modes` stages when
    `eval_proof_budgets` is unset (`proof_ladder`); a configuration with such a stage needs it. `rl` (`rl.enabled`):
    an rl stage trains SFT's output on Lean's verdict of its whole proofs of the training theorems, export reads its
    output instead of SFT's, and the next iteration's SFT reads its rollouts (kept as a trajectory inside it) with
    the search trajectories (the value model does not: they hold no proof state) and, when it warm-starts
    (pipeline.start "best" or "previous"), starts from it.
    `unsolved_larger` (`search.unsolved_budget_factor` above 1): from iteration 1 the search reads iteration i-1's
    trajectories (`--unsolved-from`) and gives the theorems they left unsolved the larger budget."""
    if iteration < 0:
        raise ValueError(f"iteration must be ≥ 0, got {iteration}")
    at = Layout(root)
    i = iteration
    earlier = [at.trajectories(j) for j in range(i)]
    sft, export = at.sft(i), at.export(i)
    trained = at.rl(i) if rl else sft  # what export reads: the policy this iteration trained last
    ebm = at.ebm(i) if i >= 1 else None
    stages: list[Stage] = []

    if i == 0:
        stages.append(Stage(
            name="prepare-data",
            summary="Convert the data sources into a theorem index and tactic pairs (states replayed in Lean).",
            request=PrepareRequest(output=at.data()),
            outputs=(at.data(),), inputs=(), resource=Resource.LEAN,
        ))
    previous = at.rl(i - 1) if rl else at.sft(i - 1)  # the policy iteration i-1 exported
    best, chosen, helped = _start_reads(cfg, i, ebm=ebm is not None)
    stages += [_start_stage(at, i, best=best)] if chosen else []
    init, init_inputs = _sft_init(cfg, at, i, previous, rl=rl)
    theorems = _training_theorems(cfg, at)
    stages.append(Stage(
        name="sft",
        summary=("Train the base model afresh" if i and not init else "Fine-tune the policy")
        + " on tactic pairs" + (" and positives from earlier trajectories" if i else "")
        + (" with the value model's head (joint training)." if i and joint else "."),
        request=SftRequest(iteration=i, data=at.data(), trajectories=tuple(sft_reads(at, i, rl=rl)), **init,
                           output=sft),
        outputs=(sft,), inputs=(at.data(), *sft_reads(at, i, rl=rl), *init_inputs),
        resource=Resource.GPU,
        after=("prepare-data",) if i == 0 else ("start",) if best else (),
    ))
    if rl:
        stages.append(Stage(
            name="rl",
            summary="Train the SFT policy on Lean's verdict of its own whole proofs of the training theorems (GRPO).",
            request=RlRequest(iteration=i, sft=sft, **theorems, trajectories=tuple(earlier), output=trained),
            outputs=(trained,), inputs=(sft, at.data(), *earlier), resource=Resource.TRAIN_LEAN, after=("sft",),
        ))
    stages.append(Stage(
        name="export",
        summary="Merge the adapter into the base model and save a folder SGLang loads; check it generates.",
        request=ExportRequest(sft=trained, output=export),
        outputs=(export,), inputs=(trained,), resource=Resource.GPU, after=("rl" if rl else "sft",),
    ))
    if ebm is not None:
        stages.append(_train_ebm_stage(at, i, earlier, joint=joint, chosen=chosen))
    search_after = ("export", "train-ebm") if ebm else ("export",)
    stages += _search_stages(cfg, at, i, theorems, search_after, reads_start=helped, sketch=sketch,
                             unsolved_larger=unsolved_larger)
    budgets = ",".join(str(b) for b in cfg.eval_budgets)
    eval_common = _eval_options(cfg, i, budgets)
    if i == 0 and cfg.eval_base:
        # After prepare-data only so that a run shows its raw baseline early; it reads nothing of the run.
        stages.insert(1, _eval_base_stage(at, eval_common, budgets, base_model))
    stages += _eval_stages(cfg, at, i, eval_common, budgets, search_after, max_proofs)
    if ebm is not None and joint:
        stages += _study_stages(at, i, earlier, sft_reads(at, i, rl=rl), eval_common,
                                (init, init_inputs, ("start",) if best else ()))
    stages.append(_report_stage(at, i, stages, trained if rl else None))
    return Iteration(index=i, root=root, stages=tuple(stages))


def _start_reads(cfg: PipelineConfig, i: int, *, ebm: bool) -> tuple[bool, bool, bool]:
    """Who reads iteration `i`'s start record (docs/pipeline.md, "Start of an iteration"), as (SFT, train-ebm,
    search); a start stage runs when any does. At pipeline.start = "best" all from iteration 1 (the policy, the value
    model and its use in search); at "base" train-ebm and search from iteration 2 (at 1 there is no value model to
    pick and none measured); search only with a value model (`ebm`) and pipeline.search_value_model = "helped"."""
    best = i >= 1 and cfg.start == "best"
    chosen = best or (i >= 2 and cfg.start == "base")
    return best, chosen, chosen and ebm and cfg.search_value_model == "helped"


class _Theorems(TypedDict):
    theorems: str
    split: str | None


class _EvalCommon(TypedDict):
    iteration: int
    theorems: str | None
    budgets: str
    pass_n: int
    resume: bool


class _Init(TypedDict, total=False):
    init: str
    start: str


def _training_theorems(cfg: PipelineConfig, at: Layout) -> _Theorems:
    """The training theorems (search, rl), as the options that name them: the prepared data's index (train and pool
    splits) unless configured; never the benchmark."""
    if cfg.search_theorems:
        return {"theorems": cfg.search_theorems, "split": None}
    return {"theorems": f"{at.data()}/theorems.json", "split": ",".join(cfg.search_splits)}


def _eval_options(cfg: PipelineConfig, i: int, budgets: str) -> _EvalCommon:
    """The options every eval of iteration `i` shares (`budgets` as one text). Every eval keeps its trajectories
    beside its result (`burnqed show` draws them) and commits each theorem there: --resume continues an eval the run
    was stopped in instead of refusing the theorems it committed."""
    return {"iteration": i, "theorems": cfg.benchmark, "budgets": budgets, "pass_n": cfg.eval_pass_n, "resume": True}


def _eval_base_stage(at: Layout, eval_common: _EvalCommon, budgets: str, base_model: str | None) -> Stage:
    """Iteration 0's eval of the untrained base policy (`base_model`; None: the embedded default), the raw baseline;
    `eval_common` is the options every eval shares, `budgets` its budgets as one text."""
    return Stage(
        name="eval-base",
        summary=f"Evaluate the untrained base policy on the benchmark at budgets {budgets} (the raw baseline).",
        request=EvalRequest(**eval_common, model=base_model, output=at.eval_base()),
        outputs=(at.eval_base(),), inputs=(base_model,) if base_model else (), resource=Resource.GPU_LEAN,
        policy_model=base_model,
    )


def _search_stages(cfg: PipelineConfig, at: Layout, i: int, theorems: _Theorems, after: tuple[str, ...], *,
                   reads_start: bool, sketch: bool, unsolved_larger: bool) -> list[Stage]:
    """Iteration `i`'s search of the training theorems (`theorems`: their flags) with its export and value model,
    in `cfg.search_shards` shards after the stages `after`; at iteration 0 a second search at `noise_temperature`
    when it is set; then the merge of every shard into the iteration's trajectories. The search reads the start
    record, which says whether it uses the value model, and waits for it, when `reads_start`; a sketch-mode search
    shares the subgoal cache; with `unsolved_larger` it gives the theorems iteration i-1 left unsolved the larger
    budget."""
    n, export = cfg.search_shards, at.export(i)
    ebm = at.ebm(i) if i >= 1 else None
    # search.unsolved_budget_factor > 1: iteration i-1's trajectories say which theorems get the larger budget
    shard_out, unsolved = at.search_shard(i, SHARD), (at.trajectories(i - 1),) if unsolved_larger and i >= 1 else ()
    stages = [Stage(
        name="search",
        summary=f"Search the training theorems in {n} shard(s) and record trajectories"
        + (", those iteration i-1 left unsolved at the larger budget." if unsolved else "."),
        request=SearchRequest(iteration=i, **theorems, shard=f"{SHARD}/{n}", run_id=f"iter{i}", resume=True, ebm=ebm,
                              start=at.start(i) if reads_start else None, model=export, sets=_cache_set(at, sketch),
                              unsolved_from=unsolved[0] if unsolved else None, output=shard_out),
        outputs=(shard_out,), inputs=(at.data(), export, *((ebm,) if ebm else ()),
                                      *((at.start(i),) if reads_start else ()), *unsolved),
        resource=Resource.GPU_LEAN,
        after=(*after, *(("start",) if reads_start else ())), shards=n, policy_model=export, ebm=ebm,
    )]
    merged_inputs = [at.search_shard(i, k) for k in range(n)]
    if i == 0 and cfg.noise_temperature is not None:
        noise_out = at.search_shard(i, SHARD, noise=True)
        stages.append(Stage(
            name="search-noise",
            summary=f"Search again at temperature {cfg.noise_temperature} for diverse trajectories.",
            request=SearchRequest(iteration=i, **theorems, shard=f"{SHARD}/{n}", run_id=f"iter{i}-noise", resume=True,
                                  model=export, sets=(*_cache_set(at, sketch),
                                                      f"policy.temperature={cfg.noise_temperature}"),
                                  output=noise_out),
            outputs=(noise_out,), inputs=(at.data(), export), resource=Resource.GPU_LEAN,
            after=("export",), shards=n, policy_model=export,
        ))
        merged_inputs += [at.search_shard(i, k, noise=True) for k in range(n)]
    stages.append(Stage(
        name="merge-trajectories",
        summary="Merge the shards into the iteration's trajectories.",
        request=MergeRequest(inputs=tuple(merged_inputs), output=at.trajectories(i)),
        outputs=(at.trajectories(i),), inputs=tuple(merged_inputs), resource=Resource.CPU,
        after=tuple(s.name for s in stages),
    ))
    return stages


def _eval_stages(cfg: PipelineConfig, at: Layout, i: int, eval_common: _EvalCommon, budgets: str,
                 search_after: tuple[str, ...], max_proofs: int | None) -> list[Stage]:
    """Iteration `i`'s evals of its export on the benchmark (`eval_common`: the options they share; `budgets` as one
    text): with its value model from iteration 1 (after `search_after`, as the search) and then without it (the
    EBM ablation), and once in each of `cfg.eval_modes` (`_mode_eval`)."""
    export = at.export(i)
    ebm = at.ebm(i) if i >= 1 else None
    stages = [Stage(
        name="eval",
        summary=f"Evaluate the benchmark at budgets {budgets}" + (" with the value model." if ebm else "."),
        request=EvalRequest(**eval_common, ebm=ebm, model=export, output=at.eval_result(i)),
        outputs=(at.eval_result(i),), inputs=(export, *((ebm,) if ebm else ())), resource=Resource.GPU_LEAN,
        after=search_after, policy_model=export, ebm=ebm,
    )]
    if ebm is not None:
        stages.append(Stage(
            name="eval-noebm",
            summary="The EBM ablation: the same evaluation ordered by log-probs alone.",
            request=EvalRequest(**eval_common, model=export, output=at.eval_result(i, with_ebm=False)),
            outputs=(at.eval_result(i, with_ebm=False),), inputs=(export,), resource=Resource.GPU_LEAN,
            after=("export",), policy_model=export,
        ))
    for mode in dict.fromkeys(cfg.eval_modes):
        stages.append(_mode_eval(cfg, at, i, SearchMode(mode), ebm, search_after, max_proofs))
    return stages


def _report_stage(at: Layout, i: int, stages: list[Stage], rl: str | None) -> Stage:
    """Iteration `i`'s report over iterations 0..i, after the merge and every eval and study stage of `stages`;
    it reads the rl stage's output (`rl`) when there is one."""
    return Stage(
        name="report",
        summary="Write the iteration report (tables, plots, go/no-go gates) over iterations 0..i.",
        request=ReportRequest(root=at.root, iteration=i, output=at.report(i)),
        outputs=(at.report(i),),
        inputs=(*(uri for j in range(i + 1) for uri in (at.eval_result(j), at.trajectories(j))),
                at.eval_trajectories(i), *((rl,) if rl else ())),
        resource=Resource.CPU,
        after=tuple(s.name for s in stages if s.name in {"merge-trajectories", "eval", "study-metrics"}
                    or s.name.startswith(("eval-", "study-eval-"))),  # eval-noebm, eval-base, eval-MODE
    )


def _start_stage(at: Layout, i: int, *, best: bool) -> Stage:
    """The stage that writes what iteration `i` ≥ 1 starts from (`burnqed start`) from the evals of iterations 0..i-1:
    the policy too at pipeline.start = "best" (`best`), else ("base") the value model and its use in search."""
    return Stage(
        name="start",
        summary="Pick what this iteration starts from: "
        + ("the best policy (LLM-only eval) and value model so far." if best else
           "the best value model so far (one that helped) and whether search uses it."),
        request=StartRequest(root=at.root, iteration=i, output=at.start(i)),
        outputs=(at.start(i),),
        inputs=tuple(uri for j in range(i) for uri in (at.eval_result(j), *((at.eval_result(j, with_ebm=False),)
                                                                            if j else ()))),
        resource=Resource.CPU,
    )


def _train_ebm_stage(at: Layout, i: int, earlier: list[str], *, joint: bool,
                     chosen: bool) -> Stage:
    """Iteration `i` ≥ 1's value model: the head trained jointly with the policy (`joint`), published; else one
    trained on every earlier trajectory, warm-started from the start record's value model when a start stage chose
    it (`chosen`), else from iteration i-1's."""
    ebm, export = at.ebm(i), at.export(i)
    if joint:
        return Stage(
            name="train-ebm",
            summary="Publish the value-model head trained jointly with this iteration's policy (checked against "
            "the export) with its metrics on every earlier trajectory.",
            request=TrainEbmRequest(iteration=i, trajectories=tuple(earlier), model=export, joint=at.sft(i),
                                    output=ebm),
            outputs=(ebm,), inputs=(*earlier, at.sft(i), export), resource=Resource.GPU, after=("export",),
        )
    return Stage(
        name="train-ebm",
        summary="Train the value model on every earlier trajectory, embedded with this iteration's policy.",
        request=TrainEbmRequest(iteration=i, trajectories=tuple(earlier), model=export,
                                start=at.start(i) if chosen else None,
                                init=at.ebm(i - 1) if i >= 2 and not chosen else None, output=ebm),
        outputs=(ebm,), inputs=(*earlier, export, *((at.start(i),) if chosen else ())), resource=Resource.GPU,
        after=("export", *(("start",) if chosen else ())),  # a stage that reads the start record waits for it
    )


def _sft_init(cfg: PipelineConfig, at: Layout, i: int, previous: str, *, rl: bool) -> tuple[_Init, tuple[str, ...]]:
    """What iteration `i`'s SFT starts from (pipeline.start), as its options and inputs: the start record at
    "best" (it names one of the earlier policies), iteration i-1's policy at "previous", the base model at "base" and
    at iteration 0."""
    if i == 0 or cfg.start == "base":
        return {}, ()
    if cfg.start == "previous":
        return {"init": previous}, (previous,)
    return {"start": at.start(i)}, (at.start(i), *(at.rl(j) if rl else at.sft(j) for j in range(i)))


def _study_stages(at: Layout, i: int, earlier: list[str], sft_earlier: list[str], eval_common: _EvalCommon,
                  start: tuple[_Init, tuple[str, ...], tuple[str, ...]] = ({}, (), ())) -> list[Stage]:
    """The joint study's stages (`burnqed.eval.joint_study`): A's SFT-only policy and value model, B's value model
    retrained on the joint policy's frozen embeddings, the evals of A and B (C's is the iteration's eval; the same
    arguments, so the same budgets), and the measurement of all three. A's SFT reads what the iteration's SFT reads
    (`sft_earlier`: the rollouts too, with the rl stage) and starts as it starts (`start`: its start options, their
    inputs and the stage it waits for, `_sft_init`); the value models the search trajectories (`earlier`)."""
    a_sft, a_export, a_ebm, b_ebm = (at.study(i, p) for p in ("a/sft", "a/export", "a/ebm", "b/ebm"))
    init, init_inputs, init_after = start
    export, sft_inputs = at.export(i), (at.data(), *sft_earlier, *init_inputs)
    evals = {"a": (a_export, a_ebm, ("study-ebm-a",)), "b": (export, b_ebm, ("study-ebm-b",))}
    stages = [
        Stage(name="study-sft-a",
              summary="Joint study A: the same SFT without the value model's head (sft.joint = false).",
              request=SftRequest(iteration=i, data=at.data(), trajectories=tuple(sft_earlier), **init,
                                 sets=("sft.joint=false",), output=a_sft),
              outputs=(a_sft,), inputs=sft_inputs, resource=Resource.GPU, after=init_after),
        Stage(name="study-export-a", summary="Joint study A: export the SFT-only policy.",
              request=ExportRequest(sft=a_sft, output=a_export),
              outputs=(a_export,), inputs=(a_sft,), resource=Resource.GPU, after=("study-sft-a",)),
        Stage(name="study-ebm-a", summary="Joint study A: a value model on the SFT-only policy's frozen embeddings.",
              request=TrainEbmRequest(iteration=i, trajectories=tuple(earlier), model=a_export, output=a_ebm),
              outputs=(a_ebm,), inputs=(*earlier, a_export), resource=Resource.GPU, after=("study-export-a",)),
        Stage(name="study-ebm-b",
              summary="Joint study B: a value model retrained on the jointly trained policy's frozen embeddings.",
              request=TrainEbmRequest(iteration=i, trajectories=tuple(earlier), model=export, output=b_ebm),
              outputs=(b_ebm,), inputs=(*earlier, export), resource=Resource.GPU, after=("export",)),
    ]
    for part, (policy, value, after) in evals.items():
        out = at.study(i, f"{part}/eval.json")
        stages.append(Stage(
            name=f"study-eval-{part}",
            summary=f"Joint study {part.upper()}: the iteration's eval (same benchmark and budgets) with its policy "
            "and value model.",
            request=EvalRequest(**eval_common, ebm=value, model=policy, output=out),
            outputs=(out,), inputs=(policy, value), resource=Resource.GPU_LEAN, after=after, policy_model=policy,
            ebm=value,
        ))
    metrics = at.study(i, "metrics")
    stages.append(Stage(
        name="study-metrics",
        summary="Joint study: embedding health and value-model metrics of A, B and C on every earlier trajectory.",
        request=JointStudyRequest(iteration=i, root=at.root, trajectories=tuple(earlier), output=metrics),
        outputs=(metrics,), inputs=(*earlier, a_export, export, a_ebm, b_ebm, at.ebm(i)), resource=Resource.GPU,
        after=("study-ebm-a", "study-ebm-b", "train-ebm"),
        ebm=at.ebm(i),  # it loads value models (A's and B's too): the pod gets the value model's device pin
    ))
    return stages


def _mode_eval(cfg: PipelineConfig, at: Layout, i: int, mode: SearchMode, ebm: str | None, after: tuple[str, ...],
               max_proofs: int | None) -> Stage:
    """The benchmark evaluated in another search mode (pipeline.eval_modes), its budgets in that mode's unit: the
    iteration's eval budgets for the modes that count expansions (step, sketch), else the proof budgets."""
    if mode in EXPANSION_MODES:
        ladder = cfg.eval_budgets
    elif cfg.eval_proof_budgets:
        ladder = cfg.eval_proof_budgets
    elif max_proofs is not None:
        ladder = proof_ladder(max_proofs)
    else:
        raise ValueError(f"the eval-{mode} stage needs max_proofs (search.max_proofs) or pipeline.eval_proof_budgets")
    budgets = ",".join(str(b) for b in ladder)
    scored = ebm if mode is not SearchMode.WHOLE else None  # whole mode has no frontier to order
    return Stage(
        name=f"eval-{mode}",
        summary=f"Evaluate the benchmark in {mode} mode (report: modes side by side at equal tokens).",
        request=EvalRequest(iteration=i, theorems=cfg.benchmark, budgets=budgets, pass_n=cfg.eval_pass_n,
                            resume=True, ebm=scored, model=at.export(i), sets=(f"search.mode={mode}",),
                            output=at.eval_result(i, mode=mode)),
        outputs=(at.eval_result(i, mode=mode),), inputs=(at.export(i), *((scored,) if scored else ())),
        resource=Resource.GPU_LEAN, after=after if scored else ("export",), policy_model=at.export(i), ebm=scored,
    )


def unjudged(output: str) -> str:
    """Where an eval whose judge step follows writes its result: `R.json` → `R.unjudged.json`."""
    return f"{output.removesuffix('.json')}.unjudged.json"


def judge_stage(stage: Stage) -> tuple[Stage, Stage]:
    """An eval `stage` and its judge step (lean.judge = "comparator"): the eval runs with --defer-judge into
    `unjudged` of its result (its trajectories where they were), and `burnqed judge` writes the result from it with
    comparator's verdict, in a pod of its own (`Resource.JUDGE`)."""
    output = stage.outputs[0]
    if not isinstance(stage.request, EvalRequest):
        raise ValueError(f"stage {stage.name} runs no eval: {' '.join(stage.argv)}")
    deferred = replace(stage, request=replace(stage.request, defer_judge=True,
                                              trajectories_out=trajectories_beside(output), output=unjudged(output)),
                       outputs=(unjudged(output),))
    return deferred, Stage(
        name=f"judge-{stage.name}",
        summary=f"Judge the proofs {stage.name} counted with Lean's comparator (a refused one is a soundness alarm: "
        "not counted, and the step fails).",
        request=JudgeRequest(input_=unjudged(output), theorems=stage.request.theorems, output=output),
        outputs=(output,), inputs=(unjudged(output),), resource=Resource.JUDGE, after=(stage.name,))


def with_judge_steps(iteration: Iteration) -> Iteration:
    """`iteration` with a judge step after each eval (`judge_stage`) and its merge judging the search's proofs
    (`judged_merge`); a stage that waited for an eval waits for its judge step too."""
    stages: list[Stage] = []
    judges: dict[str, str] = {}
    for planned in iteration.stages:
        waits = tuple(judges[name] for name in planned.after if name in judges)
        stage = replace(planned, after=(*planned.after, *waits)) if waits else planned
        if isinstance(stage.request, EvalRequest):
            deferred, judge = judge_stage(stage)
            stages += [deferred, judge]
            judges[stage.name] = judge.name
        elif isinstance(stage.request, MergeRequest):
            stages.append(judged_merge(stage, next(s for s in iteration.stages if s.name == "search")))
        else:
            stages.append(stage)
    return replace(iteration, stages=tuple(stages))


def judged_merge(merge: Stage, search: Stage) -> Stage:
    """The merge of `search`'s shards judging their proofs with comparator before they train (`stages.judge_merge`):
    in the judge's pod (`Resource.JUDGE`), reading the search's theorems (its --theorems and --split)."""
    if not isinstance(merge.request, MergeRequest) or not isinstance(search.request, SearchRequest):
        raise ValueError(f"stages {merge.name} and {search.name} are no merge of a search: {' '.join(merge.argv)}")
    asked = replace(merge.request, theorems=search.request.theorems, split=search.request.split)
    return replace(merge, request=asked, resource=Resource.JUDGE,
                   summary="Judge the shards' proofs with Lean's comparator (a refused one is a soundness alarm: no "
                   "positive, and the step fails) and merge them into the iteration's trajectories.")
