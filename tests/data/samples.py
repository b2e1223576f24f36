"""Small data files in each public source's own schema (column names from the datasets' cards), and the
replay corpus (`fixtures/corpus.json`) that knows their theorems, so converters and replay run offline."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from burnqed.config import LeanConfig
from burnqed.data.prepare import LeanOpener
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplayPool
from leankit.corpus import Corpus, load_corpus
from minilean.replay.replay_server import ReplayServer

CORPUS_PATH = Path(__file__).parent / "fixtures" / "corpus.json"
GUARD = TacticGuard.from_config(LeanConfig())
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
INDEX_HEADER = "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"  # the index keeps no imports

# internlm/Lean-Workbook (lean_workbook.json): a JSON array of problems.
LEAN_WORKBOOK: list[dict[str, Any]] = [
    {
        "natural_language_statement": "Solve $2x + 3 = 11$.",
        "answer": "4",
        "tags": ["algebra"],
        "formal_statement": f"{HEADER}\n\ntheorem lean_workbook_1 (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4 := by sorry",
        "split": "lean_workbook",
        "proof": ["theorem lean_workbook_1 (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4 := by\n  -- linear\n  linarith"],
        "id": "lean_workbook_1",
        "status": "proved",
    },
    {
        "natural_language_statement": "Prove $a^2 + b^2 \\ge 2ab$.",
        "answer": "",
        "tags": ["inequality"],
        "formal_statement": "theorem lean_workbook_2 (a b : ℝ) : a ^ 2 + b ^ 2 ≥ 2 * a * b := by sorry",
        "split": "lean_workbook_plus",
        "proof": [],
        "id": "lean_workbook_2",
        "status": "open",
    },
    {
        "natural_language_statement": "Prove something with a sorry.",
        "answer": "",
        "tags": [],
        "formal_statement": "theorem lean_workbook_3 (y : ℝ) (h : 0 < y) : 0 < y ^ 2 := by sorry",
        "split": "lean_workbook",
        "proof": ["have hy : 0 < y := h\n  sorry"],
        "id": "lean_workbook_3",
        "status": "proved",
    },
]

# Goedel-LM/Lean-workbook-proofs (parquet): problem_id, full_proof.
GOEDEL_PROOFS: list[dict[str, Any]] = [
    {   # the same theorem as lean_workbook_1 with another proof: merged into the earlier entry
        "problem_id": "lean_workbook_1",
        "full_proof": f"{HEADER}\n\n/-- 2x + 3 = 11 -/\n"
                      "theorem lean_workbook_1 (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4 := by\n  nlinarith [h₀]",
    },
    {   # a proof that fails to replay (the corpus records linarith failing here)
        "problem_id": "lean_workbook_2",
        "full_proof": f"{HEADER}\n\ntheorem lean_workbook_2 (a b : ℝ) : a ^ 2 + b ^ 2 ≥ 2 * a * b := by\n  linarith",
    },
]

NUMINA_SIGNATURE = "theorem number_theory_1 (n : ℕ) (h : n % 2 = 1) : n ^ 2 % 2 = 1"

# AI-MO/NuminaMath-LEAN (jsonl): one good row, one malformed line, one row without a statement.
NUMINA_ROWS: list[dict[str, Any] | str] = [
    {
        "uuid": "numina-0001",
        "problem": "Show that the square of an odd number is odd.",
        "question_type": "proof",
        "answer": "",
        "author": "human",
        "formal_statement": f"import Mathlib\n\n{NUMINA_SIGNATURE} := by sorry",
        "formal_ground_truth": f"import Mathlib\n\n{NUMINA_SIGNATURE} := by\n"
                               "  have h2 : n ^ 2 = n * n := by ring\n  rw [h2, Nat.mul_mod, h]",
        "ground_truth_type": "complete",
        "formal_proof": "",
        "rl_data": None,
        "source": "olympiads",
        "problem_type": "Number Theory",
        "exam": "",
    },
    '{"uuid": "numina-0002", "formal_statement": ',
    {"uuid": "numina-0003", "problem": "no statement", "formal_statement": None},
]

# miniF2F Lean 4, DeepSeek-Prover layout (jsonl): name, split, informal_prefix, formal_statement, goal, header.
MINIF2F: list[dict[str, Any]] = [
    {
        "name": "mathd_algebra_10",
        "split": "valid",
        "informal_prefix": "/-- If x + 1 = 2 then x = 1. -/\n",
        "formal_statement": "theorem mathd_algebra_10 (x : ℝ) (h₀ : x + 1 = 2) : x = 1 := by\n",
        "goal": "x : ℝ\nh₀ : x + 1 = 2\n⊢ x = 1",
        "header": HEADER,
        "formal_proof": "theorem mathd_algebra_10 (x : ℝ) (h₀ : x + 1 = 2) : x = 1 := by\n  linarith",
    },
    {
        "name": "mathd_numbertheory_3",
        "split": "test",
        "informal_prefix": "",
        "formal_statement": "theorem mathd_numbertheory_3 : (∑ x in Finset.range 10, (x + 1) ^ 2) % 10 = 5 := by\n",
        "goal": "⊢ (∑ x ∈ Finset.range 10, (x + 1) ^ 2) % 10 = 5",
        "header": HEADER,
    },
]

# internlm/Lean-Github (parquet, LeanDojo-traced): one theorem of two steps, one with a sorry step.
LEAN_GITHUB: list[dict[str, Any]] = [
    {"url": "https://github.com/example/repo", "commit": "abc123", "file_path": "Repo/Basic.lean",
     "full_name": "Repo.add_zero'", "start": "[10, 2]", "end": "[10, 9]", "tactic": "intro n",
     "state_before": "⊢ ∀ (n : ℕ), n + 0 = n", "state_after": "n : ℕ\n⊢ n + 0 = n"},
    {"url": "https://github.com/example/repo", "commit": "abc123", "file_path": "Repo/Basic.lean",
     "full_name": "Repo.add_zero'", "start": "[11, 2]", "end": "[11, 6]", "tactic": "simp",
     "state_before": "n : ℕ\n⊢ n + 0 = n", "state_after": "no goals"},
    {"url": "https://github.com/example/repo", "commit": "abc123", "file_path": "Repo/Basic.lean",
     "full_name": "Repo.cheater", "start": "[20, 2]", "end": "[20, 8]", "tactic": "intro p",
     "state_before": "⊢ ∀ (p : Prop), p", "state_after": "p : Prop\n⊢ p"},
    {"url": "https://github.com/example/repo", "commit": "abc123", "file_path": "Repo/Basic.lean",
     "full_name": "Repo.cheater", "start": "[21, 2]", "end": "[21, 7]", "tactic": "sorry",
     "state_before": "p : Prop\n⊢ p", "state_after": "no goals"},
]

# Tactic pairs in docs/data.md's format (jsonl).
PAIRS: list[dict[str, Any]] = [
    {"theorem": "custom_one", "source": "handmade", "state_before": "⊢ 1 + 1 = 2", "tactic": "norm_num",
     "state_after": "no goals", "depth": 0},
    {"theorem": "custom_test", "source": "handmade", "split": "test", "state_before": "⊢ 2 + 2 = 4",
     "tactic": "rfl", "state_after": "no goals", "depth": 0},
]

# Goedel-LM/Goedel-Pset-v1 (jsonl): statements only; the second restates lean_workbook_2 under another name.
GOEDEL_PSET: list[dict[str, Any]] = [
    {"problem_id": "goedel_pset_1", "informal_statement": "Prove 3 < 5.",
     "formal_statement": "import Mathlib\n\ntheorem goedel_pset_1 : (3 : ℕ) < 5 := by sorry"},
    {"problem_id": "goedel_pset_2", "informal_statement": "AM-GM for two reals.",
     "formal_statement": "theorem goedel_pset_2 (a b : ℝ) :\n    a ^ 2 + b ^ 2 ≥ 2 * a * b := by sorry"},
]


def write_json(path: Path, rows: Sequence[object]) -> Path:
    path.write_text(json.dumps(list(rows), ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: Sequence[dict[str, Any] | str]) -> Path:
    lines = [row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_parquet(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(list(rows)), path)
    return path


def write_all_sources(folder: Path) -> dict[str, Path]:
    """Every sample source as a file in its dataset's format."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "lean-workbook": write_json(folder / "lean_workbook.json", LEAN_WORKBOOK),
        "goedel-proofs": write_parquet(folder / "lean_workbook_proofs.parquet", GOEDEL_PROOFS),
        "numina-lean": write_jsonl(folder / "numina.jsonl", NUMINA_ROWS),
        "benchmark": write_jsonl(folder / "minif2f.jsonl", MINIF2F),
        "lean-github": write_parquet(folder / "lean-github.parquet", LEAN_GITHUB),
        "pairs": write_jsonl(folder / "pairs.jsonl", PAIRS),
        "goedel-pset": write_jsonl(folder / "goedel_pset.jsonl", GOEDEL_PSET),
    }


def sample_corpus() -> Corpus:
    return load_corpus(CORPUS_PATH)


def replay_opener(corpus: Corpus, size: int = 2, opened: list[int] | None = None) -> LeanOpener:
    """An `open_lean` for prepare_data over in-process replay workers; appends to `opened` when called."""

    @asynccontextmanager
    async def open_lean() -> AsyncIterator[tuple[WorkerPool, int]]:
        if opened is not None:
            opened.append(size)
        yield InProcessReplayPool(lambda: ReplayServer(corpus), size), size

    return open_lean
