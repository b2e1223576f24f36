"""Training data of `burnqed sft` (docs/training.md, "Data"): tactic pairs and trajectory positives, proof and
repair examples → token rows with completion-only labels. What the trajectories teach is read by `sft.examples`
(`read_positives` and the like); here the prepared data's pairs and proofs, the mix, the token rows and the collator.

    base = read_base_pairs(data_dir)                       # the prepared-data folder's pairs.parquet
    whole = read_base_proofs(data_dir, base, DeclarationForm.BINDER)  # a whole proof per theorem, from its pairs
    mix = mix_pairs(base, positives, iteration=1, base_subsample=10000, positive_upsample=10,
                    eval_fraction=0.1, seed=0, base_proofs=whole)  # train / held-out pairs
    rows = encode_pairs(tokenizer, fmt, mix.train)          # prompt ids + completion ids + EOS, labels
    dataset, stats = build_dataset(rows, max_length=512, packing=True, seed=0)
    batch = PackedRowsCollator(tokenizer.pad_token_id)([dataset[0], dataset[1]])

Every prompt is the one the search sends (`burnqed.text.prompt`); prompt and completion are tokenized separately.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from burnqed.data.pairs import THEOREMS_FILE, TacticPair, read_pairs
from burnqed.errors import InputError, ModelError
from burnqed.policy.modelfolder import encode_texts
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import pretty_state
from burnqed.records.theorem import TheoremIndex, stable_split
from burnqed.search.answer import AnswerSlot
from burnqed.storage import read_json_model
from burnqed.text.completion import join_tactics
from burnqed.text.feedback import Feedback
from burnqed.text.prompt import (
    PromptFormat,
    build_completion,
    build_prompt,
    build_repair_prompt,
    build_sketch_prompt,
    build_statement_prompt,
    format_for,
    repair_format,
    sketch_format,
)
from burnqed.text.sketch import sketch_of_proof

IGNORE_INDEX = -100


BASE = "base"


TRAJECTORY = "trajectory"


SUBGOAL = "subgoal"  # a subgoal a sketch search proved, trained as a theorem of its own


EVAL_SALT = "burnqed-sft-eval"


ENCODE_CHUNK = 1024


HFTokenizer = Any  # transformers tokenizers are untyped under mypy --strict


Dataset = Any  # datasets.Dataset


EvalSource = Literal["valid-split", "hashed-train", "none"]


Variant = Literal["tactic", "proof", "whole", "repair", "sketch"]


_VARIANT_MODE: dict[str, SearchMode] = {"tactic": SearchMode.STEP, "proof": SearchMode.HYBRID,
                                        "whole": SearchMode.WHOLE}


@dataclass(frozen=True, slots=True)
class SftPair:
    """One supervised example; `origin` is BASE, TRAJECTORY or SUBGOAL (a proved subgoal of a sketch search:
    `theorem` is the theorem whose sketch it was; `declaration` the theorem's from the subgoal's state, the
    subgoal's own in its whole example).

    `variant` is what the prompt shows and the completion holds: "tactic" (state_before → one tactic), "proof"
    (state_before → the rest of a proof), "whole" (the theorem's declaration and `header` → the whole proof body;
    state_before is the root state, which the prompt does not show), "repair" (a failed proof and Lean's messages on
    it, `feedback` as the trajectory row holds it, at place `revision` of its chain → a whole proof body), "sketch"
    (the theorem's declaration and `header` → a sketch: the planner's prompt, `build_sketch_prompt`).
    `declaration` is the theorem's declaration exactly as the search's prompts showed it
    (`records.theorem.Theorem.declaration`, recorded in each search result; for base pairs read from the prepared
    data's theorem index): None shows an anonymous `example`."""

    theorem: str
    state_before: str
    tactic: str
    origin: str = BASE
    variant: Variant = "tactic"
    header: str | None = None
    declaration: str | None = None
    feedback: str | None = None
    revision: int = 0

    def prompt(self, fmt: PromptFormat) -> tuple[PromptFormat, str]:
        """The format of this example in the family of `fmt`, and its prompt (what the search sends)."""
        if self.variant == "repair":
            repair = repair_format(fmt)
            feedback = Feedback.from_json(self.feedback or "")
            return repair, build_repair_prompt(repair, self.declaration or "", self.header, feedback,
                                               round_=self.revision)
        if self.variant == "sketch":
            sketch = sketch_format(fmt)
            return sketch, build_sketch_prompt(sketch, self.declaration or "", self.header)
        variant = format_for(fmt, _VARIANT_MODE[self.variant])
        if self.variant == "whole":
            return variant, build_statement_prompt(variant, self.declaration or "", self.header)
        return variant, build_prompt(variant, self.state_before, self.declaration)


@dataclass(frozen=True, slots=True)
class SftMix:
    """Training and held-out pairs, with the counts that go into sft.json."""

    train: list[SftPair]
    eval: list[SftPair]
    base_pairs: int
    positives: int
    positive_upsample: int
    positives_held_out: int
    eval_source: EvalSource
    proof_examples: int = 0  # distinct proof-format examples among the positives
    repair_examples: int = 0  # distinct repair examples among the positives
    sketch_examples: int = 0  # distinct sketch examples (iteration 0: the base proofs' sketches that train)
    subgoal_examples: int = 0  # distinct examples of proved subgoals as theorems, among the positives
    subgoals_skipped: int = 0  # proved subgoals no declaration can state (`text.sketch.Unrenderable`): no example


@dataclass(frozen=True, slots=True)
class EncodedPair:
    """Token ids of prompt + completion (+ EOS) and the labels: IGNORE_INDEX on the prompt."""

    input_ids: list[int]
    labels: list[int]

    @property
    def prompt_length(self) -> int:
        return sum(1 for label in self.labels if label == IGNORE_INDEX)


@dataclass(frozen=True, slots=True)
class DatasetStats:
    """What `build_dataset` kept."""

    examples: int
    too_long: int
    rows: int
    tokens: int
    supervised_tokens: int


# ------------------------------------------------------------------------------------------ pairs


def read_declarations(data_dir: Path, form: DeclarationForm) -> dict[str, str]:
    """The declaration of every theorem of the prepared data's theorem index, in `form`: what the search's prompts
    show for it (a theorem without a statement has none). Empty when the folder holds no index."""
    path = data_dir / THEOREMS_FILE
    if not path.is_file():
        return {}
    index = read_json_model(path, TheoremIndex, "theorem index", defaults={"name": data_dir.name or "data"})
    return {t.name: decl for t in index.theorems if (decl := t.declaration(form)) is not None}


def read_base_proofs(data_dir: Path, base: Sequence[TacticPair], form: DeclarationForm) -> list[SftPair]:
    """A "whole" example per theorem of the prepared data whose tactic pairs hold a replayed proof of it: the
    declaration (in `form`) and header of its index entry → the tactics of that proof, joined as search's verified
    proofs are (docs/training.md, "Proof formats"). The proof is the chain of pairs from depth 0, each one's
    `state_before` the state the one before left, to a tactic that leaves no goals (`no goals`, or an empty state),
    the first such chain in the file's order (the theorem's first replayed proof); a theorem without one (pairs
    without `state_after`, a recorded proof cut short), without a statement, or whose answer is open (its whole
    prompt is another) gives none."""
    path = data_dir / THEOREMS_FILE
    if not path.is_file():
        return []
    index = read_json_model(path, TheoremIndex, "theorem index", defaults={"name": data_dir.name or "data"})
    by_theorem: dict[str, list[TacticPair]] = {}
    for pair in base:
        by_theorem.setdefault(pair.theorem, []).append(pair)
    closed = {pretty_state(()), ""}  # Lean's text of no goals; corpus pairs (`corpus_pairs`) write it empty
    examples: list[SftPair] = []
    for theorem in index.theorems:
        declaration = theorem.declaration(form)
        pairs = by_theorem.get(theorem.name, [])
        if declaration is None or AnswerSlot(theorem).open or not pairs:
            continue
        tactics = _replayed_proof(pairs, closed)
        if tactics:
            examples.append(SftPair(theorem.name, "", join_tactics(tactics, indent=""), BASE, "whole", theorem.header,
                                    declaration))
    return examples


def _replayed_proof(pairs: Sequence[TacticPair], closed: set[str]) -> list[str] | None:
    """The tactics of the first chain of `pairs` (one theorem's, in file order) from depth 0 to no goals, or None."""
    following: dict[tuple[int, str], TacticPair] = {}
    for pair in pairs:
        following.setdefault((pair.depth, pair.state_before), pair)
    for start in (pair for pair in pairs if pair.depth == 0):
        tactics, pair = [start.tactic], start
        while pair.state_after is not None and pair.state_after not in closed:
            step = following.get((pair.depth + 1, pair.state_after))
            if step is None:
                break
            tactics.append(step.tactic)
            pair = step
        if pair.state_after in closed:
            return tactics
    return None


def read_base_pairs(data_dir: Path) -> list[TacticPair]:
    """The prepared-data folder's tactic pairs (all splits); InputError when missing, malformed or empty."""
    if not data_dir.exists():
        raise InputError(f"data folder {data_dir} does not exist (run `burnqed data prepare` first)")
    pairs = read_pairs(data_dir)
    if not pairs:
        raise InputError(f"data folder {data_dir} holds no tactic pairs")
    return pairs


Rows = dict[tuple[str, str], dict[int, tuple[int, str, str]]]  # (run id, theorem) → node → (parent, state, tactic)


def base_sketches(proofs: Sequence[SftPair]) -> list[SftPair]:
    """A sketch example per replayed proof of the prepared data (`read_base_proofs`'s "whole" examples) whose top-level
    haves make a sketch (`text.sketch.sketch_of_proof`): the same declaration and header → that sketch."""
    return [SftPair(proof.theorem, "", sketch.body, BASE, "sketch", proof.header, proof.declaration)
            for proof in proofs if (sketch := sketch_of_proof(proof.tactic)) is not None]


def mix_pairs(
    base: Sequence[TacticPair],
    positives: Sequence[SftPair],
    *,
    iteration: int,
    base_subsample: int,
    positive_upsample: int,
    eval_fraction: float,
    seed: int,
    declarations: Mapping[str, str] | None = None,
    base_proofs: Sequence[SftPair] = (),
    base_sketch_examples: Sequence[SftPair] = (),
) -> SftMix:
    """Training and held-out pairs for `iteration`.

    Iteration 0: every base pair of the train split, and the `base_proofs` (`read_base_proofs`, given when proof
    examples train) and `base_sketch_examples` (`base_sketches`, given when sketch examples train) of the theorems
    that train. Iteration ≥ 1: `base_subsample` base train pairs (seeded sample; all
    when fewer) plus each positive `positive_upsample` times. Held out: the base `valid` split, or when there is
    none, `eval_fraction` of the train theorems by stable hash. Test-split pairs are never used. `declarations`
    (`read_declarations`) gives each base pair's theorem the declaration its search prompts show.
    """
    shown = declarations or {}
    has_valid = any(pair.split == "valid" for pair in base)

    def held_out(pair: TacticPair) -> bool:
        if has_valid:
            return pair.split == "valid"
        return pair.split == "train" and stable_split(pair.theorem, eval_fraction, EVAL_SALT) == "valid"

    train_base = [_from_tactic_pair(p, shown) for p in base if p.split == "train" and not held_out(p)]
    eval_pairs = [_from_tactic_pair(p, shown) for p in base if held_out(p)]
    eval_source: EvalSource = "valid-split" if has_valid else ("hashed-train" if eval_pairs else "none")
    closed = {pair.theorem for pair in eval_pairs} | {pair.theorem for pair in base if pair.split == "test"}
    kept_positives = [pair for pair in positives if pair.theorem not in closed]
    training = {pair.theorem for pair in train_base}
    whole = [pair for pair in base_proofs if pair.theorem in training]
    sketches = [pair for pair in base_sketch_examples if pair.theorem in training]
    if iteration == 0:
        train = [*train_base, *whole, *sketches]
    else:
        rng = random.Random(seed)
        sampled = train_base if base_subsample >= len(train_base) else rng.sample(train_base, base_subsample)
        train = [*sampled, *(pair for pair in kept_positives for _ in range(positive_upsample))]
        rng.shuffle(train)
    return SftMix(
        train=train,
        eval=eval_pairs,
        base_pairs=sum(1 for pair in train if pair.origin == BASE and pair.variant == "tactic"),
        positives=sum(1 for pair in kept_positives if pair.variant == "tactic" and pair.origin != SUBGOAL)
        if iteration else 0,
        positive_upsample=positive_upsample,
        positives_held_out=len(positives) - len(kept_positives),
        eval_source=eval_source,
        proof_examples=sum(1 for pair in kept_positives if pair.variant in ("proof", "whole")
                           and pair.origin != SUBGOAL) if iteration else len(whole),
        repair_examples=sum(1 for pair in kept_positives if pair.variant == "repair") if iteration else 0,
        sketch_examples=sum(1 for pair in kept_positives if pair.variant == "sketch") if iteration else len(sketches),
        subgoal_examples=sum(1 for pair in kept_positives if pair.origin == SUBGOAL) if iteration else 0,
    )


def _from_tactic_pair(pair: TacticPair, declarations: Mapping[str, str]) -> SftPair:
    return SftPair(pair.theorem, pair.state_before, pair.tactic, BASE, declaration=declarations.get(pair.theorem))


# ------------------------------------------------------------------------------------------ tokens


def encode_pairs(tokenizer: HFTokenizer, fmt: PromptFormat, pairs: Sequence[SftPair]) -> list[EncodedPair]:
    """Token rows of `pairs` in the variants of `fmt`'s family: the prompt's ids (BOS by the folder's rule), then
    the completion's tokenized alone, its stop marker and EOS, labels -100 on the prompt (docs/training.md); a pair
    repeated by upsampling is tokenized once."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ModelError("the tokenizer has no EOS token: the model could never learn to stop; use a model "
                         "whose tokenizer defines eos_token")
    texts: dict[SftPair, tuple[str, str]] = {}
    for pair in pairs:
        key = _key(pair)
        if key not in texts:
            variant, prompt = key.prompt(fmt)
            texts[key] = (prompt, build_completion(variant, pair.tactic))
    unique = list(texts)
    encoded: dict[SftPair, EncodedPair] = {}
    for start in range(0, len(unique), ENCODE_CHUNK):
        chunk = unique[start : start + ENCODE_CHUNK]
        prompts = encode_texts(tokenizer, [texts[key][0] for key in chunk])
        completions = tokenizer([texts[key][1] for key in chunk], add_special_tokens=False)["input_ids"]
        for key, prompt_ids, completion_ids in zip(chunk, prompts, completions, strict=True):
            target = list(completion_ids)
            # Chat formats carry EOS as text (tokenized to the EOS id); plain formats get the tokenizer's EOS.
            if not target or target[-1] != eos:
                target.append(eos)
            encoded[key] = EncodedPair([*prompt_ids, *target], [IGNORE_INDEX] * len(prompt_ids) + target)
    return [encoded[_key(pair)] for pair in pairs]


def _key(pair: SftPair) -> SftPair:
    """What an example's text depends on (not its theorem or origin)."""
    return SftPair("", pair.state_before, pair.tactic, BASE, pair.variant, pair.header, pair.declaration,
                   pair.feedback, pair.revision)


def build_dataset(rows: Sequence[EncodedPair], *, max_length: int, packing: bool,
                  seed: int) -> tuple[Dataset, DatasetStats]:
    """A `datasets.Dataset` of `input_ids`, `labels`, `seq_lengths` (one length per example in the row).

    Rows longer than `max_length` are dropped. With `packing`, examples are shuffled (seeded) and packed
    best-fit-decreasing into rows of at most `max_length` tokens; without, one example per row.
    """
    from datasets import Dataset as HFDataset
    from trl.data_utils import pack_dataset

    kept = [row for row in rows if len(row.input_ids) <= max_length]
    columns: dict[str, list[list[int]]] = {
        "input_ids": [row.input_ids for row in kept],
        "labels": [row.labels for row in kept],
    }
    dataset: Any = HFDataset.from_dict(columns)
    if packing and kept:
        dataset = pack_dataset(dataset.shuffle(seed=seed), max_length, "bfd")
    else:
        dataset = dataset.add_column("seq_lengths", [[len(row.input_ids)] for row in kept])
    stats = DatasetStats(
        examples=len(kept),
        too_long=len(rows) - len(kept),
        rows=len(dataset),
        tokens=sum(len(row.input_ids) for row in kept),
        supervised_tokens=sum(len(row.labels) - row.prompt_length for row in kept),
    )
    return dataset, stats


# --------------------------------------------------------------------------------------- collator


@dataclass
class PackedRowsCollator:
    """Collates packed rows into a batch with no cross-example attention (docs/training.md, "Packing").

    Returns `input_ids` and `labels` (B × longest row, right-padded with `pad_token_id` / IGNORE_INDEX) and
    `position_ids` restarting at 0 for every example (0 on padding, so each pad token is alone). No attention
    mask: its absence is what makes transformers derive the per-row block-diagonal mask from the position ids.
    The label of every example's first token (BOS) is IGNORE_INDEX, so no example is predicted from the
    previous one.
    """

    pad_token_id: int

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        import torch

        width = max(len(row["input_ids"]) for row in rows)
        input_ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            n = len(row["input_ids"])
            lengths: Iterable[int] = row.get("seq_lengths") or [n]
            input_ids[i, :n] = torch.as_tensor(row["input_ids"], dtype=torch.long)
            labels[i, :n] = torch.as_tensor(row["labels"], dtype=torch.long)
            positions[i, :n] = torch.cat([torch.arange(length) for length in lengths])
        labels[positions == 0] = IGNORE_INDEX
        return {"input_ids": input_ids, "labels": labels, "position_ids": positions}
