#!/usr/bin/env python3
"""Where the reference's roundings sit on a boundary: a diagnostic for a failing golden check.

The model rounds onto coarse grids in the middle of its computation (window KV to E4M3, index queries
and keys and compressed KV to E2M1). A value within a relative EPS of a rounding boundary may round the
other way under another summation order, and hippo then differs from the reference from that position
on (docs/engine.md, "Why flips"). Two subcommands, on the reference overlay (scripts/reference/README.md):

  find   the positions of a golden prompt whose quantiser inputs lie within EPS of a boundary, per call:
         golden_borderline.py find --reference REF --checkpoint CKPT --golden G [--prompt 0] [--eps 1e-6]
  turn   scripts/gen_model_golden.py with the roundings at one position that lie within EPS turned the
         other way (if hippo then matches the result, that rounding was the whole difference):
         golden_borderline.py turn --position P [--eps 1e-6] -- ARGUMENTS OF gen_model_golden.py

Positions are along the quantised tensor's longest axis between batch and channels: tokens for
window KV and index queries, compressed entries (tokens ratio·i … ratio·i + ratio − 1) for compressed
KV and index keys. `turn` acts on every call whose axis reaches P: the one-shot prefills, but also a
later chunk of a cached prefill, counted from its own start (read its log lines). Near-ties between
top-k scores (the indexer's selections) are not looked at here.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_model_golden  # noqa: E402

QUANTISERS = {"_fake_quant_fp8_block": "E4M3 (window KV)", "_fake_quant_fp4_block": "E2M1 (index q/k, compressed KV)"}


def near_boundary(quantise, x, eps, *args, **kwargs):
    """quantise(x) and a mask of the elements that x scaled by 1 ± eps quantises differently."""
    import torch

    y = quantise(x, *args, **kwargs)
    moved = torch.zeros_like(y, dtype=torch.bool)
    others = []
    for factor in (1 + eps, 1 - eps):
        z = quantise(x * factor, *args, **kwargs) / factor
        differs = (z - y).abs() > 1e-3 * y.abs().clamp_min(1e-30)
        others.append((z, differs))
        moved |= differs
    return y, moved, others


def position_axis(x) -> int:
    """The axis of tokens or entries: the longest between batch and channels."""
    return max(range(1, x.dim() - 1), key=lambda a: x.shape[a])


def reference_module():
    return importlib.import_module("transformers.models.deepseek_v41.modeling_deepseek_v41")


def find(args) -> None:
    import torch
    from safetensors import safe_open

    gen_model_golden.assemble_reference.activate(args.reference)
    model, _, _ = gen_model_golden.build_reference(Path(args.checkpoint))
    module = reference_module()
    ids = safe_open(args.golden, "np").get_tensor(f"p{args.prompt}.ids").tolist()
    calls = []
    for name, kind in QUANTISERS.items():
        original = getattr(module, name)

        def wrapped(x, *a, _original=original, _kind=kind, **k):
            y, moved, _ = near_boundary(_original, x, args.eps, *a, **k)
            axis = position_axis(x)
            positions = sorted(set(moved.nonzero()[:, axis].tolist())) if moved.any() else []
            calls.append((_kind, tuple(x.shape), positions))
            return y

        setattr(module, name, wrapped)
    with torch.no_grad():
        model.model(input_ids=torch.tensor([ids]), use_cache=False)
    print(f"prompt {args.prompt}: {len(ids)} tokens, {len(calls)} quantiser calls in one prefill")
    for i, (kind, shape, positions) in enumerate(calls):
        if positions:
            print(f"call {i:3d} {kind:32s} shape {shape}: within {args.eps:g} of a boundary at {positions}")


def turn(args, golden_args: list[str]) -> None:
    activate = gen_model_golden.assemble_reference.activate

    def activate_and_patch(*a, **k):
        info = activate(*a, **k)
        module = reference_module()
        for name in QUANTISERS:
            original = getattr(module, name)

            def wrapped(x, *qa, _original=original, **qk):
                axis = position_axis(x)
                if x.shape[axis] <= args.position:
                    return _original(x, *qa, **qk)
                y, _, others = near_boundary(_original, x, args.eps, *qa, **qk)
                for z, differs in others:
                    at = differs.select(axis, args.position)
                    if at.any():
                        y = y.clone()
                        y.select(axis, args.position)[at] = z.select(axis, args.position)[at]
                        print(f"golden_borderline: turned {int(at.sum())} rounding(s) at {args.position}", file=sys.stderr)
                        break
                return y

            setattr(module, name, wrapped)
        return info

    gen_model_golden.assemble_reference.activate = activate_and_patch
    sys.argv = ["gen_model_golden.py", *golden_args]
    gen_model_golden.main()


def main() -> None:
    argv = sys.argv[1:]
    golden_args = []
    if "--" in argv:
        golden_args = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("find")
    f.add_argument("--reference", required=True, help="overlay directory (scripts/reference/README.md)")
    f.add_argument("--checkpoint", required=True, help="the checkpoint, its tokenizer beside it")
    f.add_argument("--golden", required=True, help="a golden file of scripts/gen_model_golden.py (its prompts' ids)")
    f.add_argument("--prompt", type=int, default=0)
    f.add_argument("--eps", type=float, default=1e-6)
    t = sub.add_parser("turn")
    t.add_argument("--position", type=int, required=True)
    t.add_argument("--eps", type=float, default=1e-6)
    args = parser.parse_args(argv)
    if args.command == "find":
        find(args)
    else:
        turn(args, golden_args)


if __name__ == "__main__":
    main()
