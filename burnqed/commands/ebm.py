"""`burnqed train-ebm` and `burnqed ebm embed | metrics`: the value model's commands (docs/ebm.md).

    burnqed train-ebm --trajectories runs/iter_0/trajectories --output runs/iter_1/ebm [--model DIR|URI]
                      [--init runs/iter_0/ebm] [--iter 1] [--cache URI] [--force]
    burnqed ebm embed --trajectories runs/iter_0/trajectories --cache runs/iter_1/ebm-cache   # warm the cache only
    burnqed ebm metrics runs/iter_1/ebm [--json]

Embeddings come from `--model` (default `policy.model`, else the tiny embedded model) in this process
(`ebm.encoder_backend = "local"`), or from `burnqed serve` at `ebm.encoder_url` ("serve"); `open_encoder` is also
how `burnqed search|eval --ebm` get theirs. A finished output made from other inputs is refused unless --force.
torch loads inside the commands: `burnqed --help` stays light.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from burnqed.base.cpu_kernels import cpu_threads
from burnqed.commands.kit import ConfigOption, SetOption, already_done, check_packages, reports_errors, setup
from burnqed.commands.vocabulary import OUTPUT_METAVAR, Command, Group, ModelOption, StartOption, model_set
from burnqed.errors import InputError
from burnqed.storage import Store

if TYPE_CHECKING:
    from burnqed.config import Config
    from burnqed.ebm.formats import EbmMetrics, EncoderIdentity, Snapshot
    from burnqed.policy.base import Encoder


ebm_app = typer.Typer(help="The value model: embedding cache and metrics (training is `burnqed train-ebm`).",
                      no_args_is_help=True, cls=Group)

TrajectoriesOption = Annotated[
    list[str],
    typer.Option("--trajectories", metavar="PREFIX", show_default=False,
                 help="Trajectory prefix to read (path or URI): the states to learn from. Repeatable."),
]
CacheOption = Annotated[
    str | None,
    typer.Option("--cache", help="Embedding cache (path or URI). Default: ebm.cache_uri, else OUTPUT-cache.",
                 show_default=False),
]


@asynccontextmanager
async def open_encoder(
    cfg: Config, model: str | None, *, store: Store
) -> AsyncIterator[tuple[Encoder, EncoderIdentity]]:
    """burnqed's encoder, ready, and its identity; closed on exit. The same code computes the vectors either way
    (`LocalModel.encode` with the `ebm` section's pooling, normalize and token limits):

    'local': `model` (a folder or URI; None = the tiny embedded model) loaded in this process on `ebm.device`,
    not shared with the policy's copy; the identity fingerprints the folder.
    'serve': `/encode` of `burnqed serve` at `ebm.encoder_url` (readiness on /health, the policy section's
    timeouts and retries); the identity is what the server reports on `GET /encoder_info` (the folder it loaded,
    fingerprinted by itself, and its settings), and those settings must be this configuration's (`ConfigError`
    otherwise). `model` is not used: the server's model is the one identified.
    """
    encoder: Encoder
    if cfg.ebm.encoder_backend == "local":
        from burnqed.ebm.encoder_identity import local_identity
        from burnqed.policy.localmodel import LocalModel
        from burnqed.policy.localpolicy import LocalEncoder, encode_options
        from burnqed.policy.modelpath import ensure_model

        folder = ensure_model(model, store=store)
        local = LocalEncoder(LocalModel.load(folder, device=cfg.ebm.device, seed=cfg.ebm.seed),
                             **encode_options(cfg.ebm), owns_model=True)
        try:
            identity = local_identity(model or str(folder), str(folder), local.spec)
        except BaseException:
            await local.close()
            raise
        encoder = local
    else:
        from burnqed.policy.sglang import SGLangClient

        url = cfg.ebm.encoder_url
        client = SGLangClient(
            url, name=model, request_timeout_s=cfg.policy.request_timeout_s,
            ready_timeout_s=cfg.policy.ready_timeout_s, retries=cfg.policy.retries, backoff_s=cfg.policy.backoff_s,
            breaker_failures=cfg.policy.breaker_failures, breaker_reset_s=cfg.policy.breaker_reset_s,
            max_inflight=cfg.policy.max_inflight_requests, wait_for_start=cfg.policy.wait_for_start,
            url_setting="ebm.encoder_url",
        )
        try:
            await client.wait_ready()
            identity = await _served_identity(client, cfg)
        except BaseException:
            await client.close()
            raise
        encoder = client
    try:
        yield encoder, identity
    finally:
        await encoder.close()


async def _served_identity(client: object, cfg: Config) -> EncoderIdentity:
    """The identity `burnqed serve` at `ebm.encoder_url` reports, checked against this configuration."""
    from burnqed.ebm.encoder_identity import served_identity
    from burnqed.errors import ConfigError
    from burnqed.policy.sglang import SGLangClient

    assert isinstance(client, SGLangClient)
    identity = served_identity(await client.describe_encoder(), client.url)
    ebm = cfg.ebm
    context = client.context_length
    expected = {"pooling": ebm.pooling, "normalize": ebm.normalize,
                "max_tokens": min(ebm.encoder_max_tokens, context) if context else identity.max_tokens}
    for name, value in expected.items():
        if getattr(identity, name) != value:
            raise ConfigError(
                f"the encoder at {client.url} embeds with {name}={getattr(identity, name)} but this configuration "
                f"says {value} (ebm.{'encoder_max_tokens' if name == 'max_tokens' else name}): start it with the "
                "same configuration"
            )
    return identity


def _device(name: str) -> str:
    from burnqed.policy.localmodel import resolve_device

    return resolve_device(name)


def _progress_printer(steps: int) -> Callable[[Snapshot], None]:
    """train-ebm's progress lines, every ebm.log_every steps, on stderr (stdout keeps the summary); the ETA counts
    from the call."""
    import time

    training_started = time.perf_counter()

    def progress(snap: Snapshot) -> None:
        if snap.split == "train":
            elapsed = time.perf_counter() - training_started
            eta = elapsed / snap.step * (steps - snap.step)
            typer.echo(f"train-ebm step {snap.step}/{steps} (ETA {eta:.0f}s): loss {snap.loss:.4f}, "
                       f"rank-1 {snap.rank1:.3f}, gap {snap.energy_gap:.3f}, T {snap.temperature:.3f}, "
                       f"{snap.samples_per_s or 0:.0f} groups/s", err=True)
        else:
            typer.echo(f"  held out: loss {snap.loss:.4f}, rank-1 {snap.rank1:.3f} over {snap.groups} groups, "
                       f"gap {snap.energy_gap:.3f}", err=True)

    return progress


@reports_errors
def train_ebm(
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                                      help="Output folder of the trained head (path or URI).")],
    trajectories: TrajectoriesOption,
    model: ModelOption = None,
    init: Annotated[
        str | None,
        typer.Option("--init", help="Previous iteration's EBM: resumed when it was trained on the same embedding "
                     "model, else training starts fresh (the reason is printed).", show_default=False),
    ] = None,
    start: StartOption = None,
    cache: CacheOption = None,
    iteration: Annotated[int, typer.Option("--iter", min=0, metavar="I",
                                           help="The expert iteration the metrics record.")] = 0,
    joint: Annotated[
        str | None,
        typer.Option("--joint", help="A jointly trained SFT output (sft.joint): publish its head instead of training "
                     "one, after checking that --model (its export) reproduces the embeddings it read.",
                     show_default=False),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Train again even if OUTPUT is already finished (made with "
                                        "the same inputs: reused; with others: refused).")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Train the value model (goal-conditioned energy head) on trajectories; publish head + metrics at OUTPUT.

    With --joint SFT the head trained jointly with the policy is published instead (no training): the metrics are
    measured on --model's embeddings of the trajectories, as for a trained head."""
    import time

    from burnqed.runner.request_inputs import train_ebm_request_inputs
    from burnqed.runner.requests import TrainEbmRequest

    started = time.perf_counter()
    cfg, store = setup(config, model_set(model, set_), output=output, folder=True, stage="train-ebm")
    check_packages("train-ebm", cfg)
    asked = TrainEbmRequest(iteration=iteration, trajectories=tuple(trajectories), model=model, joint=joint,
                            start=start, init=init, output=output)
    if start is not None:  # --start names the best value model so far (none: train afresh): it replaces --init
        from burnqed.eval.best_so_far import read_start

        init = read_start(start, store).value_model
    made_from = train_ebm_request_inputs(asked, cfg, store)
    if already_done(store, output, "train-ebm output", made_from=made_from, force=force):
        return
    from burnqed.data.theorems import check_training_inputs
    from burnqed.stages.train_ebm import TrainRequest, run_train_ebm

    decontaminated = check_training_inputs("train-ebm", cfg, store, trajectories=trajectories)  # refuses before work

    request = TrainRequest(output, trajectories, model=cfg.policy.model, init=init, cache=cache, iteration=iteration,
                           joint=joint, force=force, made_from=made_from)
    outcome = run_train_ebm(cfg, request, store=store, open_encoder=open_encoder, device=_device(cfg.ebm.device),
                            started=started, on_snapshot=_progress_printer(cfg.ebm.steps))
    if outcome.skipped or outcome.metrics is None:
        typer.echo(f"{output} was finished meanwhile by another run; nothing to do")
        return
    typer.echo(f"init: {outcome.init.reason if outcome.init else ''}")
    typer.echo(render_metrics(outcome.metrics), nl=False)
    typer.echo(decontaminated, err=True)  # with the results: a damaged input stays a refusal of one line
    typer.echo(f"wrote {output}")


def render_metrics(metrics: EbmMetrics) -> str:
    """A few plain-text lines: data, embedding throughput, training, held-out metrics, embedding health."""
    c, e = metrics.counts, metrics.embed
    lines = [
        f"data: {c.theorems} theorems ({c.proved_theorems} with positives), {c.states} states: {c.positives} "
        f"positive, {c.negatives} negative; anchors train {c.train_positives}, valid {c.valid_positives}",
        f"embeddings: {e.texts} texts, {e.cached} cached, {e.computed} encoded"
        + (f" at {e.states_per_s:.1f} states/s" if e.computed else "") + f" ({e.cache})",
        f"training: {metrics.steps} steps in {metrics.train_seconds:.1f}s ({metrics.train_samples_per_s:.0f} "
        f"groups/s), temperature {metrics.temperature:.3f}, stage {metrics.elapsed_s:.1f}s",
    ]
    for snap in (metrics.train, metrics.valid):
        if snap is None:
            continue
        depths = ", ".join(f"{b}: {v:.2f} ({snap.groups_by_depth[b]})" for b, v in snap.rank1_by_depth.items())
        lines.append(f"{snap.split}: loss {snap.loss:.4f}, rank-1 {snap.rank1:.3f} over {snap.groups} groups "
                     f"(by depth {depths}), energy gap {snap.energy_gap:.3f}")
    if metrics.valid is None:
        lines.append("valid: no held-out positive (more theorems or a larger ebm.valid_fraction)")
    probe = "n/a" if metrics.linear_probe_accuracy is None else f"{metrics.linear_probe_accuracy:.3f}"
    lines.append(f"embedding health: centroid L2 {metrics.centroid_l2:.3f}, linear probe {probe} "
                 f"({metrics.linear_probe_split})")
    return "\n".join(lines) + "\n"


@ebm_app.command("embed", cls=Command)
@reports_errors
def embed_command(
    trajectories: TrajectoriesOption,
    cache: Annotated[str, typer.Option("--cache", help="Embedding cache (path or URI) to fill.")],
    model: ModelOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Embed every state and goal of the trajectories into the cache (resumable; train-ebm then reuses it).

    Trajectories too small to train a value model on are embedded all the same (the cache is keyed by text, so a
    later train-ebm over more trajectories reuses them), with a warning saying why train-ebm would refuse them."""
    from burnqed.ebm.cache import EmbeddingCache, embed_dataset
    from burnqed.ebm.sampling import check_trainable, load_dataset

    cfg, store = setup(config, model_set(model, set_), output=cache, what="--cache", folder=True)
    data = load_dataset(trajectories, valid_fraction=cfg.ebm.valid_fraction, salt=cfg.data.split_salt, store=store,
                        trainable=False)
    if data.edges == 0:
        raise InputError(f"{', '.join(trajectories)} hold no edges: nothing to embed")
    try:
        check_trainable(data, trajectories)
    except InputError as exc:
        why = str(exc).rstrip(".")
        typer.echo(f"warning: train-ebm would refuse these trajectories alone ({why}); embedding them anyway", err=True)

    async def run() -> str:
        async with open_encoder(cfg, cfg.policy.model, store=store) as (encoder, identity):
            _, _, report = await embed_dataset(data, cfg.policy.prompt_format, encoder,
                                               EmbeddingCache(cache, identity, store=store), batch=cfg.ebm.encode_batch,
                                               chunk=cfg.ebm.cache_chunk)
            rate = f" at {report.states_per_s:.1f} states/s" if report.computed else ""
            return (f"{report.texts} texts: {report.cached} cached, {report.computed} encoded{rate} in "
                    f"{report.seconds:.1f}s -> {report.cache}")

    with cpu_threads(_device(cfg.ebm.device), cfg.ebm.cpu_threads):
        typer.echo(asyncio.run(run()))


@ebm_app.command("metrics", cls=Command)
@reports_errors
def metrics_command(
    uri: Annotated[str, typer.Argument(help="A train-ebm output (path or URI).", show_default=False)],
    json_out: Annotated[bool, typer.Option("--json", help="Print metrics.json as it is.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Print a trained value model's metrics."""
    from burnqed import storage
    from burnqed.ebm.formats import METRICS_FILE, EbmMetrics

    store = setup(config, set_).store
    metrics = store.read_model(storage.join(uri, METRICS_FILE), EbmMetrics, "EBM metrics")
    typer.echo(metrics.model_dump_json(indent=2) if json_out else render_metrics(metrics), nl=not json_out)
