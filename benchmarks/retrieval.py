"""The rename-and-replay retrieval baseline: what a prover that learns nothing solves by reusing proofs.

    .venv/bin/python benchmarks/retrieval.py --root RUN_ROOT --world-seed S [--eval RUN_ROOT/iter_1/eval/eval.json]

Every known proof of a training theorem (iteration 0's SFT data and search) is tried on every test theorem of the
run's eval, its binder names renamed to the test theorem's and checked as the search checks a proof
(docs/benchmarks.md, "retrieval.py"). Writes `RUN_ROOT/retrieval/retrieval.json` and prints the solve rate;
`benchmarks/learning.py` runs it for every seed and compares it with iteration 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import Config  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from leankit.declaration import binder_names  # noqa: E402
from leankit.statements import split_leading_binders  # noqa: E402

RESULT_FILE = "retrieval.json"
# A Lean identifier's pieces as tactic text spells them: letters (Greek, ℝ-like symbols excluded by isalpha),
# digits, subscripts, `_`, `'`, `!`, `?`. A name preceded by `.` is a field or namespace part, never a binder.
_IDENT = re.compile(r"(?<![\w'.])[^\W\d][\w'!?]*")


@dataclass(frozen=True, slots=True)
class SourceProof:
    """A training proof: the theorem it proves and its tactics from the binder-form start."""

    theorem: Theorem
    tactics: tuple[str, ...]
    origin: str  # "sft" (iteration 0's training data) or "search" (found by iteration 0's search)


def binder_list(theorem: Theorem) -> list[str]:
    """The names the theorem's binder-form start puts in context (its signature's, else its leading ∀ binders)."""
    if theorem.signature is not None:
        binders = theorem.signature.rsplit(" : ", 1)[0] if " : " in theorem.signature else ""
    elif theorem.statement is not None:
        binders = split_leading_binders(theorem.statement)[0]
    else:
        return []
    return [name for name in binder_names(binders) if name != "_"]


def renaming(source: Sequence[str], target: Sequence[str]) -> dict[str, str]:
    """Source binder name → target binder name, position by position over the shorter list."""
    return {old: new for old, new in zip(source, target, strict=False) if old != new}


def rename_tactics(tactics: Iterable[str], names: Mapping[str, str]) -> list[str]:
    """Every whole identifier of `tactics` that `names` maps is replaced by its image, all at once (a ↔ b swaps)."""
    if not names:
        return list(tactics)
    return [_IDENT.sub(lambda m: names.get(m.group(), m.group()), tactic) for tactic in tactics]


def sft_proofs(data_dir: Path, world_seed: int) -> list[SourceProof]:
    """The recorded proofs of iteration 0's training theorems (train and valid splits of its data folder)."""
    from leankit.corpus import load_corpus
    from leankit.world.checked import embedded_world

    index = json.loads((data_dir / "theorems.json").read_text(encoding="utf-8"))
    trained = {row["name"]: Theorem.model_validate(row) for row in index["theorems"]
               if row.get("split") in ("train", "valid")}
    recorded: dict[str, list[list[str]]] = {t.name: t.proofs for t in embedded_world(world_seed).theorems}
    recorded.update({t.name: t.binder_proofs() for t in load_corpus().theorems})
    return [SourceProof(theorem, tuple(proof), "sft")
            for name, theorem in trained.items() for proof in recorded.get(name, []) if proof]


def search_proofs(run_root: Path) -> list[SourceProof]:
    """The proofs iteration 0's search found (its merged trajectories), on the theorems of its data index."""
    from burnqed.config import load_config
    from burnqed.storage import Store
    from burnqed.trajectory.reader import read_results

    index = json.loads((run_root / "iter_0" / "data" / "theorems.json").read_text(encoding="utf-8"))
    theorems = {row["name"]: Theorem.model_validate(row) for row in index["theorems"]}
    store = Store.from_config(load_config().storage)
    results = read_results(str(run_root / "iter_0" / "trajectories"), store=store)
    return [SourceProof(theorems[r.name], tuple(r.tactics), "search")
            for r in results if r.proved and r.tactics and r.name in theorems]


def candidates(target: Theorem, sources: Sequence[SourceProof]) -> dict[str, SourceProof]:
    """Distinct renamed proof texts for `target` (text → the first source giving it)."""
    from burnqed.lean.soundness import assemble_proof

    out: dict[str, SourceProof] = {}
    wanted = binder_list(target)
    for source in sources:
        tactics = rename_tactics(source.tactics, renaming(binder_list(source.theorem), wanted))
        text = assemble_proof(target, tactics)
        if text is not None and text not in out:
            out[text] = source
    return out


async def _solve_all(cfg: Config, targets: Sequence[Theorem], sources: Sequence[SourceProof],
                     parallel: int) -> dict[str, dict[str, Any]]:
    from burnqed.lean.pool import LeanPool
    from burnqed.lean.soundness import check_proof_text

    solved: dict[str, dict[str, Any]] = {}
    queue: asyncio.Queue[Theorem] = asyncio.Queue()
    for target in targets:
        queue.put_nowait(target)
    async with LeanPool.from_config(cfg.lean, size=1, theorems_per_worker=parallel) as pool:

        async def worker() -> None:
            while not queue.empty():
                target = queue.get_nowait()
                async with pool.lease(target.name) as lean:
                    for text, source in candidates(target, sources).items():
                        verdict = await check_proof_text(lean, target.name, text, index_header=target.header)
                        if verdict.ok:
                            solved[target.name] = {"from": source.theorem.name, "origin": source.origin,
                                                   "proof": text}
                            break

        await asyncio.gather(*(worker() for _ in range(parallel)))
    return solved


def run_baseline(run_root: Path, world_seed: int, eval_path: Path, parallel: int = 2) -> dict[str, Any]:
    """Try every renamed training proof on every theorem of `eval_path`'s benchmark; write and return the result."""
    from burnqed.config import load_config
    from burnqed.data.index import embedded_index

    names = [row["name"] for row in json.loads(eval_path.read_text(encoding="utf-8"))["per_theorem"]]
    by_name = {t.name: t for t in embedded_index("test", world_seed).theorems}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise SystemExit(f"{eval_path}: {len(missing)} theorems are not in the embedded test index of world seed "
                         f"{world_seed} (first: {missing[0]}); give the seed the run used")
    sources = [*sft_proofs(run_root / "iter_0" / "data", world_seed), *search_proofs(run_root)]
    cfg = load_config(sets=[f"data.world_seed={world_seed}", f"lean.verifier_workers={max(1, parallel)}"])
    started = time.monotonic()
    solved = asyncio.run(_solve_all(cfg, [by_name[name] for name in names], sources, parallel))
    result = {"world_seed": world_seed, "eval": str(eval_path), "total": len(names), "solved": len(solved),
              "sources": {"sft": sum(s.origin == "sft" for s in sources),
                          "search": sum(s.origin == "search" for s in sources)},
              "wall_s": time.monotonic() - started, "proofs": dict(sorted(solved.items()))}
    out = run_root / "retrieval" / RESULT_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="run root (holds iter_0/data, iter_0/trajectories)")
    parser.add_argument("--world-seed", type=int, required=True, help="data.world_seed of the run")
    parser.add_argument("--eval", type=Path, default=None, help="eval.json naming the test theorems "
                        "(default: ROOT/iter_1/eval/eval.json)")
    parser.add_argument("--parallel", type=int, default=2, help="test theorems checked at once")
    args = parser.parse_args(argv)
    eval_path = args.eval or args.root / "iter_1" / "eval" / "eval.json"
    for needed in (eval_path, args.root / "iter_0" / "data" / "theorems.json", args.root / "iter_0" / "trajectories"):
        if not needed.exists():
            print(f"{needed} does not exist: run iterations 0 and 1 first", file=sys.stderr)
            return 2
    result = run_baseline(args.root, args.world_seed, eval_path, args.parallel)
    print(f"retrieval baseline: {result['solved']}/{result['total']} "
          f"({100 * result['solved'] / max(1, result['total']):.1f} %) from {result['sources']} proofs "
          f"in {result['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
