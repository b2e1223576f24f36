"""`burnqed sft` and `burnqed export` as a user runs them (tests/processes.py `cli`) on the embedded defaults: the tiny
model, full fine-tuning on CPU, a prepared-data folder; then the export generates through `LocalModel`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from burnqed.policy.base import Sampling
from burnqed.policy.localmodel import LocalModel
from burnqed.policy.modelpath import default_model_dir
from burnqed.text.prompt import PromptFormat, build_prompt
from tests.processes import cli
from tests.sft.helpers import write_data_folder


@pytest.mark.slow
def test_sft_then_export_on_the_embedded_defaults(tmp_path: Path, tiny_model_dir: Path) -> None:
    home = {"BURNQED_HOME": str(tmp_path / "home")}
    # The default (tiny) model folder, already built: no --set sft.base_model anywhere below.
    shutil.copytree(tiny_model_dir, default_model_dir(home))
    data = write_data_folder(tmp_path / "run" / "iter_0" / "data")
    sft_out, export_out = tmp_path / "run" / "iter_0" / "sft", tmp_path / "run" / "iter_0" / "export"

    trained = cli("sft", "--iter", "0", "--data", str(data), "--output", str(sft_out),
                  "--set", "sft.max_steps=12", "--set", "sft.logging_steps=4", env=home)
    assert trained.returncode == 0, trained.stderr
    assert trained.stdout.startswith(f"sft iteration 0 (full) -> {sft_out}: 12 steps on ")
    progress = [line for line in trained.stderr.splitlines() if line.startswith("sft: step")]
    assert [line.split()[2] for line in progress if "tokens/s" in line] == ["4/12", "8/12", "12/12"]
    record = json.loads((sft_out / "sft.json").read_text(encoding="utf-8"))
    assert (record["method"], record["base_model"], record["steps"], record["prompt_format"]) == (
        "full", None, 12, "plain-tactic")

    exported = cli("export", "--sft", str(sft_out), "--output", str(export_out), env=home)
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()
    assert lines[0].startswith(f"exported {sft_out} (full) -> {export_out}: 153,600 params, float32, ")
    assert any(line.split()[0] == "model.safetensors" for line in lines[1:])
    assert lines[-1].startswith("  probe: ")

    model = LocalModel.load(export_out, device="cpu", seed=0)
    [[completion]] = model.generate([build_prompt(PromptFormat.PLAIN_TACTIC, "x : ℕ\n⊢ x + 0 = x")],
                                    Sampling(n=1, temperature=0.0, max_new_tokens=32, stop=("```",)))
    model.close()
    assert completion.n_tokens > 0 and completion.finish_reason in {"stop", "length"}

    again = cli("sft", "--iter", "0", "--data", str(data), "--output", str(sft_out), "--set", "sft.max_steps=12",
                env=home)  # logging_steps is a cadence, not an input
    assert again.returncode == 0 and again.stdout.startswith(f"reusing {sft_out} (finished ")
    assert again.stdout.strip().endswith(", same inputs); --force redoes it") and len(again.stdout.splitlines()) == 1
    other = cli("sft", "--iter", "0", "--data", str(data), "--output", str(sft_out), env=home)
    assert other.returncode == 2 and other.stderr == (
        f"error: {sft_out} is a finished sft output made with other inputs: sft.max_steps was 12, now 300; --force "
        "redoes it, or choose another --output\n")


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    missing = cli("sft", "--data", str(tmp_path / "nowhere"), "--output", str(tmp_path / "sft"), env={})
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"error: {tmp_path / 'nowhere'} does not exist"
    flags = cli("sft", "--iter", "1", "--data", str(tmp_path), "--output", str(tmp_path / "sft"), env={})
    assert flags.returncode == 2 and flags.stderr.startswith("error: iteration 1 mixes in trajectory positives")
    assert not (tmp_path / "sft").exists()
    (tmp_path / "notsft").mkdir()  # the option named is the one given: `export --sft`, not `--model`
    export = cli("export", "--sft", str(tmp_path / "notsft"), "--output", str(tmp_path / "export"), env={})
    assert (export.returncode, export.stderr) == (
        2, f"error: --sft {tmp_path / 'notsft'} has no sft.json: it is not the output of `burnqed sft`\n")
    assert not (tmp_path / "export").exists()


@pytest.mark.slow
def test_the_cli_module_stays_light() -> None:
    probe = ("import sys, burnqed.cli, burnqed.commands.train; "
             "print(sorted(m for m in ('torch', 'transformers', 'trl', 'peft', 'datasets') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"
