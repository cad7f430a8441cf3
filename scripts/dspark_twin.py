#!/usr/bin/env python3
"""A torch twin of hippo's DSpark draft model (engine/model/dspark.cpp, `../shared/design/dspark.md`),
built on the Hugging Face reference's own blocks, for training the demo model's draft stages and for
golden data that ties hippo's drafts to it.

Hugging Face's deepseek_v41 has no DSpark module (its loader drops `mtp.*`), so there is no outside
reference for the draft; this twin is the engine's DSpark written a second time, in torch: the stages
are the reference's `DeepseekV41DecoderLayer` (mHC, norms, MoE with the stages' expert counts), only
their attention's keys differ (below), so every part the reference has is the reference's.

The draft, per anchor at position p (the state holds positions < p):
- the target's forward taps the streams entering each `dspark_target_layer_ids` layer, averaged over
  the hc copies, side by side in layer order: features [p, n_targets * d];
  main_x = main_norm(main_proj(features));
- each stage keeps a window of context KV: fp8(rope(kv_norm(wkv(main_x)))) of the last
  `sliding_window` positions before p (from `dspark_from`, 0 for a fresh session);
- the block [anchor, noise x (block - 1)] at positions p.. p + block - 1 runs through the stages, each
  slot attending to its stage's window and to every slot of the block (both directions), with the sink;
- the streams collapse with the last stage's FFN pre-mix; the pre-norm hidden h_k feeds the
  confidence head, the shared head reads norm(h_k): base logits U_k;
- slot k: logits U_k + W2 W1[prev_k] (prev_0 the anchor, prev_k the draft of slot k - 1), the draft
  its argmax (lowest id on a tie); confidence sigmoid(w . [h_k; W1[prev_k]]).

    # golden data for tests/engine/model_dspark_golden_test.cpp (the reference's virtualenv)
    $REF scripts/dspark_twin.py golden --reference OVERLAY --checkpoint models/demo \\
        --prompts PROMPTS.json --anchors 60,300,555,1000,1404 --out tests/data/golden/demo-dspark.safetensors

Golden format: for prompt i, `p{i}.ids` I32 [S]; `p{i}.anchors` I32 [A] (anchor positions p: the
state holds ids[:p], the anchor is ids[p]); `p{i}.drafts` I32 [A, block]; `p{i}.confidence` F32
[A, block]. Metadata `hippo_dspark_golden`:
the checkpoint (`committed`: its folder in the repository) and its files' sha256, the prompts and
anchors, torch's version.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "reference"))


def log(message: str) -> None:
    print(f"dspark_twin: {message}", file=sys.stderr, flush=True)


def reference_module():
    from transformers.models.deepseek_v41 import modeling_deepseek_v41

    return modeling_deepseek_v41


def build_twin(config):
    """The twin's modules for a text config, with the reference's initialisation left as is (load
    or train the weights). Import after `assemble_reference.activate`."""
    import torch
    from torch import nn

    m = reference_module()

    class DsparkTwin(nn.Module):
        def __init__(self, config):
            super().__init__()
            d, r, V = config.hidden_size, config.dspark_markov_rank, config.vocab_size
            self.config = config
            self.block = config.dspark_block_size
            self.noise_id = config.dspark_noise_token_id
            n_targets = len(config.dspark_target_layer_ids)
            stage_config = copy.deepcopy(config)
            stage_config.n_routed_experts = config.dspark_n_routed_experts
            stage_config.num_experts_per_tok = config.dspark_num_experts_per_tok
            first = config.num_hidden_layers
            self.main_proj = nn.Linear(n_targets * d, d, bias=False)
            self.main_norm = m.DeepseekV41RMSNorm(d, eps=config.rms_norm_eps)
            self.stages = nn.ModuleList(m.DeepseekV41DecoderLayer(stage_config, first + k)
                                        for k in range(config.num_nextn_predict_layers))
            for stage in self.stages:
                if stage.engram is not None or stage.attn.compress_ratio:
                    raise SystemExit("dspark_twin: a stage with Engram or a compressed branch (the config's "
                                     "compress_ratios must end in one 0 per stage)")
            self.norm = m.DeepseekV41RMSNorm(d, eps=config.rms_norm_eps)
            self.markov_embed = nn.Parameter(torch.zeros(V, r))
            self.markov_head = nn.Parameter(torch.zeros(V, r))
            self.confidence = nn.Linear(d + r, 1, bias=False)
            # The embedding row of the noise token: the target never reads it, so it belongs to the draft.
            self.noise_embed = nn.Parameter(torch.zeros(d))

        def context_kv(self, stage, main_x, cos, sin):
            """One stage's window entries for positions 0..L-1: [L, D]."""
            attn = stage.attn
            kv = m.apply_rotary_pos_emb(attn.kv_norm(attn.wkv(main_x)).unsqueeze(0), cos, sin)
            return m._fake_quant_fp8_block(kv, block_size=32)[0]

        def stage_attention(self, attn, x, cos, sin, context, context_mask):
            """Attention of the block's slots x [A, B, d] to their window context [A, W, D] (additive
            mask [A, W]) and to every slot of their block."""
            A, B, _ = x.shape
            H, D = attn.num_heads, attn.head_dim
            q = attn.wq_b(attn.q_norm(attn.wq_a(x))).view(A, B, H, D)
            q = m.apply_rotary_pos_emb(q, cos, sin).transpose(1, 2)
            kv = m._fake_quant_fp8_block(m.apply_rotary_pos_emb(attn.kv_norm(attn.wkv(x)), cos, sin), block_size=32)
            keys = torch.cat([context, kv], dim=1).unsqueeze(1)  # [A, 1, W + B, D]
            mask = torch.cat([context_mask, context_mask.new_zeros(A, B)], dim=1)[:, None, None, :]
            out, _ = m.eager_attention_forward(attn, q, keys, keys, mask, scaling=attn.scaling)
            out = m.apply_rotary_pos_emb(out, cos, sin, inverse=True)
            return attn.wo_b(attn.wo_a(out.reshape(A, B, self.config.o_groups, -1)).flatten(2))

        def stage_forward(self, stage, streams, pre_mix, cos, sin, context, context_mask):
            """DeepseekV41DecoderLayer.forward with the stage's attention."""
            residual = streams
            attn_pre, attn_post, attn_comb = stage.hc_mixes(streams, stage.hc_attn_fn, stage.hc_attn_scale,
                                                             stage.hc_attn_base)
            collapsed = stage.hc_collapse(streams, pre_mix)
            attn_out = self.stage_attention(stage.attn, stage.attn_norm(collapsed), cos, sin, context, context_mask)
            streams = stage.hc_expand(attn_out, residual, attn_post, attn_comb)
            residual = streams
            ffn_pre, ffn_post, ffn_comb = stage.hc_mixes(streams, stage.hc_ffn_fn, stage.hc_ffn_scale,
                                                          stage.hc_ffn_base)
            collapsed = stage.hc_collapse(streams, attn_pre)
            streams = stage.hc_expand(stage.ffn(stage.ffn_norm(collapsed)), residual, ffn_post, ffn_comb)
            return streams, ffn_pre

        def forward(self, target, features, anchor_positions, anchors, dspark_from: int = 0):
            """Pre-norm hidden [A, B, d] and its norm (the shared head's input) of the blocks anchored at
            `anchor_positions` (tensor [A]) with tokens `anchors` ([A]); features [L, n_targets * d]
            are the target's taps at positions 0..L-1 (L >= every anchor position)."""
            cfg = self.config
            A, B, W, hc = len(anchors), self.block, cfg.sliding_window, cfg.hc_mult
            rotary = target.model.rotary_emb
            main_x = self.main_norm(self.main_proj(features))
            L = main_x.shape[0]
            cos_ctx, sin_ctx = rotary(main_x.unsqueeze(0), position_ids=torch.arange(L).unsqueeze(0), layer_type="main")
            context_positions = anchor_positions.unsqueeze(1) - W + torch.arange(W)  # [A, W]
            visible = context_positions >= max(dspark_from, 0)
            context_mask = torch.zeros(A, W).masked_fill(~visible, float("-inf"))
            context_index = context_positions.clamp_min(0)

            embed = target.model.embed.weight
            x = torch.cat([embed[anchors].unsqueeze(1), self.noise_embed.expand(A, B - 1, -1)], dim=1)
            streams = x.unsqueeze(2).expand(-1, -1, hc, -1).contiguous()
            pre_mix = streams.new_zeros(A, B, hc)
            pre_mix[..., 0] = 1.0
            positions = anchor_positions.unsqueeze(1) + torch.arange(B)
            cos, sin = rotary(x, position_ids=positions, layer_type="main")
            for stage in self.stages:
                context = self.context_kv(stage, main_x, cos_ctx, sin_ctx)[context_index]
                streams, pre_mix = self.stage_forward(stage, streams, pre_mix, cos, sin, context, context_mask)
            hidden = m.DeepseekV41DecoderLayer.hc_collapse(streams, pre_mix)
            return hidden, self.norm(hidden)

        def draft(self, hidden, base_logits, anchors):
            """Greedy drafts [A, B] and confidences [A, B], slot by slot as the engine does."""
            prev = anchors
            drafts, confidence = [], []
            for k in range(self.block):
                e = self.markov_embed[prev]
                confidence.append(torch.sigmoid(self.confidence(torch.cat([hidden[:, k], e], dim=1))[:, 0]))
                prev = torch.argmax(base_logits[:, k] + e @ self.markov_head.T, dim=1)
                drafts.append(prev)
            return torch.stack(drafts, 1), torch.stack(confidence, 1)

    return DsparkTwin(config)


# Twin parameter -> checkpoint tensor (stages: mtp.{k}. + the reference layer's own names).
def checkpoint_names(twin) -> dict[str, str]:
    last = f"mtp.{len(twin.stages) - 1}."
    names = {"main_proj.weight": "mtp.0.main_proj.weight", "main_norm.weight": "mtp.0.main_norm.weight",
             "norm.weight": last + "norm.weight", "markov_embed": last + "markov_head.embed.weight",
             "markov_head": last + "markov_head.head.weight", "confidence.weight": last + "confidence_head.proj.weight",
             "noise_embed": "embed.weight"}
    for name, _ in twin.named_parameters():
        if name.startswith("stages."):
            k, rest = name[len("stages."):].split(".", 1)
            if not rest.endswith("bias_vl"):  # the stages carry no image-span bias
                names[name] = f"mtp.{k}.{rest}"
    return names


def load_twin(twin, checkpoint: Path, quant: dict | None) -> None:
    """The checkpoint's DSpark tensors (dequantised) into the twin, strictly."""
    import gen_model_golden as golden

    stored, _ = golden.read_checkpoint(checkpoint)
    block = tuple(quant["weight_block_size"]) if quant and quant.get("weight_block_size") else None
    params = dict(twin.named_parameters())
    for name, stored_name in checkpoint_names(twin).items():
        if stored_name not in stored:
            raise SystemExit(f"{checkpoint}: no {stored_name} (the DSpark twin's {name})")
        scale = stored.get(stored_name[: -len(".weight")] + ".scale") if stored_name.endswith(".weight") else None
        values, _ = golden.dequantise(stored_name, stored[stored_name], scale, block)
        if name == "noise_embed":
            values = values[twin.noise_id]
        if tuple(values.shape) != tuple(params[name].shape):
            raise SystemExit(f"{stored_name}: shape {list(values.shape)}, the twin's {name} is {list(params[name].shape)}")
        params[name].data.copy_(values.to(params[name].dtype))
    for name, p in params.items():
        if name.endswith("bias_vl"):
            p.data.zero_()


def target_taps(target, ids, chunk: int = 512):
    """The target's DSpark features [S, n_targets * d] and its final hidden states [S, d] (the head's
    input) for `ids`, in chunks through a DynamicCache (as the engine's chunked prefill)."""
    import torch
    from transformers import DynamicCache

    layers = target.config.dspark_target_layer_ids
    taps = {layer: [] for layer in layers}
    hooks = []
    for layer in layers:
        block = target.model.layers[layer]
        if block.engram is not None:
            raise SystemExit(f"dspark_twin: target layer {layer} has Engram (the tap would be before it)")
        hooks.append(block.register_forward_pre_hook(lambda _m, args, layer=layer: taps[layer].append(args[0].float().mean(2)[0])))
    try:
        cache = DynamicCache(config=target.config)
        x = torch.tensor([ids])
        hidden = []
        for i in range(0, len(ids), chunk):
            j = min(len(ids), i + chunk)
            out = target.model(input_ids=x[:, i:j], position_ids=torch.arange(i, j).unsqueeze(0),
                               past_key_values=cache, use_cache=True)
            hidden.append(out.last_hidden_state[0])
    finally:
        for hook in hooks:
            hook.remove()
    features = torch.cat([torch.cat(taps[layer]) for layer in layers], dim=1)
    return features, torch.cat(hidden)


def load_target_and_twin(reference: str, checkpoint: Path, tokenizer: str):
    """(the reference target in fp32, eval mode; the twin; the quantisation config), both from the
    checkpoint's tensors."""
    import assemble_reference

    assemble_reference.activate(reference, quiet=True)
    import torch
    from transformers import AutoTokenizer
    from transformers.models.deepseek_v41 import DeepseekV41ForCausalLM

    import gen_model_golden as g

    config, quant, _ = g.load_config(checkpoint)
    torch.manual_seed(0)
    target = DeepseekV41ForCausalLM(config).to(torch.float32).eval()
    g.load_explicit(target, checkpoint, quant)
    target.model.bind_tokenizer(AutoTokenizer.from_pretrained(tokenizer, config=config))
    twin = build_twin(target.config)
    load_twin(twin, checkpoint, quant)
    return target, twin, quant


def golden(args) -> None:
    checkpoint = Path(args.checkpoint)
    target, twin, _ = load_target_and_twin(args.reference, checkpoint, args.tokenizer)
    twin.eval()
    import torch
    from safetensors.torch import save_file

    from checkpoint_digest import sha256_file

    torch.set_num_threads(args.threads)
    prompts = json.loads(Path(args.prompts).read_text())
    tensors, made = {}, []
    t0 = time.time()
    with torch.no_grad():
        for i, prompt in enumerate(prompts):
            ids = prompt["ids"]
            anchors = [int(a) for a in args.anchors.split(",") if int(a) < len(ids)]
            features, _ = target_taps(target, ids)
            positions = torch.tensor(anchors)
            tokens = torch.tensor([ids[a] for a in anchors])
            hidden, normed = twin(target, features, positions, tokens)
            drafts, confidence = twin.draft(hidden, target.lm_head(normed), tokens)
            tensors[f"p{i}.ids"] = torch.tensor(ids, dtype=torch.int32)
            tensors[f"p{i}.anchors"] = positions.to(torch.int32)
            tensors[f"p{i}.drafts"] = drafts.to(torch.int32)
            tensors[f"p{i}.confidence"] = confidence.float().contiguous()
            made.append({"name": prompt.get("name", f"p{i}"), "tokens": len(ids), "anchors": anchors})
            log(f"{made[-1]['name']}: drafts {drafts.tolist()}")
    files = {p.name: sha256_file(p) for p in sorted(checkpoint.iterdir())
             if p.suffix == ".safetensors" or p.name == "config.json"}
    committed = checkpoint.resolve().relative_to(ROOT) if checkpoint.resolve().is_relative_to(ROOT) else checkpoint
    metadata = {"format": 1, "prompts": made, "committed": str(committed), "checkpoint": files,
                "seconds": round(time.time() - t0, 1), "torch": torch.__version__}
    save_file(tensors, args.out, metadata={"hippo_dspark_golden": json.dumps(metadata)})
    Path(args.out).chmod(0o644)
    log(f"wrote {args.out}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gp = sub.add_parser("golden", help="the twin's drafts on prompts, for the engine's test")
    gp.add_argument("--reference", required=True, help="the overlay of scripts/reference/assemble_reference.py")
    gp.add_argument("--checkpoint", required=True)
    gp.add_argument("--prompts", required=True, help='JSON list of {"name", "ids"}')
    gp.add_argument("--anchors", default="60,300,555,1000,1404", help="anchor positions (those inside each prompt)")
    gp.add_argument("--out", required=True)
    gp.add_argument("--threads", type=int, default=2)
    gp.add_argument("--tokenizer", default=str(ROOT / ".cache/deepseek-v4-tokenizer"))
    args = parser.parse_args(argv)
    golden(args)


if __name__ == "__main__":
    main()
