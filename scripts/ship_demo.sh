#!/usr/bin/env bash
# Ships a trained demo model as the embedded default (issue #17; models/demo/README.md): RUN/export
# (train_demo_recipe.sh's output, DSpark stages included) into models/demo, and the golden data the
# engine's tests check it against, regenerated from the reference (tests/data/golden/README.md).
# What stays by hand: models/demo/README.md's figures, the README's exchange, docs/BENCHMARKS.md.
#
#   scripts/ship_demo.sh RUN CORPUS     # CORPUS: the gen_agent_corpus.py folder RUN was trained on
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN=${1:?usage: ship_demo.sh RUN CORPUS}
CORPUS=${2:?usage: ship_demo.sh RUN CORPUS}
REF=${REF:-$HOME/.venvs/hippo-ref/bin/python}
REFERENCE=${REFERENCE:-$ROOT/.cache/deepseek-v41-reference}
TOKENIZER=${TOKENIZER:-$ROOT/.cache/deepseek-v4-tokenizer}
[ -f "$RUN/dspark/exported" ] || { echo "ship_demo: $RUN has no exported model with its DSpark stages" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

find "$ROOT/models/demo" -maxdepth 1 -type f ! -name README.md -delete
# The checkpoint's own files (provenance.json lists them), not a tokenizer copied in for an evaluation.
"$REF" -c 'import json, sys; print("\n".join(["provenance.json", *json.load(open(sys.argv[1]))["files"]]))' \
    "$RUN/export/provenance.json" | while read -r name; do cp "$RUN/export/$name" "$ROOT/models/demo/"; done
"$REF" "$ROOT/scripts/demo_golden_prompts.py" "$CORPUS" "$WORK/prompts.json"
# The reference reads the checkpoint with its tokenizer beside it, as `hippo serve` does.
mkdir "$WORK/demo-golden-ckpt"
cp "$ROOT"/models/demo/* "$TOKENIZER"/tokenizer*.json "$WORK/demo-golden-ckpt/"
"$REF" "$ROOT/scripts/gen_model_golden.py" --reference "$REFERENCE" --checkpoint "$WORK/demo-golden-ckpt" \
    --prompts "$WORK/prompts.json" --out "$ROOT/tests/data/golden/demo.safetensors" --continue 32 --stable-topk \
    --threads 2 --made-by "models/demo (scripts/train_demo.py export)"
"$REF" "$ROOT/scripts/dspark_twin.py" golden --reference "$REFERENCE" --checkpoint "$ROOT/models/demo" \
    --prompts "$WORK/prompts.json" --out "$ROOT/tests/data/golden/demo-dspark.safetensors"
echo "ship_demo: models/demo and its golden data replaced; rebuild, run the tests, update the figures"
