#!/usr/bin/env bash
# Creates .venv-transformers4/: transformers 4.57.1 (SGLang 0.5.6's pin) with its tokenizers and huggingface_hub, as
# pinned in constraints-transformers4.txt, installed without dependencies into a folder that goes FIRST on PYTHONPATH
# in front of .venv (whose torch, numpy, safetensors and burnqed's own dependencies it uses). Three wheels (~15 MB, no
# torch, no CUDA); about 15 s the first time, nothing once the pins are installed. Used by the tests that read a model
# folder under the older serving image's transformers (tests/policy/test_modelfolder.py):
#
# PYTHON (default .venv/bin/python) is the interpreter whose pip installs them.
#
#   scripts/transformers4.sh && PYTHONPATH=.venv-transformers4:. .venv/bin/python -m burnqed.policy.modelfolder describe DIR
set -euo pipefail
cd "$(dirname "$0")/.."
target=.venv-transformers4
pins=constraints-transformers4.txt
if [ -f "$target/.pins" ] && cmp -s "$target/.pins" "$pins"; then
    exit 0
fi
staging="$target.building.$$"
rm -rf "$staging"
trap 'rm -rf "$staging"' EXIT
"${PYTHON:-.venv/bin/python}" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$staging" -r "$pins"
cp "$pins" "$staging/.pins"
rm -rf "$target"
mv "$staging" "$target"
