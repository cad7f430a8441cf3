#!/usr/bin/env bash
# The demo model's training from hippo's init, as one resumable recipe: what the runs of
# docs/BENCHMARKS.md ("The demo model ...", issue #17) learnt one resume at a time, in one schedule.
# Run it again to go on: a stage whose target step is reached returns at once, the others resume
# from state.pt.
#
#   scripts/train_demo_recipe.sh RUN [MINUTES]     # RUN: the run folder (runs/demo-recipe)
#
# Two corpora, one after the other (each with its cosine schedule; --steps is the same in every stage
# of one). CORPUS: `gen_agent_corpus.py --seed 1 --sessions 20000 --spaced-copies` in
# runs/corpus-spaced, for STEPS (default 2000) steps, the last third trained as exported. CORPUS2:
# the same with `--repo-names --team-share 0.16` (listings of real file names, more team sessions) in
# runs/corpus-repo, from there to step STEPS2 (default 2800), trained as exported; it keeps the first
# corpus' ids (--new-corpus). The reference overlay as in scripts/reference/README.md (REFERENCE=...).
# MINUTES bounds the whole call (resumably; 0: no bound). A run resumed with other STEPS keeps each
# segment's settings in its state (train_demo.py export writes them into provenance.json).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN=${1:?usage: train_demo_recipe.sh RUN [MINUTES]}
MINUTES=${2:-0}
REF=${REF:-$HOME/.venvs/hippo-ref/bin/python}
REFERENCE=${REFERENCE:-$ROOT/.cache/deepseek-v41-reference}
CORPUS=${CORPUS:-$ROOT/runs/corpus-spaced}
CORPUS2=${CORPUS2:-$ROOT/runs/corpus-repo}
STEPS=${STEPS:-2000}
STEPS2=${STEPS2:-2800}
ROUND_FROM=$(( STEPS * 2 / 3 ))
DEADLINE=$(( MINUTES > 0 ? $(date +%s) + MINUTES * 60 : 0 ))

# Minutes left before MINUTES runs out (0: no bound); fails (status 3) when none are.
minutes_left() {
    local left=0
    if (( DEADLINE > 0 )); then
        left=$(( (DEADLINE - $(date +%s)) / 60 ))
        (( left > 0 )) || { echo "train_demo_recipe: out of time; run again to go on" >&2; exit 3; }
    fi
    echo "$left"
}

# The last step the run's log reached (0 before its first line or in the copy stages).
logged_step() {
    [ -s "$RUN/log.jsonl" ] || { echo 0; return; }
    tail -n 1 "$RUN/log.jsonl" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("step", 0))'
}

# train CORPUS STEPS ARGS...: one stage of train_demo.py on the run.
train() {
    local corpus=$1 steps=$2 left
    shift 2
    left=$(minutes_left) || exit 0
    "$REF" "$ROOT/scripts/train_demo.py" train --reference "$REFERENCE" --corpus "$corpus" --run "$RUN" \
        --tie-head --steps "$steps" --minutes "$left" "$@"
}

# Copying first, induction by the filler curriculum: 4 random ids around the copied ones, then 32.
# The agent stage: copy batches mixed in, copied answer tokens weighted twice and the first of
# each copy ten times, the indexers distilled from their layers' attention; for the last third
# trained as exported (FP8 dense, FP4 experts). (Past STEPS the state holds the second corpus' ids,
# which the first corpus' stages would refuse.)
AGENT=(--copy-filler 32 --copy-steps 860 --copy-mix 1 --copy-weight 2 --start-weight 10 --indexer-kl 1)
if (( $(logged_step) <= STEPS )); then
    train "$CORPUS" "$STEPS" --copy-filler 4 --copy-steps 811 --stop-at 0
    train "$CORPUS" "$STEPS" --copy-filler 32 --copy-steps 860 --stop-at 0
    train "$CORPUS" "$STEPS" "${AGENT[@]}" --stop-at "$ROUND_FROM"
    train "$CORPUS" "$STEPS" "${AGENT[@]}" --round-weights
fi
# The second corpus, as exported throughout; the DSpark stages distil on it.
train "$CORPUS2" "$STEPS2" "${AGENT[@]}" --round-weights --new-corpus
# The checkpoint as the release stores it, then its DSpark stages distilled from it (about an hour).
if [ ! -f "$RUN/export/provenance.json" ]; then
    "$REF" "$ROOT/scripts/train_demo.py" export --reference "$REFERENCE" --run "$RUN" --out "$RUN/export"
fi
if [ ! -f "$RUN/dspark/exported" ]; then
    left=$(minutes_left) || exit 0
    "$REF" "$ROOT/scripts/train_dspark.py" train --reference "$REFERENCE" --checkpoint "$RUN/export" \
        --corpus "$CORPUS2" --run "$RUN/dspark" --steps 800 --threads 1 --minutes "$left"
    minutes_left > /dev/null || exit 0  # (stopped by the bound, not done)
    "$REF" "$ROOT/scripts/train_dspark.py" export --reference "$REFERENCE" --checkpoint "$RUN/export" \
        --run "$RUN/dspark"
    touch "$RUN/dspark/exported"
fi
echo "train_demo_recipe: $RUN/export holds the trained model (scripts/eval_demo.py --model-dir $RUN/export)"
