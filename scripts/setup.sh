#!/usr/bin/env bash
# Creates .venv (if missing) and installs burnqed with its dev tools from the pinned constraints.
# Idempotent and fast when everything is already installed. Usage: scripts/setup.sh [EXTRAS]
# (EXTRAS defaults to "dev,train,k8s,report": everything `burnqed iterate` and the tests need).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev,train,k8s,report}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25"
# torch is pinned in constraints.txt to the CPU wheel; install it first when an extra needs it so
# nothing pulls the CUDA build (see README).
case ",${extras}," in
    *,model,*|*,train,*)
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt torch ;;
esac
.venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[${extras}]"
# The checkout's own modules byte-compiled (an editable install compiles none of them; a wheel install does), so a
# `burnqed` process, and each of the ~1,500 the tests start, reads them compiled even where PYTHONDONTWRITEBYTECODE
# stops Python from writing the cache itself (~0.1 CPU-s a process). A stale file is recompiled, as always.
.venv/bin/python -m compileall -q burnqed leankit minilean tests
# The tests that read model folders under the older serving image's transformers (4.57.1) need its three wheels in
# .venv-transformers4 (idempotent; ~15 s the first time; tests/test_modelfolder.py).
case ",${extras}," in
    *,dev,*) PYTHON=.venv/bin/python scripts/transformers4.sh ;;
esac
