#!/usr/bin/env bash
# burnqed's SGLang sidecar entrypoint (images/sglang/Dockerfile). Waits for the model folder that `burnqed fetch`
# fills (its ready file is written last), then serves it with SGLang's native API; with EMBED_PORT set, also an
# embedding server (--is-embedding disables /generate) on the same GPU with its own --mem-fraction-static.
#
#   MODEL_DIR=/models/policy PORT=30000 MEM_FRACTION=0.85 burnqed-sglang [extra sglang.launch_server args]
#   MEM_FRACTION=0.55 EMBED_PORT=30001 EMBED_MEM_FRACTION=0.3 burnqed-sglang
#
# Environment (default):
#   MODEL_DIR (/models/policy)            the model folder SGLang loads (SGLang needs a local folder)
#   READY_FILE ($MODEL_DIR/.burnqed-ready) written last by `burnqed fetch`
#   WAIT_TIMEOUT_S (3600), POLL_S (2)     how long / how often to look for it
#   HOST (127.0.0.1), PORT (30000)        the generation server (loopback: only the pod's main container uses it)
#   MEM_FRACTION (0.85)                   its --mem-fraction-static
#   EMBED_PORT (unset), EMBED_MEM_FRACTION (0.3)   the embedding server, started once the first one is healthy
#                                         (so their GPU memory profiling does not race)
#   HEALTH_TIMEOUT_S (1800)               how long the generation server may take to answer /health with 200
#   SGLANG_PYTHON (python3)               the interpreter with sglang; PROBE_PYTHON (python3) polls /health
# SGLANG_RETURN_ORIGINAL_LOGPROB=1 is always exported: burnqed's search needs log-probs before temperature.
# Exit status: 1 when the ready file never appears or the generation server never gets healthy; otherwise that of
# the first server to exit (the other one is stopped). SIGTERM / SIGINT stop both servers (status 143).
set -uo pipefail

MODEL_DIR="${MODEL_DIR:-/models/policy}"
READY_FILE="${READY_FILE:-$MODEL_DIR/.burnqed-ready}"
WAIT_TIMEOUT_S="${WAIT_TIMEOUT_S:-3600}"
POLL_S="${POLL_S:-2}"
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-30000}"
MEM_FRACTION="${MEM_FRACTION:-0.85}"
EMBED_PORT="${EMBED_PORT:-}"
EMBED_MEM_FRACTION="${EMBED_MEM_FRACTION:-0.3}"
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

launch() {  # launch PORT MEM_FRACTION [args...]
    local port="$1" fraction="$2"
    shift 2
    log "serving $MODEL_DIR on $HOST:$port (mem-fraction-static $fraction) $*"
    "$SGLANG_PYTHON" -m sglang.launch_server --model-path "$MODEL_DIR" --host "$HOST" --port "$port" \
        --mem-fraction-static "$fraction" "$@" &
    pids+=("$!")
}

healthy() {  # healthy PORT: /health answers 200 (SGLang answers 503 while warming up)
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

launch "$PORT" "$MEM_FRACTION" "$@"

if [ -n "$EMBED_PORT" ]; then
    deadline=$((SECONDS + HEALTH_TIMEOUT_S))
    until healthy "$PORT"; do
        if ! kill -0 "${pids[0]}" 2>/dev/null; then
            wait "${pids[0]}"
            status=$?
            log "the generation server exited ($status) before it was healthy"
            exit "$status"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "the generation server was not healthy after ${HEALTH_TIMEOUT_S}s"
            stop_servers
            exit 1
        fi
        pause
    done
    launch "$EMBED_PORT" "$EMBED_MEM_FRACTION" --is-embedding "$@"
fi

wait -n
status=$?
log "a server exited ($status); stopping"
stop_servers
exit "$status"
