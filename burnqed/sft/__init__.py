"""Policy fine-tuning: `burnqed sft` and `burnqed export`, documented in docs/training.md.

    data.py          tactic pairs + trajectory positives → token rows with completion-only labels, packing
    model.py         base model resolution, full / LoRA / QLoRA models for training, tokenizer
    train.py         the SFT stage: the one trainer (TRL's SFTTrainer), warm starts, progress lines, resume (`run_sft`)
    joint.py         joint training's hook in that trainer: the value model's head, its loss term and monitoring
    launch.py        data-parallel processes: the torchrun launch, each process's place, collectives
    checkpoints.py   {output}-checkpoints: local folder, S3 sync, resume point, the keys that shape training
    export.py        the export stage: fp32 LoRA merge, safetensors shards, generation check (`run_export`); gap.py
                     the QLoRA merge gap it measures; manifests.py: sft.json and export.json
torch/transformers/trl/peft/datasets are imported inside functions: importing this package is cheap.
"""
