#!/usr/bin/env python3
"""Re-point a golden file (scripts/gen_model_golden.py) at a checkpoint that changed only where the
reference does not read.

The golden data records the sha256 of every shard of the checkpoint it came from, and the engine's
golden test insists that `hippo model init` still writes exactly those shards. A change to tensors
the reference skips (its SKIPPED_PREFIXES: DSpark stages, vision) changes the shards but not the
data, and regenerating the data would mean running the reference again, on another machine's torch
rounding (docs/reference-model.md, "Sensitivity"). This script keeps every stored tensor and every
recorded figure and replaces only the shard and index digests, after checking that:

  - config.json and tokenizer.json are byte-identical to those the reference read;
  - the checkpoint holds as many tensors outside the skipped prefixes as the reference loaded;
  - every shard whose digest changed holds tensors the reference skips (a changed shard of read
    tensors only means the data must be regenerated).

The metadata gains a "repointed" entry (date, reason, the digests replaced). Weights are generated
per tensor from (seed, name) (engine/weights/random_init.cpp), so renaming or reshaping a skipped
tensor cannot change another tensor's bytes; the engine's golden test then checks the logits as
before.

    python scripts/repoint_golden.py --golden tests/data/golden/tiny-seed1.safetensors \\
        --checkpoint DIR --reason "DSpark tensors take their V4.1 names"

Standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import struct
import sys
from pathlib import Path

from checkpoint_digest import SKIPPED_PREFIXES, sha256_file

def read_header(path: Path) -> tuple[dict, bytes]:
    """A safetensors file's header (JSON) and the bytes after it."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def tensor_names(shard: Path) -> list[str]:
    with open(shard, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return [k for k in header if k != "__metadata__"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", required=True, type=Path)
    parser.add_argument("--checkpoint", required=True, type=Path, help="the plain checkpoint model init writes now")
    parser.add_argument("--reason", required=True)
    args = parser.parse_args()

    header, payload = read_header(args.golden)
    meta = json.loads(header["__metadata__"]["hippo_golden"])
    ckpt = meta["checkpoint"]
    for name, key in (("config.json", "config_sha256"), ("tokenizer.json", "tokenizer_sha256")):
        if ckpt.get(key) is not None and sha256_file(args.checkpoint / name) != ckpt[key]:
            sys.exit(f"repoint_golden: {name} differs from the one the reference read: regenerate instead")

    shards = sorted(args.checkpoint.glob("model-*.safetensors"))
    names = [n for s in shards for n in tensor_names(s)]
    read = [n for n in names if not n.startswith(SKIPPED_PREFIXES) and not n.endswith(".scale")]
    # The reference also counts each Engram table's scale parameter (gen_model_golden.load_explicit).
    expected = len(read) + sum(n.endswith("engram.embed.weight") for n in read)
    loaded = ckpt["load"]["tensors_loaded"]
    if expected != loaded:
        sys.exit(f"repoint_golden: {expected} tensors outside the skipped prefixes, the reference loaded {loaded}: "
                 "regenerate instead")

    old = ckpt["load"]["shards"]
    new = {s.name: sha256_file(s) for s in shards}
    if set(new) != set(old):
        sys.exit(f"repoint_golden: shards {sorted(new)} where the reference read {sorted(old)}")
    changed = {name: {"before": old[name], "after": digest,
                      "skipped_tensors": sum(n.startswith(SKIPPED_PREFIXES) for n in tensor_names(args.checkpoint / name))}
               for name, digest in new.items() if digest != old[name]}
    if not changed:
        sys.exit("repoint_golden: the shards are those the reference read; nothing to do")
    for name, c in changed.items():
        if c["skipped_tensors"] == 0:
            sys.exit(f"repoint_golden: {name} changed but holds no tensor the reference skips: regenerate instead")

    ckpt["load"]["shards"] = new
    index = args.checkpoint / "model.safetensors.index.json"
    if index.is_file():
        ckpt["index_sha256"] = sha256_file(index)
    meta.setdefault("repointed", []).append(
        {"date": datetime.date.today().isoformat(), "reason": args.reason, "shards": changed})
    header["__metadata__"]["hippo_golden"] = json.dumps(meta, sort_keys=True)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data stays 8-byte aligned, as safetensors writes it
    args.golden.write_bytes(struct.pack("<Q", len(text)) + text + payload)
    for name, c in changed.items():
        print(f"{name}: {c['before'][:12]}… -> {c['after'][:12]}… ({c['skipped_tensors']} skipped tensors in it)")


if __name__ == "__main__":
    main()
