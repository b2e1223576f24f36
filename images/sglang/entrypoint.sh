#!/usr/bin/env bash
# burnqed's GPU sidecar entrypoint (images/sglang/Dockerfile). Waits for the model folder that `burnqed fetch` fills
# (its ready file is written last), then serves it with SGLang's native API. With EMBED_PORT set it first starts
# burnqed's encoder for the value model (`burnqed serve --encode-only`) on the same GPU and waits until it is healthy:
# the encoder loads its weights, caps its allocator at ENCODER_MEMORY_GIB and runs its largest batch before /health
# turns 200, so SGLang, started next, measures the memory that is really left (its --mem-fraction-static is a share
# of the memory free when it starts). The workflows compute MEM_FRACTION and ENCODER_MEMORY_GIB with the GPU memory
# plan (burnqed/cluster/gpu_plan.py, docs/cluster.md).
#
#   MODEL_DIR=/models/policy PORT=30000 MEM_FRACTION=0.833 burnqed-sglang [extra sglang.launch_server args]
#   MEM_FRACTION=0.785 EMBED_PORT=30001 ENCODER_MEMORY_GIB=16.32 ENCODER_BATCH_TOKENS=16384 burnqed-sglang
#
# Environment (default):
#   MODEL_DIR (/models/policy)            the model folder SGLang and the encoder load (SGLang needs a local folder)
#   READY_FILE ($MODEL_DIR/.burnqed-ready) written last by `burnqed fetch`
#   WAIT_TIMEOUT_S (3600), POLL_S (2)     how long / how often to look for it
#   HOST (127.0.0.1), PORT (30000)        SGLang (loopback: only the pod's main container uses it)
#   MEM_FRACTION (0.85)                   its --mem-fraction-static
#   EMBED_PORT (unset)                    the encoder's port; unset = no encoder
#   ENCODER_COMMAND (burnqed)             the burnqed executable of the encoder's environment (/opt/burnqed/bin/burnqed)
#   ENCODER_MEMORY_GIB (unset)            `--memory-gib`: the encoder's GPU memory cap (weights + workspace)
#   ENCODER_BATCH_TOKENS (unset)          `--set ebm.encode_batch_tokens=…`: its largest batch (the cap is sized on it)
#   HEALTH_TIMEOUT_S (1800)               how long the encoder may take to answer /health with 200
#   SGLANG_PYTHON (python3)               the interpreter with sglang; PROBE_PYTHON (python3) polls /health
# The encoder reads the ebm.* encoder settings from BURNQED_CONFIG (the same ConfigMap as train-ebm's), so both
# embed alike; search refuses a value model whose encoder identity differs anyway.
# SGLANG_RETURN_ORIGINAL_LOGPROB=1 is always exported: burnqed's search needs log-probs before temperature.
# Exit status: 1 when the ready file never appears or the encoder never gets healthy; otherwise that of the first
# server to exit (the other one is stopped). SIGTERM / SIGINT stop both servers (status 143).
set -uo pipefail

MODEL_DIR="${MODEL_DIR:-/models/policy}"
READY_FILE="${READY_FILE:-$MODEL_DIR/.burnqed-ready}"
WAIT_TIMEOUT_S="${WAIT_TIMEOUT_S:-3600}"
POLL_S="${POLL_S:-2}"
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-30000}"
MEM_FRACTION="${MEM_FRACTION:-0.85}"
EMBED_PORT="${EMBED_PORT:-}"
ENCODER_COMMAND="${ENCODER_COMMAND:-burnqed}"
ENCODER_MEMORY_GIB="${ENCODER_MEMORY_GIB:-}"
ENCODER_BATCH_TOKENS="${ENCODER_BATCH_TOKENS:-}"
HEALTH_TIMEOUT_S="${HEALTH_TIMEOUT_S:-1800}"
SGLANG_PYTHON="${SGLANG_PYTHON:-python3}"
PROBE_PYTHON="${PROBE_PYTHON:-python3}"
export SGLANG_RETURN_ORIGINAL_LOGPROB=1

pids=()

log() { echo "burnqed-sglang: $*" >&2; }

stop_servers() {
    local pid
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    wait
}

on_signal() {
    log "stopping"
    stop_servers
    exit 143
}
trap on_signal TERM INT

pause() {  # an interruptible sleep: the trap runs as soon as a signal arrives
    sleep "$POLL_S" &
    wait $!
}

launch_sglang() {  # launch_sglang [args...]
    log "serving $MODEL_DIR on $HOST:$PORT (mem-fraction-static $MEM_FRACTION) $*"
    "$SGLANG_PYTHON" -m sglang.launch_server --model-path "$MODEL_DIR" --host "$HOST" --port "$PORT" \
        --mem-fraction-static "$MEM_FRACTION" "$@" &
    pids+=("$!")
}

launch_encoder() {
    local args=(serve --encode-only --model "$MODEL_DIR" --host "$HOST" --port "$EMBED_PORT")
    [ -n "$ENCODER_MEMORY_GIB" ] && args+=(--memory-gib "$ENCODER_MEMORY_GIB")
    [ -n "$ENCODER_BATCH_TOKENS" ] && args+=(--set "ebm.encode_batch_tokens=$ENCODER_BATCH_TOKENS")
    log "encoder for the value model on $HOST:$EMBED_PORT: $ENCODER_COMMAND ${args[*]}"
    "$ENCODER_COMMAND" "${args[@]}" &
    pids+=("$!")
}

healthy() {  # healthy PORT: /health answers 200 (503 while loading)
    "$PROBE_PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' \
        "http://$HOST:$1/health" >/dev/null 2>&1
}

deadline=$((SECONDS + WAIT_TIMEOUT_S))
until [ -f "$READY_FILE" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        log "no $READY_FILE after ${WAIT_TIMEOUT_S}s: the model was not downloaded (see the fetch-model container)"
        exit 1
    fi
    pause
done

if [ -n "$EMBED_PORT" ]; then
    launch_encoder
    deadline=$((SECONDS + HEALTH_TIMEOUT_S))
    until healthy "$EMBED_PORT"; do
        if ! kill -0 "${pids[0]}" 2>/dev/null; then
            wait "${pids[0]}"
            status=$?
            log "the encoder exited ($status) before it was healthy"
            [ "$status" -eq 0 ] && status=1  # no encoder is a failure, whatever it said
            exit "$status"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "the encoder was not healthy after ${HEALTH_TIMEOUT_S}s"
            stop_servers
            exit 1
        fi
        pause
    done
fi

launch_sglang "$@"

wait -n
status=$?
log "a server exited ($status); stopping"
stop_servers
exit "$status"
