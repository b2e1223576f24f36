"""The run layout: the URI of every artifact of a run under its root, as the runners write them and the report
reads them back (`burnqed.pipeline` builds the stages on it). Pure: no I/O, nothing is contacted.

    at = Layout("s3://bucket/run")
    at.eval_result(2, with_ebm=False)        # "s3://bucket/run/iter_2/eval/eval-noebm.json"

Run layout (`{root}/iter_{i}/{stage}/`):

    iter_0/data/                       theorem index + tactic pairs + data report (iteration 0 only)
    iter_i/sft/                        fine-tuned policy (a model folder or a LoRA adapter)
    iter_i/export/                     merged model folder that SGLang and `burnqed serve` load
    iter_i/ebm/                        value model head + metrics (i ≥ 1)
    iter_i/search/shard-k/             trajectory shards; iter_0/search-noise/shard-k/ the noise pass
    iter_i/trajectories/               merged trajectories of the iteration
    iter_i/eval/eval.json              benchmark results (with the EBM when i ≥ 1)
    iter_i/eval/eval-noebm.json        the EBM ablation (i ≥ 1)
    iter_i/eval/eval-MODE.json         the benchmark in another search mode (pipeline.eval_modes)
    iter_0/eval-base/eval.json         the untrained base policy's eval (the raw baseline)
    iter_i/study/                      the joint study (sft.joint, i ≥ 1): a/{sft,export,ebm,eval.json},
                                       b/{ebm,eval.json}, metrics/study.json (burnqed.eval.joint_study)
    iter_i/report/                     report.md + plots
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Layout:
    """URIs of every artifact of a run (see the module docstring)."""

    root: str

    def iter_dir(self, i: int) -> str:
        return f"{self.root.rstrip('/')}/iter_{i}"

    def data(self) -> str:
        return f"{self.iter_dir(0)}/data"

    def sft(self, i: int) -> str:
        return f"{self.iter_dir(i)}/sft"

    def export(self, i: int) -> str:
        return f"{self.iter_dir(i)}/export"

    def ebm(self, i: int) -> str:
        return f"{self.iter_dir(i)}/ebm"

    def search_shard(self, i: int, shard: int | str, noise: bool = False) -> str:
        return f"{self.iter_dir(i)}/{'search-noise' if noise else 'search'}/shard-{shard}"

    def trajectories(self, i: int) -> str:
        return f"{self.iter_dir(i)}/trajectories"

    def eval_result(self, i: int, with_ebm: bool = True, mode: str | None = None) -> str:
        if mode is not None:
            return f"{self.iter_dir(i)}/eval/eval-{mode}.json"
        return f"{self.iter_dir(i)}/eval/{'eval' if with_ebm else 'eval-noebm'}.json"

    def eval_base(self) -> str:
        """The untrained base policy's eval result (iteration 0 only)."""
        return f"{self.iter_dir(0)}/eval-base/eval.json"

    def study(self, i: int, part: str) -> str:
        """An artifact of the joint study of iteration i (`burnqed.eval.joint_study`), e.g. 'a/export'."""
        return f"{self.iter_dir(i)}/study/{part}"

    def report(self, i: int) -> str:
        return f"{self.iter_dir(i)}/report"
