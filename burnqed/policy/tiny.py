"""The tiny embedded model: a Llama-shaped policy small enough to build offline in seconds on a CPU.

    burnqed model init-tiny --output DIR [--steps N] [--seed S] [--force]
    folder = ensure_model(None, store=store)  # the default one, built on first use (BURNQED_HOME)

A byte-level BPE tokenizer and a 2-layer Llama trained from its seed on the bundled corpus' train split plus the
pretraining families (`leankit.world.pretrain`): the base policy of the embedded defaults (docs/replay-corpus.md,
"The base policy"). The folder is built under a temporary name and renamed into place; processes that need it at
the same time wait on one file lock (`build_lock`). torch/transformers/tokenizers are imported inside the
functions: importing this module is cheap.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burnqed.base.cpu_kernels import cpu_threads
from burnqed.errors import InputError, ModelError, ModelInputError
from burnqed.policy.modelfolder import encode_texts, write_config, write_tokenizer
from burnqed.records.theorem import Theorem
from burnqed.storage import Store, expand_home, no_home_message, user_home
from burnqed.text.prompt import PromptFormat, build_completion, build_prompt
from leankit.corpus import Corpus, TheoremSpec, bundled_corpus_path, goal_pp, load_corpus

# transformers' annotations are partial (many methods are untyped under mypy --strict): its models and
# tokenizers are handled as Any here and in `local`.
HFModel = Any
HFTokenizer = Any

# v3: its tokenizer and config written by burnqed.policy.modelfolder (v2 saved transformers 5's own, which 4.57 cannot
# load); v2: trained on the bundled corpus plus the pretraining families (v1 knew the bundled corpus only). A new
# name for each, so that an older cached build is never taken for the default model.
TINY_NAME = "tiny-v3"
METADATA_FILE = "burnqed-model.json"
PROMPT_FORMAT = PromptFormat.PLAIN_TACTIC
DEFAULT_STEPS = 400
DEFAULT_SEED = 0

BOS_TOKEN = "<|bos|>"
EOS_TOKEN = "<|eos|>"
PAD_TOKEN = "<|pad|>"
VOCAB_SIZE = 1024  # a cap: BPE saturates near 650 on the default training data (every word becomes one token)
HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
INTERMEDIATE = 192
MAX_POSITIONS = 2048

BATCH_SIZE = 16
PEAK_LR = 1e-2  # high for a transformer, right for ~140k parameters trained for a few hundred steps
WARMUP_STEPS = 20
WEIGHT_DECAY = 0.01

# Any of these (besides a tokenizer) makes a folder loadable as a model.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
MAX_SIBLINGS = 10_000  # folders looked at for a "did you mean": a typo beside a huge folder still fails at once


@dataclass(frozen=True, slots=True)
class TinyBuild:
    """What `build_tiny_model` did; `summary` is the one line the CLI prints."""

    path: Path
    steps: int
    seed: int
    initial_loss: float
    final_loss: float
    params: int
    pairs: int
    seconds: float

    @property
    def summary(self) -> str:
        return (
            f"built tiny model in {self.path}: {self.steps} steps on {self.pairs} pairs, "
            f"loss {self.initial_loss:.2f}→{self.final_loss:.2f}, {self.params:,} params, {self.seconds:.1f}s"
        )


# ------------------------------------------------------------------------------------------ data


def training_pairs(corpus: Corpus, split: str = "train") -> list[tuple[str, str]]:
    """(prompt, completion) pairs of the recorded successful transitions of one split, in corpus order.

    Prompts are what search sends: under the theorem's declaration (`Theorem.declaration()`, binder form), with
    the recorded proofs run from where the theorem starts (its binder-start goal, `TheoremSpec.start_goal`) and
    states along them the whole goal list; transitions off the proof paths use their own goal. Completions carry
    the stop marker but no EOS (the trainer adds it).
    """
    pairs: dict[tuple[str, str], None] = {}
    for theorem in corpus.theorems:
        if theorem.split != split:
            continue
        declaration = Theorem.from_recorded(theorem).declaration()
        for state, tactic in _theorem_transitions(theorem):
            pairs[(build_prompt(PROMPT_FORMAT, state, declaration), build_completion(PROMPT_FORMAT, tactic))] = None
    return list(pairs)


def _theorem_transitions(theorem: TheoremSpec) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for proof in theorem.binder_proofs():
        goals = [theorem.start_goal()]
        for tactic in proof:
            found.append(("\n\n".join(goal_pp(theorem.goals[g]) for g in goals), tactic))
            transition = theorem.lookup(goals[0], tactic)
            if transition is None or transition.result is None:  # load_corpus validated every proof
                break
            goals = [*transition.result, *goals[1:]]
    for transition in theorem.transitions:
        if transition.result is not None:
            found.append((goal_pp(theorem.goals[transition.goal]), transition.tactic))
    return found


def default_training_corpus() -> tuple[Corpus, str, str]:
    """The base model's default training data: the bundled corpus followed by the pretraining families; with its
    name and the sha256 of both (the bundled file's bytes, then the generated corpus' canonical JSON)."""
    from leankit.world import world_json
    from leankit.world.pretrain import pretraining_corpus

    bundled, pretrain = load_corpus(), pretraining_corpus()
    digest = hashlib.sha256(bundled_corpus_path().read_bytes() + b"\0" + world_json(pretrain).encode())
    corpus = Corpus(name=f"{bundled.name}+{pretrain.name}", theorems=[*bundled.theorems, *pretrain.theorems])
    return corpus, corpus.name, "sha256:" + digest.hexdigest()


def corpus_digest(path: Path) -> str:
    """sha256 over the corpus file (or every `*.json` of a corpus folder, by name)."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


# ------------------------------------------------------------------------------------- tokenizer


def train_tokenizer(texts: list[str]) -> HFTokenizer:
    """A byte-level BPE tokenizer trained on `texts`, BOS added by a template post-processor."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(  # type: ignore[no-untyped-call,unused-ignore]  # untyped in tokenizers 0.23.2
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=[PAD_TOKEN, BOS_TOKEN, EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    bos_id = tokenizer.token_to_id(BOS_TOKEN)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A {BOS_TOKEN} $B", special_tokens=[(BOS_TOKEN, bos_id)]
    )
    wrapper: Any = PreTrainedTokenizerFast
    return wrapper(
        tokenizer_object=tokenizer, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN,
        padding_side="left", model_max_length=MAX_POSITIONS,
    )


# ------------------------------------------------------------------------------------------ model


def _new_model(tokenizer: HFTokenizer, seed: int) -> HFModel:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    # fork_rng: seeding must not disturb the caller's global RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)  # type: ignore[no-untyped-call,unused-ignore]  # untyped in transformers 5.19
    return model


def _encode_pairs(tokenizer: HFTokenizer, pairs: list[tuple[str, str]]) -> list[tuple[list[int], int]]:
    """(token ids, prompt length) per pair. Prompt and completion are tokenized separately, exactly
    as generation sees them: the prompt (with BOS) is given, the completion is produced token by token."""
    prompts = encode_texts(tokenizer, [p for p, _ in pairs])
    completions = tokenizer([c for _, c in pairs], add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    return [([*p, *c, eos], len(p)) for p, c in zip(prompts, completions, strict=True)]


def _batches(examples: list[tuple[list[int], int]], generator: Any) -> list[list[int]]:
    """One epoch of batches (example indices): shuffled, then sorted by length within windows of a few
    batches so a batch pads little, then the batch order shuffled again."""
    import torch

    order = torch.randperm(len(examples), generator=generator).tolist()
    window = BATCH_SIZE * 4
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: len(examples[i][0]))
        batches.extend(chunk[i : i + BATCH_SIZE] for i in range(0, len(chunk), BATCH_SIZE))
    shuffled = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffled]


def _train(model: HFModel, examples: list[tuple[list[int], int]], pad_id: int, steps: int, seed: int,
           label: str) -> tuple[float, float]:
    """Full fine-tuning with AdamW, completion-only loss. Returns (first loss, mean of the last 10)."""
    import torch
    import torch.nn.functional as F

    from burnqed.base.progress import progress_bar

    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=PEAK_LR, weight_decay=WEIGHT_DECAY, betas=(0.9, 0.98))

    def lr_at(step: int) -> float:
        if step < WARMUP_STEPS:
            return (step + 1) / WARMUP_STEPS
        progress = (step - WARMUP_STEPS) / max(1, steps - WARMUP_STEPS)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    model.train()
    losses: list[float] = []
    queue: list[list[int]] = []
    with progress_bar(label, total=steps) as advance:
        for _ in range(steps):
            if not queue:
                queue = _batches(examples, generator)
            batch = [examples[i] for i in queue.pop()]
            width = max(len(ids) for ids, _ in batch)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            targets = torch.zeros((len(batch), width), dtype=torch.bool)  # position t predicts token t + 1
            for row, (ids, prompt_len) in enumerate(batch):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                mask[row, : len(ids)] = 1
                targets[row, prompt_len - 1 : len(ids) - 1] = True
            hidden = decoder(input_ids=input_ids, attention_mask=mask).last_hidden_state
            # The LM head only at supervised positions: the prompt is most of every row.
            logits = head(hidden[targets])
            labels = torch.roll(input_ids, -1, dims=1)[targets]
            loss: Any = F.cross_entropy(logits.float(), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            losses.append(float(loss.detach()))
            advance(1)
    model.eval()
    tail = losses[-10:]
    return losses[0], sum(tail) / len(tail)


# ------------------------------------------------------------------------------------------ build


def build_tiny_model(
    output: Path,
    *,
    steps: int = DEFAULT_STEPS,
    seed: int = DEFAULT_SEED,
    corpus: Path | None = None,
    force: bool = False,
) -> TinyBuild:
    """Build the tiny model into `output` (atomically). Refuses a non-empty `output` unless `force`."""
    if steps < 1:
        raise InputError(f"--steps must be at least 1, got {steps}")
    output = Path(output).expanduser().absolute()
    _check_target(output, force)
    started = time.monotonic()
    if corpus is None:
        source, label, digest = default_training_corpus()
    else:
        source, label, digest = load_corpus(corpus), corpus.name, corpus_digest(corpus)
    pairs = training_pairs(source)
    if not pairs:
        raise InputError(f"corpus {label} has no successful transitions in its train split to learn from")

    # One thread: these matrices are too small to split, and a second thread competing with other
    # work on a 2-core machine made each step ten times slower (measured).
    with cpu_threads("cpu", 1):
        tokenizer = train_tokenizer([text for pair in pairs for text in pair])
        model = _new_model(tokenizer, seed)
        examples = _encode_pairs(tokenizer, pairs)
        initial_loss, final_loss = _train(model, examples, tokenizer.pad_token_id, steps, seed, "training tiny model")
    params = sum(p.numel() for p in model.parameters())
    seconds = time.monotonic() - started
    metadata: dict[str, Any] = {
        "name": TINY_NAME,
        "prompt_format": str(PROMPT_FORMAT),
        "seed": seed,
        "steps": steps,
        "initial_loss": round(initial_loss, 6),
        "final_loss": round(final_loss, 6),
        "params": params,
        "pairs": len(pairs),
        "corpus": label,
        "corpus_digest": digest,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    # A plain mkdir (not mkdtemp, which makes it 0700): the published folder gets the usual permissions.
    staging = output.parent / f".{output.name}.building-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        quiet_transformers()
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        # The folder is read by the serving image's transformers too: one reading for both majors.
        write_tokenizer(staging, staging)
        write_config(staging / "config.json")
        (staging / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        # safetensors writes 0600; give every file the umask-derived mode of the files we wrote.
        mode = (staging / METADATA_FILE).stat().st_mode & 0o777
        for file in staging.iterdir():
            file.chmod(mode)
        _publish(staging, output, force)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return TinyBuild(output, steps, seed, initial_loss, final_loss, params, len(pairs), seconds)


def _check_target(output: Path, force: bool) -> None:
    if output.exists() and not output.is_dir():
        raise InputError(f"--output {output} is a file; give a folder")
    if output.is_dir() and any(output.iterdir()):
        if not (output / METADATA_FILE).is_file():
            raise InputError(f"--output {output} is not empty and is not a tiny model folder (it has no "
                             f"{METADATA_FILE}), so it cannot be replaced, not even with --force: choose another "
                             "folder")
        if not force:
            raise InputError(f"--output {output} holds a tiny model init-tiny built; pass --force to replace it")


def _publish(staging: Path, output: Path, force: bool) -> None:
    """Rename the finished folder into place. An existing non-empty folder is replaced only with `force`, and only
    when it holds nothing but the files a build writes, with the build's metadata (it is moved aside first and
    looked at there, so there is no moment without a complete model under the final name, and a file written into
    it meanwhile is never deleted)."""
    if output.is_dir() and not any(output.iterdir()):
        output.rmdir()
    if not output.exists():
        try:
            staging.rename(output)
            return
        except OSError:
            if not output.is_dir():
                raise
            # Another process published the same folder between our check and the rename.
    if not force:
        raise InputError(f"--output {output} is not empty; pass --force to replace it")
    built = {path.name for path in staging.iterdir()}
    aside = output.parent / f".{output.name}.old-{uuid.uuid4().hex[:12]}"
    output.rename(aside)
    foreign = sorted(path.name for path in aside.iterdir() if path.name not in built or path.is_dir())
    if foreign or not (aside / METADATA_FILE).is_file():
        aside.rename(output)
        shown = ", ".join(foreign[:3]) or f"no {METADATA_FILE}"
        raise InputError(f"--output {output} holds files a tiny model build does not write ({shown}): --force "
                         "replaces only a folder init-tiny built, never other files; nothing was replaced")
    staging.rename(output)
    shutil.rmtree(aside, ignore_errors=True)


# ------------------------------------------------------------------------------------ model folders


def quiet_transformers() -> None:
    """Silence transformers' own progress bars (loading/writing shards): burnqed reports progress itself."""
    from transformers.utils import logging as hf_logging

    disable: Any = hf_logging.disable_progress_bar
    disable()


def default_model_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the default tiny model lives: `$BURNQED_HOME/models/tiny-v3`, else the user cache ($XDG_CACHE_HOME, else
    ~/.cache); InputError (one line) when that is under a home directory there is none of."""
    env = os.environ if environ is None else environ
    if env.get("BURNQED_HOME"):
        base = expand_home(env["BURNQED_HOME"], env)
        folder = None if base is None else base / "models" / TINY_NAME
    elif env.get("XDG_CACHE_HOME"):
        folder = Path(env["XDG_CACHE_HOME"]) / "burnqed" / "models" / TINY_NAME
    else:
        home = user_home(env)
        folder = None if home is None else home / ".cache" / "burnqed" / "models" / TINY_NAME
    if folder is None:
        raise InputError(no_home_message("the default tiny model") + ", or give policy.model")
    return folder


def missing_model_files(path: Path) -> list[str]:
    """What a folder lacks to be loadable as a model: [] when it has a config, weights and a tokenizer."""
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        missing.append("weights (" + " or ".join(WEIGHT_FILES) + ")")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        missing.append("a tokenizer (" + " or ".join(TOKENIZER_FILES) + ")")
    return missing


def no_model_folder(folder: Path, given: str | None = None) -> str:
    """Why `folder` (a model path a user gave) names no folder: a file, a parent missing too, or a typo; a folder
    beside it with a close name is suggested (`did you mean …?`). Never a suggestion to build a model there: a
    mistyped path is not where anybody wants one. `given` is the path as the user wrote it when `folder` is its
    absolute form: the paths in the message are then written as the user would (relative to the same place)."""
    def shown(path: Path) -> str:
        return _as_given(path, folder, given)

    if folder.exists():
        return f"model folder {shown(folder)} is a file, not a folder"
    missing = folder
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    if missing != folder:
        return f"model folder {shown(folder)}: no such folder ({shown(missing)} does not exist)"
    close = _close_name(folder.name, _subfolders(folder.parent))
    if close is None:
        return f"model folder {shown(folder)}: no such folder"
    return f"model folder {shown(folder)} does not exist; did you mean {shown(folder.parent / close)}?"


def _as_given(path: Path, folder: Path, given: str | None) -> str:
    """`path` (at or above `folder`, or beside it) written relative to where the relative path `given` (of which
    `folder` is the absolute form) starts; absolute when `given` is absolute, climbs out with `..` or is not known."""
    written = Path(os.path.normpath(given)) if given else None
    if written is None or written.is_absolute() or written.parts[:1] == ("..",) or written == Path("."):
        return str(path)
    base = folder.parents[len(written.parts) - 1]
    return os.path.relpath(path, base)


def not_a_model_folder(folder: Path, missing: list[str]) -> str:
    """Why `folder` (an existing folder a user gave as a model) is not one, and the model folder inside it if there
    is one (a parent folder given for its model: `runs/iter_0` for `runs/iter_0/export`)."""
    inside = next((name for name in sorted(_subfolders(folder)) if not missing_model_files(folder / name)), None)
    hint = f"; did you mean {folder / inside}?" if inside is not None else "; it is not a model folder"
    return f"model folder {folder} is missing {', '.join(missing)}{hint}"


def _subfolders(parent: Path) -> list[str]:
    try:
        return [entry.name for entry in itertools.islice(parent.iterdir(), MAX_SIBLINGS) if entry.is_dir()]
    except OSError:
        return []


def _close_name(name: str, candidates: list[str]) -> str | None:
    """The candidate a typo of `name` most likely meant (case ignored; a swap of two letters is close), or None."""
    lowered = {candidate.lower(): candidate for candidate in candidates}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return lowered[close[0]] if close else None


def ensure_model(path: str | None, environ: Mapping[str, str] | None = None, *, store: Store) -> Path:
    """The model folder to load: `path` if it holds a model (else `ModelInputError`: exit 2), or with `path=None`
    the default tiny model, built on first use (one line on stderr, then training progress). A URI `path` is
    read through `store` (downloaded once into its cache)."""
    if path is not None:
        if not path.strip():  # `--set policy.model=$MODEL` with MODEL unset: not the current folder
            raise ModelInputError("the model path is empty (policy.model, sft.base_model or --model): give a model "
                                  "folder, or leave it unset for the tiny embedded model")
        if "://" in path:  # a URI (file://, s3://): a local folder or a cached download
            path = str(store.local_input(path))
        folder = Path(os.path.abspath(os.path.expanduser(path)))  # relative to where the command started
        if not folder.is_dir():
            raise ModelInputError(no_model_folder(folder, os.path.expanduser(path)))
        missing = missing_model_files(folder)
        if missing:
            raise ModelInputError(not_a_model_folder(folder, missing))
        return folder
    folder = default_model_dir(environ)
    if _built(folder):
        return folder
    env = os.environ if environ is None else environ
    if int(env.get("WORLD_SIZE", "1")) > 1:  # transformers' save_pretrained writes on process 0 only
        raise ModelError(f"the default tiny model is not built in {folder}, and a process under torchrun cannot "
                         "build it: run `burnqed model init-tiny` first (the command that launches torchrun builds "
                         "it before it launches)")
    where = "BURNQED_HOME" if env.get("BURNQED_HOME") else "the user cache (XDG_CACHE_HOME or ~/.cache)"
    try:  # before the 20 s of training: a read-only or file BURNQED_HOME is one line up front, not a traceback after
        store.check_writable(str(folder), what=f"the default model folder (under {where})", folder=True)
    except InputError as exc:
        raise InputError(f"{exc}; or set BURNQED_HOME to a writable folder, or give policy.model") from None
    # Several stages may need it at once (iterate runs eval-base and sft side by side): one builds, the others wait
    # for it and read its model, instead of each spending the build's CPU on the same folder.
    with build_lock(folder):
        if _built(folder):  # built by the process we waited for
            return folder
        print(f"building the tiny embedded model in {folder} (first use, about 20 s)", file=sys.stderr, flush=True)
        try:
            build = build_tiny_model(folder)
        except InputError:
            if not _built(folder):
                raise
            return folder  # published meanwhile by a build that takes no lock (`model init-tiny --output` there)
    print(build.summary, file=sys.stderr, flush=True)
    return folder


def _built(folder: Path) -> bool:
    """True when the default model folder holds a model; False when there is none yet; `ModelError` for a folder
    with some of a model's files but not all (damaged: it is never built over)."""
    if not (folder.is_dir() and any(folder.iterdir())):
        return False
    missing = missing_model_files(folder)
    if missing:
        raise ModelError(
            f"the default model folder {folder} is missing {', '.join(missing)}; rebuild it with "
            f"`burnqed model init-tiny --output {folder} --force`"
        )
    return True


@contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of building `folder`: an exclusive `flock` on `.NAME.lock` beside it, waited for (with one line
    on stderr) while another process holds it. The kernel releases it when its holder exits however it exits, so a
    builder killed mid-build never blocks the next one, and since a build publishes by rename, it leaves no half-built
    folder either. The lock file stays: removing it could let two processes lock two different files."""
    import fcntl

    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process building the tiny embedded model in {folder}", file=sys.stderr,
                  flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

