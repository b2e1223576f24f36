"""The iteration report (docs/pipeline.md, "Report and go/no-go gates"): what a researcher reads after an iteration —
solve rates with their intervals, learning per source, gained and lost theorems, unsolved ones and the reachable
ceiling, proofs, training curves, where search spends, cost, the modes at equal tokens, the rl stage's steps,
provenance, and the gates.

    report = build_report(root="file://./runs", iteration=1, pipeline=cfg.pipeline, rl=cfg.rl.enabled, store=store)
    write_report(report, folder)      # report.md, report.json and the plots (report.plots)
    print("\n".join(headline(report)))   # what `iterate` and `report` print: rates, changes, cost, gates

Reads only published artifacts under the run root; a missing eval of an earlier iteration is listed as missing,
never invented. `report.json` (`report.document.Report`) is what `burnqed run-all` reads to decide whether to go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from burnqed import __version__, storage
from burnqed.config import PipelineConfig
from burnqed.errors import InputError
from burnqed.eval.metadata import git_commit
from burnqed.layout import Layout
from burnqed.report.document import SECTIONS, Report
from burnqed.report.gates import model_label
from burnqed.report.markdown import render_markdown
from burnqed.report.reading import EvalFiles, _mode_evals
from burnqed.report.rl_steps import rl_headline
from burnqed.report.section import ReadEval, ReportInputs
from burnqed.report.sketches import sketch_headline


def _read_evals(at: Layout, iteration: int, load: EvalFiles) -> list[ReadEval]:
    """The base eval (when published), then each iteration's main eval and (from iteration 1) its ablation, as
    published, each read once through `load`."""
    base = load(at.eval_base())
    read = [ReadEval(at.eval_base(), base, 0, "base", "base")] if base is not None else []
    for j in range(iteration + 1):
        main_uri, ablation_uri = at.eval_result(j), at.eval_result(j, with_ebm=False)
        main = load(main_uri)
        ablation = load(ablation_uri) if j >= 1 else None
        if main is not None:
            read.append(ReadEval(main_uri, main, j, "llm+ebm" if main.ebm else "llm", f"iteration {j}"))
        if ablation is not None:
            read.append(ReadEval(ablation_uri, ablation, j, "llm", None))
    return read


def build_report(root: str, iteration: int, pipeline: PipelineConfig, *, rl: bool = False,
                 rl_switched: Sequence[str] = (), store: storage.Store) -> Report:
    """Collect iterations 0..`iteration` under `root` (and the base policy's eval, when published); `rl`
    (`rl.enabled`): the iteration's plan has an rl stage, whose section the report shows, with `rl_switched`, the SFT
    settings rl.enabled turned on (`report.rl_steps.switched_by_rl`). Every section of `SECTIONS` fills its fields from
    what was read. `InputError` (before anything is written) when `root` holds no `iter_{iteration}` folder or no
    eval result at all: a report of nothing would read as a complete no-go."""
    at = Layout(root)
    if not store.exists(at.iter_dir(iteration)):
        held = [j for j in range(iteration) if store.exists(at.iter_dir(j))]
        found = (f"it holds iterations {held}" if held else "it holds no iteration" if store.exists(root)
                 else f"{root} does not exist")
        raise InputError(f"report --iter {iteration}: {at.iter_dir(iteration)} does not exist ({found}): check "
                         "--root / storage.root and --iter, or run `burnqed iterate` first")
    load = EvalFiles(store)
    if load(at.eval_base()) is None and not any(store.exists(at.eval_result(j)) for j in range(iteration + 1)):
        raise InputError(f"report --iter {iteration}: no eval result under {root} (neither {at.eval_base()} nor "
                         f"iter_N/eval/eval.json): run the eval stages first")
    read = _read_evals(at, iteration, load)
    published = _mode_evals(at, iteration, pipeline, load)
    steps = [(entry.step, entry.arm, entry.result) for entry in read if entry.step is not None]
    inputs = ReportInputs(root=root, iteration=iteration, store=store,
                          evals=[(label, result) for label, _, result in published], steps=steps, rl=rl,
                          rl_switched=tuple(rl_switched), eval_uris={label: uri for label, uri, _ in published},
                          pipeline=pipeline, read=read, load=load, read_first=tuple(load.digests))
    commit = git_commit()
    values = {name: value for section in SECTIONS for name, value in section.values(inputs).items()}
    return Report(root=root, iteration=iteration, **values,
                  made_by=f"burnqed {__version__}" + (f" (commit {commit[:12]})" if commit else ""),
                  inputs=dict(sorted(load.digests.items())))


def measured(report: Report) -> str:
    """What the report's figures measured, as the headline says it: ` of BENCHMARK from the base MODEL` (the base
    eval's model, else iteration 0's main eval's, `gates.model_label`; the benchmark of the last main eval), or
    nothing when no eval's provenance is read."""
    if not report.provenance:
        return ""
    first = next((p for p in report.provenance if p.arm == "base"), report.provenance[0])
    base = f" from the base {model_label(first.model)}" if first.arm == "base" else ""
    return f" of {report.provenance[-1].benchmark}{base}"


def headline(report: Report) -> list[str]:
    """The lines `burnqed iterate` and `burnqed report` print (report.md has the rest): where the report is, the
    solve rate of each step per theorem source with its interval, what the last step gained and lost, what the
    iteration cost, the reachable ceiling when the benchmark holds known-false theorems, a base arm that is not the
    model SFT started from, the gates and the decision with the gate that decided it."""
    lines = []
    if report.learning:
        budget = report.learning[-1].budget
        lines.append(f"  solved at budget {budget} (n/N, rate, 95% Wilson interval){measured(report)}, step by step:")
        for group in dict.fromkeys(row.group for row in report.learning):
            steps = [row for row in report.learning if row.group == group]
            lines.append(f"  {group}: " + " → ".join(
                f"{row.step} {row.text}" + ("" if row.gain is None else f" ({100 * row.gain:+.1f})") for row in steps))
    change = next((c for c in report.changes if c.after == f"iteration {report.iteration}"), None)
    if change is not None:
        lines.append(f"  {change.after} vs {change.before}: " + (
            f"not compared ({change.unlike})" if change.unlike is not None else
            f"{len(change.new)} new, {len(change.lost)} lost" + (f" (lost: {', '.join(change.lost[:5])}"
                                                                  f"{', …' if len(change.lost) > 5 else ''})"
                                                                  if change.lost else "")))
    cost = next((c for c in report.iteration_costs if c.iteration == report.iteration and c.recorded), None)
    if cost is not None:
        cpu = "" if cost.cpu_s is None else f", {cost.cpu_s / 60:.1f} CPU-min"
        lines.append(f"  iteration {report.iteration} took {(cost.span_s or 0.0) / 60:.1f} min from its first stage's "
                     f"start to its last one's end: {cost.wall_s / 60:.1f} min of stage time over {cost.stage_runs} "
                     f"runs{cpu}")
    whole = next((row for row in report.ceiling if row.group == "all"), None)
    if whole is not None and whole.known_false:
        lines.append(f"  reachable ceiling: {whole.reachable} of {whole.total} theorems ({len(whole.known_false)} "
                     f"known false: the world's traps); {whole.solved} of them solved")
    arm = report.base_arm
    if arm is not None and arm.differs:
        lines.append(f"  warning: the base arm is {arm.model}, evaluated untrained, but iteration 0's SFT started from "
                     f"{arm.sft_base_model} (sft.base_model): base → iteration 0 is not what training added to it")
    lines += rl_headline(report.rl)
    lines += sketch_headline(report.sketches)
    for gate in report.gates:
        mark = "PASS" if gate.passed else ("NOT MEASURED" if not gate.measured else "STOP" if gate.blocking else "WARN")
        lines.append(f"  {mark} {gate.name}: {gate.detail}")
    return [*lines, f"  decision: {report.decision}"]


def _plots(report: Report, folder: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # plots are optional; the markdown says where they would be
        return
    matplotlib.use("Agg")
    for section in SECTIONS:
        if section.plots is not None:
            section.plots(section.shown(report), folder)


def write_report(report: Report, folder: Path) -> None:
    """report.md, report.json and the PNG plots into `folder` (a plot with nothing to draw is not written)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text(render_markdown(report), encoding="utf-8")
    (folder / "report.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    _plots(report, folder)


def load_report(uri: str, *, store: storage.Store) -> Report:
    """A published report folder's report.json."""
    return store.read_model(storage.join(uri, "report.json"), Report, "report")
