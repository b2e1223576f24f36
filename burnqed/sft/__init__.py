"""Policy fine-tuning: `burnqed sft` and `burnqed export`, documented in docs/training.md.

    data.py          tactic pairs + trajectory positives → token rows with completion-only labels, packing
    model.py         base model resolution, full / LoRA / QLoRA models for training, tokenizer
    train.py         the SFT stage: TRL SFTTrainer, warm starts, progress lines, resume (`run_sft`)
    checkpoints.py   {output}-checkpoints: local folder, S3 sync, resume point, configuration fingerprint
    export.py        the export stage: fp32 LoRA merge, safetensors shards, generation check (`run_export`)
    records.py       sft.json and export.json

torch/transformers/trl/peft/datasets are imported inside functions: importing this package is cheap.
"""
