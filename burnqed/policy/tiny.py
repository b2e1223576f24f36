"""The tiny embedded model: a Llama-shaped policy small enough to build offline in seconds on a CPU.

    burnqed model init-tiny --output DIR [--steps N] [--seed S] [--force]

A byte-level BPE tokenizer and a 2-layer Llama trained from its seed on the bundled corpus' train split plus the
pretraining families (`leankit.world.pretrain`): the base policy of the embedded defaults (docs/replay-corpus.md,
"The base policy"). The folder is built under a temporary name and renamed into place; the default one is built on
first use by `modelpath.ensure_model`. torch/transformers/tokenizers are imported inside the functions: importing
this module is cheap.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burnqed.base.cpu_kernels import cpu_threads
from burnqed.errors import InputError
from burnqed.policy.modelfolder import encode_texts, write_config, write_tokenizer
from burnqed.records.theorem import Theorem
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


# ------------------------------------------------------------------------------------- transformers


def quiet_transformers() -> None:
    """Silence transformers' own progress bars (loading/writing shards): burnqed reports progress itself."""
    from transformers.utils import logging as hf_logging

    disable: Any = hf_logging.disable_progress_bar
    disable()
