#!/usr/bin/env bash
# Creates .venv (if missing) and installs burnqed with its dev tools from the pinned constraints.
# Idempotent and fast when everything is already installed. Usage: scripts/setup.sh [EXTRAS]
# (EXTRAS defaults to "dev,train,grammar,k8s,report": everything `burnqed iterate` and the tests need).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev,train,grammar,k8s,report}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" -c constraints.txt --upgrade "pip>=25" uv
# The pinned set is installed by uv (downloads in parallel: ~0.5 min where pip took ~3 on a cold cache), told what pip
# is told: this pip's configuration (find-links, indexes, constraints, certificate; the CPU torch wheel may lie in a
# find-links folder) and pip's resolution over all indexes, its bytecode compiled as pip compiles it. If uv fails,
# pip installs the same set.
uv=(.venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode --index-strategy unsafe-best-match
    -c constraints.txt)
while IFS='=' read -r key value; do
    value="${value#\'}"
    value="${value%\'}"
    case "$key" in
        *.find-links) for v in $value; do uv+=(--find-links "$v"); done ;;
        *.extra-index-url) for v in $value; do uv+=(--extra-index-url "$v"); done ;;
        *.index-url) uv+=(--index-url "$value") ;;
        *.constraint) for v in $value; do uv+=(--constraint "$v"); done ;;
        *.cert) export SSL_CERT_FILE="${SSL_CERT_FILE:-$value}" ;;
    esac
done < <(.venv/bin/python -m pip config list 2>/dev/null)
install() {
    "${uv[@]}" "$@" || { echo "setup.sh: uv failed; installing with pip" >&2; "${pip[@]}" -c constraints.txt "$@"; }
}
# torch is pinned in constraints.txt to the CPU wheel; install it first when an extra needs it so
# nothing pulls the CUDA build (see README).
case ",${extras}," in
    *,model,*|*,train,*|*,grammar,*) install torch ;;
esac
install -e ".[${extras}]"
# The checkout's own modules byte-compiled (an editable install compiles none of them; a wheel install does), so a
# `burnqed` process, and each of the ~1,500 the tests start, reads them compiled even where PYTHONDONTWRITEBYTECODE
# stops Python from writing the cache itself (~0.1 CPU-s a process). A stale file is recompiled, as always.
.venv/bin/python -m compileall -q burnqed leankit minilean tests
# The tests that read model folders under the older serving image's transformers (4.57.1) need its three wheels in
# .venv-transformers4 (idempotent; ~15 s the first time; tests/policy/test_modelfolder.py).
case ",${extras}," in
    *,dev,*) PYTHON=.venv/bin/python scripts/transformers4.sh ;;
esac
