"""`burnqed render | submit | fetch | cluster check`: the cluster commands (docs/cluster.md).

    burnqed render                                   # every workflow's templates -> manifests/rendered/, GPU plan
    burnqed render iteration --check                 # ... validated against the Argo schema
    burnqed render --helm [--config F --output DIR]  # -> helm/burnqed/files/workflowtemplates/ (the chart's copy)
    burnqed submit iteration --iter 2 [--dry-run]    # create the Workflow (prints its name and UI link), or print it
    burnqed fetch s3://bucket/run/iter_2/export /models/policy --require-done --model-folder   # inside pods
    burnqed cluster check                            # preflight: exit 0 only when a submit would run

Workflow files load from --workflows DIR (default: burnqed/workflows/); the Argo Server, its namespace and token
from flags, env (ARGO_SERVER, ARGO_NAMESPACE, ARGO_TOKEN) or the kubeconfig. The token is never printed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from burnqed.commands.kit import (
    ConfigOption,
    SetOption,
    carried,
    check_packages,
    configure,
    reports_errors,
    setup,
    suggestion,
)
from burnqed.commands.vocabulary import Command, Group
from burnqed.errors import BurnqedError, ConfigError, InputError

if TYPE_CHECKING:
    from burnqed.cluster.checkreport import Report
    from burnqed.config import Config

WorkflowsOption = Annotated[
    Path | None,
    typer.Option(
        "--workflows", help="Folder of workflow files (default: the package's burnqed/workflows/).", show_default=False
    ),
]


@reports_errors
def render(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Workflows to render (iteration, baseline, smoke, eval); default: all.",
                       show_default=False),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o",
            help="Folder for the YAML files (default: manifests/rendered, or helm/burnqed/files/workflowtemplates "
            "with --helm). Rendering every workflow also deletes stale renders there.",
            show_default=False,
        ),
    ] = None,
    workflows: WorkflowsOption = None,
    check: Annotated[
        bool, typer.Option("--check", help="Validate every document against the Argo schema; exit 2 if invalid.")
    ] = False,
    helm: Annotated[
        bool, typer.Option("--helm", help="Render the Helm chart's copy: no namespace (the release's applies).")
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Render the workflows' WorkflowTemplates to YAML, one file per template, and print the GPU memory plan of
    their sidecars (SGLang, and burnqed's encoder where a value model scores). A plan that cannot fit the GPU
    (serving.gpu_memory_gib) is an error (exit 2) with the numbers; so is a benchmark, data source or model at a path
    of this machine, which no pod can open (the line names the upload and the --set), and a setting that has no
    effect under the others.

    Without --output it writes the checkout's golden files, the renders of the embedded defaults; a configuration of
    your own (--config, --set, BURNQED_SECTION__KEY) renders to the --output you give (with --helm: a copy of the
    chart's files/workflowtemplates/, which `helm install` then installs)."""
    from burnqed.cluster.render import HELM_FILES, RENDERED, default_workflows_dir, render_templates, write_documents
    from burnqed.cluster.source import explicit_configuration

    if output is None and explicit_configuration(config, set_, os.environ):
        raise InputError(_own_render_refusal(helm, config, set_))
    target = output or (HELM_FILES if helm else RENDERED)
    cfg = setup(config, set_, output=str(target), folder=True).cfg  # an unwritable target: one line, before rendering
    folder = workflows or default_workflows_dir()
    docs = render_templates(cfg, names or [], folder, helm=helm)
    if check:
        from burnqed.cluster.validate import validate_documents

        problems = validate_documents([doc.doc for doc in docs])
        if problems:
            shown = "; ".join(problems[:10]) + (f"; ... and {len(problems) - 10} more" if len(problems) > 10 else "")
            raise ConfigError(f"the rendered documents are invalid: {shown}")
    from burnqed.cluster.images import lean_image_warning

    mismatch = lean_image_warning(cfg)
    if mismatch is not None:
        typer.echo(f"warning: {mismatch}", err=True)
    written = write_documents(docs, target, prune=not names)
    for path in written:
        typer.echo(f"wrote {path}")
    if check:
        typer.echo(f"{len(docs)} documents valid against the Argo schema")
    _print_gpu_plans([doc.doc for doc in docs])


CHART_COPY = "build/burnqed"  # where the README's cluster route copies the chart (`/build/` is ignored by git)


def _own_render_refusal(helm: bool, config: Path | None, sets: list[str] | None) -> str:
    """Why `render` without --output refuses a configuration of the user's own, and the command that renders it."""
    from burnqed.cluster.render import HELM_FILES, RENDERED

    carry = carried(config=config, sets=sets)
    if helm:
        where = f"{CHART_COPY}/files/workflowtemplates"
        way = (f"render into a copy of the chart: `mkdir -p build && cp -r helm/burnqed build/ && "
               f"{suggestion(['render', '--helm', '--output', where], carry)}`, then `helm install burnqed "
               f"{CHART_COPY} … --set-file config.toml=FILE` from the same file")
    else:
        way = f"give --output DIR: `{suggestion(['render', '--output', 'my-templates'], carry)}`"
    return (f"{HELM_FILES if helm else RENDERED}/ holds the renders of the embedded defaults, golden files the "
            "checkout tracks (CONTRIBUTING.md), and a configuration of your own (--config, --set or "
            f"BURNQED_SECTION__KEY) never overwrites them: {way}")


def _print_gpu_plans(docs: list[dict[str, Any]]) -> None:
    """The GPU memory plans the rendered sidecars carry (computed, and checked, while rendering)."""
    from burnqed.cluster.gpu_plan import rendered_plans

    for plan, users in rendered_plans(docs).items():
        shown = ", ".join(users[:4]) + (f" and {len(users) - 4} more" if len(users) > 4 else "")
        typer.echo(f"GPU memory plan of {shown}:\n{plan}")


@reports_errors
def submit(
    name: Annotated[str, typer.Argument(help="Workflow to submit: iteration, baseline, smoke or eval.")],
    iteration: Annotated[int, typer.Option("--iter", min=0, metavar="I",
                                           help="The expert iteration (workflows iteration, smoke).")] = 0,
    root: Annotated[
        str | None, typer.Option("--root", help="Run root URI (default: storage.root).", show_default=False)
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="URI", help="The policy model the eval and baseline workflows "
                                 "evaluate (a model folder's URI): the same as --param model=URI.",
                                 show_default=False)
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Workflow parameter NAME=VALUE (repeatable).", show_default=False),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be sent (YAML) and send nothing.")
    ] = False,
    from_template: Annotated[
        bool,
        typer.Option("--from-template", help="Submit the installed WorkflowTemplate (…/submit) instead of creating "
                     "the Workflow built from the local workflow files."),
    ] = False,
    server: Annotated[
        str | None, typer.Option("--server", help="Argo Server URL (else cluster.argo_server, ARGO_SERVER, "
                                 "kubeconfig).", show_default=False)
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Namespace (else ARGO_NAMESPACE, cluster.namespace).",
                                 show_default=False)
    ] = None,
    token_env: Annotated[
        str | None, typer.Option("--token-env", help="Environment variable holding the bearer token (default: "
                                 "cluster.argo_token_env, ARGO_TOKEN).", show_default=False)
    ] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Skip TLS verification of the Argo Server.")] = False,
    workflows: WorkflowsOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Submit a workflow to the Argo Server; prints the workflow's name and its link in the Argo UI. It renders from
    the namespace's ConfigMap, read through the kubeconfig (or a pod's service account) even with ARGO_SERVER set;
    --dry-run reads neither. A benchmark, data source or model at a path of this machine is refused first."""
    from burnqed.cluster.argo import resolve_namespace, resolve_target
    from burnqed.cluster.render import default_workflows_dir
    from burnqed.cluster.source import explicit_configuration
    from burnqed.cluster.submit import parameter_values, pods_configuration, prepare_submission, send

    cfg = configure(config, set_)
    check_pods_can_run(cfg, root)  # before the Argo Server or the ConfigMap is read
    ns = resolve_namespace(cfg.cluster, namespace, os.environ)
    target = None
    if not dry_run:  # render from the configuration the pods will read, or refuse (burnqed.cluster.source)
        cfg = pods_configuration(cfg, explicit_configuration(config, set_, os.environ), ns)
        target = resolve_target(cfg.cluster, server=server, namespace=ns, token_env=token_env, insecure=insecure,
                                environ=os.environ)
    submission = prepare_submission(cfg, name, namespace=ns, folder=workflows or default_workflows_dir(),
                                    iteration=iteration, parameters=parameter_values(param, root, model))
    if target is None:  # --dry-run
        typer.echo(submission.dry_run_text(from_template), nl=False)
        return
    workflow_name = send(submission, target, from_template=from_template)
    typer.echo(f"submitted {workflow_name} (namespace {target.namespace})")
    typer.echo(target.ui_link(workflow_name))


def check_pods_can_run(cfg: Config, root: str | None = None) -> None:
    """The refusals of `burnqed.cluster.podinputs` for the local configuration, before any work: an input no pod can
    open (`root`: the run root given, whose bucket the upload goes to), a setting without effect."""
    from burnqed.cluster.podinputs import check_effect, check_pod_inputs

    check_pod_inputs(cfg, root)
    check_effect(cfg)


@reports_errors
def fetch(
    uri: Annotated[str, typer.Argument(help="File or folder to download (s3://…, file://… or a path).")],
    dest: Annotated[str, typer.Argument(help="Local folder to fill (replaced atomically); not a URI.")],
    require_done: Annotated[
        bool, typer.Option("--require-done", help="Refuse an output without its completion marker.")
    ] = False,
    model_folder: Annotated[
        bool, typer.Option("--model-folder", help="Write the folder's tokenizer and config.json so that every "
                           "transformers major reads them alike (burnqed.policy.modelfolder), before the ready file.")
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Download an artifact into a local folder and write its ready file last (used by pods, e.g. for SGLang)."""
    from burnqed.base.uris import names_a_uri
    from burnqed.cluster.fetch import fetch as fetch_artifact
    from burnqed.errors import InputError

    if names_a_uri(dest):
        raise InputError(f"fetch DEST {dest!r}: a local folder to download into, not a URI")
    cfg, store = setup(config, set_)
    check_packages("fetch", cfg, model_folder=model_folder)
    report = fetch_artifact(uri, Path(dest), require_done=require_done, model_folder=model_folder, store=store)
    if report.skipped:
        typer.echo(f"{dest} already holds {uri}")
    else:
        typer.echo(f"fetched {uri} -> {dest} ({report.files} files, {report.bytes / 1e6:.1f} MB)")


cluster_app = typer.Typer(help="The cluster: check that a submit would run.", no_args_is_help=True, cls=Group)

VERDICT_STYLE = {"ok": "green", "missing": "bold red", "unknown": "yellow", "warn": "yellow", "not checked": "yellow"}


@cluster_app.command("check", cls=Command)
@reports_errors
def check(
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Namespace (else ARGO_NAMESPACE, cluster.namespace).",
                                 show_default=False)
    ] = None,
    server: Annotated[
        str | None, typer.Option("--server", help="Argo Server URL (else cluster.argo_server, ARGO_SERVER, the "
                                 "kubeconfig's API server proxy), as submit resolves it.", show_default=False)
    ] = None,
    token_env: Annotated[
        str | None, typer.Option("--token-env", help="Environment variable holding the Argo token (default: "
                                 "cluster.argo_token_env, ARGO_TOKEN).", show_default=False)
    ] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Skip TLS verification of the Argo Server.")] = False,
    from_template: Annotated[
        bool, typer.Option("--from-template", help="Require the installed WorkflowTemplates (submit "
                           "--from-template, argo submit); otherwise their absence is a warning.")
    ] = False,
    scale_from_zero: Annotated[
        bool, typer.Option("--scale-from-zero", help="No matching node now is only a warning: an autoscaler adds "
                           "nodes for pending pods.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON instead of a table.")] = False,
    workflows: WorkflowsOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Preflight: read the namespace through the Kubernetes API (kubeconfig or in-cluster) and list what a submit
    needs - ServiceAccount and executor token Secret, ConfigMaps, Secrets, PriorityClasses, WorkflowTemplates, nodes
    for the GPU and CPU selectors, the Argo Server and its auth mode - each miss with its fix. Without a usable
    kubeconfig but with the Argo Server given (--server, ARGO_SERVER, cluster.argo_server), the Argo checks run and
    the Kubernetes ones are listed as not checked, with why. Exit 0 only when a submit would run; 1 otherwise (or
    when neither can be reached); 2 for a bad configuration."""
    from burnqed.cluster.argo import resolve_namespace, resolve_target
    from burnqed.cluster.argocheck import probe_argo
    from burnqed.cluster.checkreport import report_json
    from burnqed.cluster.kube import connect
    from burnqed.cluster.kubereader import ClusterReader, KubeReader, NotRead
    from burnqed.cluster.preflight import CheckOptions, run_checks
    from burnqed.cluster.render import default_workflows_dir, render_templates
    from burnqed.cluster.source import explicit_configuration, load_text, read_config_map
    from burnqed.errors import ClusterError

    cfg = configure(config, set_)
    check_pods_can_run(cfg)  # before the cluster is read (the ConfigMap's configuration is checked when rendered)
    ns = resolve_namespace(cfg.cluster, namespace, os.environ)
    reader: ClusterReader
    prefix = "cannot read the cluster: "
    try:
        kube = connect(os.environ, prefix=prefix)
    except ClusterError as exc:
        if not (server or cfg.cluster.argo_server or os.environ.get("ARGO_SERVER")):
            raise  # the Argo Server would be reached through the kubeconfig too: nothing can be checked
        reader, source = NotRead(str(exc).removeprefix(prefix)), "no kubeconfig"
    else:
        reader, source = KubeReader(kube.api_client(), kube.host), kube.source
    explicit = explicit_configuration(config, set_, os.environ)
    if not explicit:  # check what the pods will run: the ConfigMap's configuration, when it loads
        with contextlib.suppress(BurnqedError):  # else its row says why
            cfg = load_text(read_config_map(reader, ns, cfg.cluster), f"ConfigMap {ns}/{cfg.cluster.config_map}")
    cfg = cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"namespace": ns})})
    expected = [doc.name for doc in render_templates(cfg, [], workflows or default_workflows_dir())]
    target = resolve_target(cfg.cluster, server=server, namespace=ns, token_env=token_env, insecure=insecure,
                            environ=os.environ)
    report = run_checks(
        cfg, reader, namespace=ns, argo=probe_argo(target), local_config=explicit,
        expected_templates=expected, options=CheckOptions(from_template=from_template, scale_from_zero=scale_from_zero),
        source=source,
    )
    if as_json:
        typer.echo(report_json(report))
    else:
        _print_report(report)
    if not report.ready:
        raise typer.Exit(1)


def _print_report(report: Report) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(soft_wrap=False)
    table = Table(title=f"burnqed cluster check - namespace {report.namespace}", title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail")
    for row in report.checks:
        style = VERDICT_STYLE[str(row.verdict)]
        table.add_row(escape(row.what), f"[{style}]{escape(str(row.verdict))}[/]", escape(row.detail))
    console.print(table)
    # fixes in full, one line each (a table would wrap the commands)
    for row in report.checks:
        if row.fix and row.verdict != "ok":
            typer.echo(f"{row.verdict.upper()} {row.what}: {row.detail}. Fix: {row.fix}")
    if report.ready:
        typer.echo("ready: a submit would run")
    else:
        unchecked = f", {len(report.not_checked)} not checked" if report.not_checked else ""
        typer.echo(f"not ready: {len(report.problems)} problem(s){unchecked}; a submit would not run")
