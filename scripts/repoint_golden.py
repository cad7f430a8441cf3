#!/usr/bin/env python3
"""Re-point a golden file (scripts/gen_model_golden.py) at a checkpoint that changed only where the
reference does not read.

The golden data records the sha256 of config.json and of every shard of the checkpoint it came
from, and the engine's golden test insists that `hippo model init` still writes exactly those
shards. A change to what the reference skips (its SKIPPED_PREFIXES: DSpark stages, vision; the
config's DSpark keys) changes the files but not the data, and regenerating the data would mean
running the reference again, on another machine's torch rounding (docs/reference-model.md,
"Sensitivity"). This script keeps every stored tensor and figure and replaces only the digests,
after checking that nothing the reference reads changed:

  - with --previous-checkpoint (the checkpoint the reference read, made again by the previous
    `model init`: its config.json and shards must have the recorded digests): every tensor outside
    the skipped prefixes has the same name, dtype, shape and bytes in both, and the configs differ
    only in DSpark keys (num_nextn_predict_layers, dspark_*, compress_ratios past the trunk's
    layers); the shards may be laid out anew;
  - without it (a weaker check, for a change that leaves config.json and the shard names alone):
    config.json and tokenizer.json have the recorded digests, the checkpoint holds as many tensors
    outside the skipped prefixes as the reference loaded, and every shard whose digest changed
    holds skipped tensors.

The metadata gains a "repointed" entry (date, reason, what changed). Weights are generated per
tensor from (seed, name) (engine/weights/random_init.cpp); the engine's golden test then checks the
logits as before.

    python scripts/repoint_golden.py --golden tests/data/golden/wide-seed1.safetensors \\
        --checkpoint NEW_DIR [--previous-checkpoint OLD_DIR] --reason "..."

Standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import struct
import sys
from pathlib import Path

from checkpoint_digest import SKIPPED_PREFIXES, sha256_file


def fail(message: str) -> None:
    sys.exit(f"repoint_golden: {message}")


def read_header(path: Path) -> tuple[dict, bytes]:
    """A safetensors file's header (JSON) and the bytes after it."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def shard_header(shard: Path) -> tuple[dict, int]:
    """A shard's tensor entries and where its data starts."""
    with open(shard, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header, 8 + n


def shards_of(ckpt: Path) -> list[Path]:
    return sorted(ckpt.glob("model-*.safetensors"))


def read_tensors(ckpt: Path) -> dict[str, tuple[str, list[int], str]]:
    """{name: (dtype, shape, sha256 of its bytes)} for every tensor the reference reads."""
    out = {}
    for shard in shards_of(ckpt):
        header, start = shard_header(shard)
        with open(shard, "rb") as f:
            for name, entry in header.items():
                if name.startswith(SKIPPED_PREFIXES):
                    continue
                begin, end = entry["data_offsets"]
                f.seek(start + begin)
                out[name] = (entry["dtype"], entry["shape"], hashlib.sha256(f.read(end - begin)).hexdigest())
    return out


def dspark_only_change(previous: dict, current: dict) -> list[str]:
    """The text_config keys in which two configs differ, when all of them are the DSpark stages'."""
    old, new = previous.get("text_config", {}), current.get("text_config", {})
    if {k: v for k, v in previous.items() if k != "text_config"} != {k: v for k, v in current.items() if k != "text_config"}:
        fail("config.json differs outside text_config: regenerate instead")
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    layers = new.get("num_hidden_layers")
    for key in changed:
        dspark = key == "num_nextn_predict_layers" or key.startswith("dspark_")
        trunk_ratios_kept = (key == "compress_ratios" and old.get("num_hidden_layers") == layers
                             and old[key][:layers] == new[key][:layers])
        if not (dspark or trunk_ratios_kept):
            fail(f"config.json's text_config.{key} changed, which the reference reads: regenerate instead")
    return changed


def against_previous(ckpt: dict, previous: Path, current: Path) -> dict:
    """The strong check: the previous checkpoint is the one the reference read, and the tensors it
    reads are the same in both."""
    if sha256_file(previous / "config.json") != ckpt["config_sha256"]:
        fail(f"{previous}/config.json is not the config the reference read")
    recorded = ckpt["load"]["shards"]
    if {s.name: sha256_file(s) for s in shards_of(previous)} != recorded:
        fail(f"{previous}'s shards are not those the reference read")
    config_keys = dspark_only_change(json.loads((previous / "config.json").read_text()),
                                     json.loads((current / "config.json").read_text()))
    before, after = read_tensors(previous), read_tensors(current)
    if before != after:
        differing = sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))
        fail(f"tensors the reference reads differ: {differing[:8]}: regenerate instead")
    return {"config_keys_changed": config_keys, "tensors_compared": len(before),
            "shards_before": len(recorded), "shards_after": len(shards_of(current))}


def without_previous(ckpt: dict, current: Path) -> dict:
    """The weak check: nothing but shards holding skipped tensors changed."""
    if sha256_file(current / "config.json") != ckpt["config_sha256"]:
        fail("config.json differs from the one the reference read: give --previous-checkpoint")
    names = [n for s in shards_of(current) for n in shard_header(s)[0]]
    read = [n for n in names if not n.startswith(SKIPPED_PREFIXES) and not n.endswith(".scale")]
    # The reference also counts each Engram table's scale parameter (gen_model_golden.load_explicit).
    expected = len(read) + sum(n.endswith("engram.embed.weight") for n in read)
    if expected != ckpt["load"]["tensors_loaded"]:
        fail(f"{expected} tensors outside the skipped prefixes, the reference loaded {ckpt['load']['tensors_loaded']}")
    old = ckpt["load"]["shards"]
    new = {s.name: sha256_file(s) for s in shards_of(current)}
    if set(new) != set(old):
        fail("the shards are laid out anew: give --previous-checkpoint")
    changed = {}
    for name, digest in new.items():
        if digest == old[name]:
            continue
        skipped = sum(n.startswith(SKIPPED_PREFIXES) for n in shard_header(current / name)[0])
        if skipped == 0:
            fail(f"{name} changed but holds no tensor the reference skips: regenerate instead")
        changed[name] = {"before": old[name], "after": digest, "skipped_tensors": skipped}
    return {"shards": changed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", required=True, type=Path)
    parser.add_argument("--checkpoint", required=True, type=Path, help="the plain checkpoint model init writes now")
    parser.add_argument("--previous-checkpoint", type=Path, help="the plain checkpoint the reference read")
    parser.add_argument("--reason", required=True)
    args = parser.parse_args()

    header, payload = read_header(args.golden)
    meta = json.loads(header["__metadata__"]["hippo_golden"])
    ckpt = meta["checkpoint"]
    if ckpt.get("tokenizer_sha256") is not None and sha256_file(args.checkpoint / "tokenizer.json") != ckpt["tokenizer_sha256"]:
        fail("tokenizer.json differs from the one the reference read: regenerate instead")
    shards = {s.name: sha256_file(s) for s in shards_of(args.checkpoint)}
    if shards == ckpt["load"]["shards"] and sha256_file(args.checkpoint / "config.json") == ckpt["config_sha256"]:
        fail("the checkpoint is the one the reference read; nothing to do")
    record = (against_previous(ckpt, args.previous_checkpoint, args.checkpoint) if args.previous_checkpoint
              else without_previous(ckpt, args.checkpoint))

    ckpt["load"]["shards"] = shards
    ckpt["config_sha256"] = sha256_file(args.checkpoint / "config.json")
    index = args.checkpoint / "model.safetensors.index.json"
    if index.is_file():
        ckpt["index_sha256"] = sha256_file(index)
    meta.setdefault("repointed", []).append({"date": datetime.date.today().isoformat(), "reason": args.reason, **record})
    header["__metadata__"]["hippo_golden"] = json.dumps(meta, sort_keys=True)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data stays 8-byte aligned, as safetensors writes it
    args.golden.write_bytes(struct.pack("<Q", len(text)) + text + payload)
    print(json.dumps(record, indent=1)[:2000])


if __name__ == "__main__":
    main()
