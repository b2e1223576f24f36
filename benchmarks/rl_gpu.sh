#!/usr/bin/env bash
# The GRPO stage's rollout engines on one GPU: rl.rollout_engine 'continuous' against 'trainer' on a model of
# DeepSeek-Prover-V2-7B's shape with random bf16 weights (benchmarks/rl.py --model 7b), LoRA, every completion run to
# the limit (--full-length), one step per engine and length, the same SFT output, prompts and seeds for both: at 1,024
# completion tokens with 8 prompts × 8 completions (64 sequences, where TRL says continuous batching pays), then at
# 4,096 with 4 × 4 (16 sequences: 64 would not fit the GPU). Sized for one run of about 500 s on an H200: the setup
# about 90 s, then the runs in this order; a run still going DEADLINE_S (480) s after the start is stopped and its row
# says so (at 4,096 tokens HF `generate` needs about 4,096 × 70 ms, so the trainer's row there may be that bound).
#
#     bash benchmarks/rl_gpu.sh --prepare   # here first: .whl/ (below), from constraints.txt's pins and .venv
#     bash benchmarks/rl_gpu.sh     # on the device, in the repository root, .whl/ carried; OUT=folder, DEADLINE_S=s,
#                                   # RUNS="TOKENS:PROMPTS:GROUP ..." (default "1024:8:8 4096:4:4"), ROLLOUTS=a,b,
#                                   # PARALLEL=1: the engines of a run at the same time, each in its own process on
#                                   # the one GPU (when the device time cannot hold them one after the other; each
#                                   # sees the other's kernels and CPU load: say so beside the figures),
#                                   # REUSE_SFT=1: the first run too takes the SFT output an earlier call left in
#                                   # /tmp/rl-gpu (a second call on the same warm machine, one engine per call)
#
# Needs python3 with torch (CUDA), peft, accelerate, huggingface_hub, tokenizers, safetensors, pandas, pyarrow,
# psutil, httpx, rich, fsspec, xxhash (the device image's), and in .whl/ the wheels of what it lacks or holds at
# another version (trl 1.16.0, transformers 5.19.0 (constraints.txt's pin; the image has 5.17), datasets 5.2.0, dill,
# multiprocess, pydantic, pydantic_core, annotated_types, typing_inspection, lark, typer: the image's predates the
# vocabulary's `type_descriptor`), installed into /tmp/site, with
# .whl/tiny (the tiny model: the 7B's tokenizer) and .whl/data (`burnqed data prepare` of the embedded corpus, made on
# CPU: the device lacks z3, which the replay needs). Writes to $OUT: rl-TOKENS.json (benchmarks/rl.py's rows),
# rl-TOKENS.log (its output) and runs.log (the machine, the packages, the end of each sft and rl run's own log);
# with PARALLEL=1 rl-TOKENS-ENGINE.json and .log per engine and gpu-TOKENS.log (memory used, utilisation, each 10 s).
# docs/benchmarks.md, "rl_gpu.sh"; figures: docs/results.md.
set -uo pipefail
if [ "${1:-}" = --prepare ]; then  # here, not on the device: .whl/ from constraints.txt's pins, the tiny model, data
    mkdir -p .whl
    names=(trl transformers datasets dill multiprocess pydantic pydantic_core annotated-types typing-inspection
           typing_extensions lark typer)
    pins=()
    for name in "${names[@]}"; do pins+=("$(grep -i "^${name}==" constraints.txt)") || exit 1; done
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "${pins[@]}" || exit 1
    rm -rf .whl/tiny .whl/data
    cp -r "$(.venv/bin/python -c 'from burnqed.policy.tiny import default_model_dir; print(default_model_dir())')" \
        .whl/tiny || exit 1
    .venv/bin/burnqed data prepare --output .whl/data || exit 1
    du -sh .whl
    exit 0
fi
OUT="${OUT:-/tmp/rl-gpu-out}"
mkdir -p "$OUT"
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 BURNQED_HOME=/tmp/burnqed-home TOKENIZERS_PARALLELISM=false
work=/tmp/rl-gpu
mkdir -p "$work"
[ -d "$work/data" ] || cp -r .whl/data "$work/data"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/runs.log"
python3 -c "import torch, transformers, trl, peft; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'trl', trl.__version__, 'peft', peft.__version__)" 2>&1 | tee -a "$OUT/runs.log"
deadline="${DEADLINE_S:-480}"
left() { echo $((deadline - ($(date +%s) - start))); }
first=1
for run in ${RUNS:-1024:8:8 4096:4:4}; do
    IFS=: read -r tokens prompts group <<< "$run"
    budget=$(left)
    [ "$budget" -gt 30 ] || { echo "no time left for $run" | tee -a "$OUT/runs.log"; break; }
    reuse=$([ "$first" = 1 ] && [ "${REUSE_SFT:-0}" != 1 ] || echo --reuse-sft)
    first=0
    common=(--work "$work" --model 7b --tiny .whl/tiny --steps 1 --sft-steps 1 --full-length
            --set rl.max_completion_tokens="$tokens" --set rl.max_prompt_tokens=128
            --set rl.prompts_per_step="$prompts" --set rl.num_generations="$group")
    if [ "${PARALLEL:-0}" = 1 ]; then  # the SFT output once, then each engine in its own process at the same time
        python3 benchmarks/rl.py "${common[@]}" $reuse --rollouts "" 2>&1 | tee "$OUT/rl-$tokens-sft.log"
        budget=$(left)
        export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # two processes' caches on one card
        for engine in $(echo "${ROLLOUTS:-continuous,trainer}" | tr , ' '); do
            python3 benchmarks/rl.py "${common[@]}" --reuse-sft --rollouts "$engine" --deadline-s "$budget" \
                --json "$OUT/rl-$tokens-$engine.json" > "$OUT/rl-$tokens-$engine.log" 2>&1 &
        done
        while [ -n "$(jobs -rp)" ]; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader \
            >> "$OUT/gpu-$tokens.log"; sleep 10; done
        wait
        cat "$OUT"/rl-"$tokens"-*.log
    else
        python3 benchmarks/rl.py "${common[@]}" $reuse --rollouts "${ROLLOUTS:-continuous,trainer}" \
            --deadline-s "$budget" --json "$OUT/rl-$tokens.json" 2>&1 | tee "$OUT/rl-$tokens.log"
    fi
    for log in "$work"/sft-7b.log "$work"/rl-7b-*.log; do
        [ -f "$log" ] && { echo "== $run: $log"; tail -c 4000 "$log"; } >> "$OUT/runs.log"
    done
done
echo "done in $(($(date +%s) - start)) s"
