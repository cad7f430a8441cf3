#!/usr/bin/env python3
"""Golden data for Engram hashing with DEAD positions, from the Hugging Face reference.

`scripts/gen_model_golden.py --with-hashes` stores the reference's Engram rows of whole prompts; this
adds what a plain prompt cannot show: positions the reference hashes as DEAD (a 2-D attention_mask
of 0 becomes `token_mask` = False in `DeepseekV41NgramHashState`; docs/engram.md). It runs only the
hash state, not the model, for the `tiny` preset's Engram fields (layers 1 and 4, 2 heads, tables
from 1,000, n-gram 4, pad id 2, 99,092 classes), on one prompt with DEAD positions at the start, in
the middle, in a run and at the end, and checks that two calls (history carried on the model) equal
one. Needs the reference overlay and its virtualenv (scripts/reference/README.md); the tests read the
committed output, never run this.

    python scripts/gen_engram_golden.py --reference OVERLAY \\
        --tokenizer .cache/deepseek-v4-tokenizer/tokenizer.json \\
        --out tests/data/golden/engram-dead-mask.safetensors

Output (safetensors): `ids` I32 [S], `dead` U8 [S] (1 = DEAD), `engram_hash` I32 [S, 2, 6] (rows with
offsets); `__metadata__["hippo_golden"]`: the config fields, prompt, reference commit and versions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts" / "reference"))

import assemble_reference  # noqa: E402  (hippo's overlay activation + shim)

# hippo's `tiny` preset (engine/config/presets.cpp); the row counts are asserted below.
TINY_ENGRAM = dict(engram_layer_ids=[1, 4], engram_vocab_size=1000, engram_n_heads=2, engram_head_dim=32,
                   engram_max_ngram_size=4, engram_pad_id=2, engram_compressed_vocab_size=99092)
TINY_ROWS = [6126, 6332]
PROMPT = ("Engram hashes the n-grams of compressed ids: The the THE, 2, 3 and 4 tokens. "
          "一二三四五六七八九十 Ünïcödé ﬁ ① ΟΣ.\n\n\tDEAD positions stop the look-back; the pad id fills it.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="the overlay folder (assemble_reference.py install)")
    parser.add_argument("--tokenizer", required=True, help="the real tokenizer.json")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    info = assemble_reference.activate(args.reference)
    import numpy as np
    import torch
    from safetensors.numpy import save_file
    from transformers import PreTrainedTokenizerFast
    from transformers.models.deepseek_v41.configuration_deepseek_v41 import DeepseekV41TextConfig
    from transformers.models.deepseek_v41.modeling_deepseek_v41 import DeepseekV41NgramHashState, EngramLayout

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    config = DeepseekV41TextConfig()
    for key, value in TINY_ENGRAM.items():
        setattr(config, key, value)
    config.engram_num_embeddings = [sum(sum(per) for per in layer) for layer in EngramLayout.from_config(config).primes]
    if config.engram_num_embeddings != TINY_ROWS:
        raise SystemExit(f"table rows {config.engram_num_embeddings}, hippo's tiny preset has {TINY_ROWS}")
    state = DeepseekV41NgramHashState(config, tokenizer)

    ids = torch.tensor(tokenizer(PROMPT, add_special_tokens=False)["input_ids"], dtype=torch.long)[None]
    s = ids.shape[1]
    dead_positions = sorted({0, 5, 20, 21, 22, 23, 24, 25, 40, s - 1})
    live = torch.ones_like(ids, dtype=torch.bool)
    live[0, dead_positions] = False
    positions = torch.arange(s)[None]

    state.history = None
    rows = state(ids, positions, live)[0]
    state.history = None
    split = 30
    first = state(ids[:, :split], positions[:, :split], live[:, :split])[0]
    second = state(ids[:, split:], positions[:, split:], live[:, split:])[0]
    if not torch.equal(torch.cat([first, second]), rows):
        raise SystemExit("the reference's rows differ between one call and two")

    meta = {"format": 1, "config": TINY_ENGRAM | {"engram_num_embeddings": TINY_ROWS}, "prompt": PROMPT,
            "dead_positions": dead_positions, "pad_compressed_id": int(state.pad_id),
            "reference": {k: info[k] for k in info if k in ("manifest", "transformers", "torch")}}
    save_file({"ids": ids[0].numpy().astype(np.int32), "dead": (~live[0]).numpy().astype(np.uint8),
               "engram_hash": rows.numpy().astype(np.int32)},
              args.out, metadata={"hippo_golden": json.dumps(meta, ensure_ascii=False)})
    print(f"wrote {args.out}: {s} positions, DEAD at {dead_positions}", file=sys.stderr)


if __name__ == "__main__":
    main()
