"""rl.max_prompt_tokens: the rows whose whole prompt is longer, as TRL tokenizes it, are left out (and counted), so
the generation the cluster's GPU memory plan sizes (prompts_per_step × num_generations sequences of max_prompt_tokens
+ max_completion_tokens) is never exceeded; none left is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.errors import InputError
from burnqed.rl.grpo import fit_prompts


def test_prompts_longer_than_the_limit_are_left_out_and_counted(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = [{"prompt": "theorem a : 2 + 2 = 4 := by\n", "theorem": "a"},
            {"prompt": "theorem b : " + " + ".join(["1"] * 200) + " = 200 := by\n", "theorem": "b"}]
    lengths = [len(ids) for ids in tokenizer(text=[row["prompt"] for row in rows])["input_ids"]]
    assert lengths[0] < lengths[1]
    fitting, long = fit_prompts(rows, tokenizer, lengths[0])
    assert fitting == rows[:1] and long == 1
    assert fit_prompts(rows, tokenizer, lengths[1]) == (rows, 0)  # the limit itself fits
    with pytest.raises(InputError, match=rf"^every one of the 2 prompts is longer than rl.max_prompt_tokens = "
                                         rf"{lengths[0] - 1} tokens \(the shortest: {lengths[0]}\)"):
        fit_prompts(rows, tokenizer, lengths[0] - 1)
