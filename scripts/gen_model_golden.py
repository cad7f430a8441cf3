#!/usr/bin/env python3
"""Golden data for hippo's DeepSeek-V4.1 engine from the Hugging Face reference.

Loads a checkpoint in the release layout (config.json + safetensors shards + tokenizer.json, as
`hippo model init` writes it), runs transformers' `DeepseekV41ForCausalLM` in fp32 on the CPU and
writes, for each prompt, what the engine's tests compare against: per-position logits in compact
form and a greedy continuation. The reference is GitHub-only code assembled outside the repository
(`scripts/reference/README.md`); torch and transformers are NOT test dependencies: the tests read
the committed output file, never run this script.

    python scripts/gen_model_golden.py --reference OVERLAY --checkpoint DIR --out FILE.safetensors \\
        [--prompts PROMPTS.json | --builtin-prompts [tiny|wide]] [--continue 32] [--top-k 8] [--probes 8]
    python scripts/gen_model_golden.py --reference OVERLAY --selftest WORKDIR
    python scripts/gen_model_golden.py --reference OVERLAY --checkpoint DIR --engram-map FILE.safetensors[.zst]

--engram-map writes the reference's Engram addressing (engram.token_map I32 [V], the compressed id of
every token; engram.multipliers I64 [L, N]; engram.primes I64 [L, N-1, H]; engram.offsets I64
[L, (N-1)*H]; metadata `hippo_engram`); a name ending in .zst gets the safetensors image inside one
zstd frame.

Output format (a safetensors file; hippo's own reader and the Python `safetensors` package read it).
Prompt i (0-based, in the order given) has these tensors, S = prompt length, N = continuation length,
K = --top-k, J = --probes, V = vocab_size:

  p{i}.ids                 I32 [S]     the prompt token ids (fed as one sequence, positions 0..S-1)
  p{i}.top_ids             I32 [S, K]  ids of the K largest logits at every prompt position
  p{i}.top_logits          F32 [S, K]  those logits, descending (ties: lower id first)
  p{i}.lse                 F32 [S]     log-sum-exp of the full logit vector at every position
  p{i}.probe_logits        F32 [S, J]  logits of fixed probe ids: probe(s, j) = (s*131 + j*8081 + 7) mod V
  p{i}.greedy_ids          I32 [N]     greedy continuation: the prompt prefilled in one call with a
                                       DynamicCache, then N-1 single-token decode steps
  p{i}.greedy_top_ids      I32 [N, K]  top-K of the logits each greedy token was chosen from
  p{i}.greedy_top_logits   F32 [N, K]  (step 0 = last prompt position of the cached prefill,
  p{i}.greedy_lse          F32 [N]      step n = the decode step that consumed greedy_ids[n-1])
  p{i}.engram_hash         I32 [S, L, C]  only with --with-hashes: the Engram table rows (offsets
                                       included) of every prompt position, L Engram layers,
                                       C = (max_ngram-1)*heads columns

`__metadata__["hippo_golden"]` is a JSON object: format version, prompt names, K, J, the probe
formula, the checkpoint (config.json/tokenizer.json/index/shard sha256), the reference (upstream
commit, file sha256, transformers/torch versions, the shim steps), the loader, every config value
the script had to normalise, and the self-checks per prompt: a one-shot prefill of prompt + greedy
continuation (fresh cache) against the cached prefill (on the stored top-K logits, lse and probes) and
against every decode step (full logits): max|delta|, exact top-k ties, and `first_unstable_position`,
the first sequence position (prompt position p < S; decode step n is position S-1+n) where the two
differ by more than 1e-4 (null: none). Torch does not agree with itself from there on, so an engine
can be compared with the file only before it.

Every tensor is little-endian, row-major. Nothing else is stored: weights never leave the checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts" / "reference"))

import assemble_reference  # noqa: E402  (hippo's overlay activation + shim)
from checkpoint_digest import SKIPPED_PREFIXES, sha256_file  # noqa: E402

FORMAT_VERSION = 1
# Self-check threshold: where torch's one-shot and cached runs differ by more than this, a quantiser
# rounding or a top-k selection flipped between them (docs/reference-model.md, "Sensitivity").
UNSTABLE = 1e-4
PROBE_A, PROBE_B, PROBE_C = 131, 8081, 7


log = lambda msg: print(f"gen_model_golden: {msg}", file=sys.stderr, flush=True)  # noqa: E731


# --------------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------------

def load_config(ckpt: Path):
    """config.json -> DeepseekV41Config for the reference, fp32, without quantization_config.
    Returns (config, quantization_config or None, list of normalisations applied)."""
    from transformers.models.deepseek_v41 import DeepseekV41Config, DeepseekV41TextConfig

    raw = json.loads((ckpt / "config.json").read_text())
    if raw.get("model_type") != "deepseek_v41":
        raise SystemExit(f"{ckpt}/config.json: model_type {raw.get('model_type')!r}, expected 'deepseek_v41'")
    notes = []
    quant = raw.pop("quantization_config", None)
    text = raw.get("text_config")
    if not isinstance(text, dict):
        raise SystemExit(f"{ckpt}/config.json: text_config missing")
    # The config classes are strict dataclasses: an integral JSON number in a float field
    # (`"gate_temp": 1`) is a validation error. Convert, and say so.
    field_types = {f.name: f.type for f in dataclasses.fields(DeepseekV41TextConfig)}
    for key, value in list(text.items()):
        if field_types.get(key) in (float, "float") and isinstance(value, int) and not isinstance(value, bool):
            text[key] = float(value)
            notes.append(f"text_config.{key}: int {value} read as float")
    # The release spells the Engram pad id `engram_pad_token_id`; the reference reads `engram_pad_id`.
    if "engram_pad_token_id" in text and "engram_pad_id" not in text:
        text["engram_pad_id"] = text.pop("engram_pad_token_id")
        notes.append("text_config.engram_pad_token_id passed as engram_pad_id")
    # The reference applies YaRN only when rope_scaling says `rope_type: yarn`; a legacy
    # `type: yarn` key silently falls back to plain RoPE (see docs/reference-model.md).
    scaling = text.get("rope_scaling")
    if isinstance(scaling, dict) and "type" in scaling and "rope_type" not in scaling:
        scaling["rope_type"] = scaling.pop("type")
        notes.append("text_config.rope_scaling.type passed as rope_type")
    # A tied head is stored once, as embed.weight (hippo reads it as the head); the reference class
    # keeps its own lm_head, which read_checkpoint fills with the same values.
    if text.get("tie_word_embeddings"):
        text["tie_word_embeddings"] = raw["tie_word_embeddings"] = False
        notes.append("tie_word_embeddings: the reference's lm_head loaded from embed.weight")
    raw.pop("dtype", None)
    raw.pop("torch_dtype", None)
    config = DeepseekV41Config.from_dict(raw)
    tc = config.get_text_config()
    if isinstance(scaling, dict) and scaling.get("rope_type") == "yarn":
        if tc.rope_parameters["compress"].get("rope_type") != "yarn":
            raise SystemExit("reference config: YaRN requested but not in effect on the compress RoPE")
    return config, quant, notes


# --------------------------------------------------------------------------------------------
# checkpoint reading and dequantisation (explicit; no transformers quantizer involved)
# --------------------------------------------------------------------------------------------

def _e8m0_to_float(t):
    import torch

    b = t.view(torch.uint8).to(torch.int32)
    out = torch.exp2((b - 127).to(torch.float32))
    return torch.where(b == 255, torch.full_like(out, float("nan")), out)


_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _expand_scale(scale, rows: int, cols: int, b0: int, b1: int):
    return scale.repeat_interleave(b0, dim=0).repeat_interleave(b1, dim=1)[:rows, :cols]


def dequantise(name: str, weight, scale, block_size):
    """Logical fp32 values of one stored tensor. `scale` is the `.scale` sibling or None."""
    import torch

    if scale is None:
        if weight.dtype in (torch.float8_e4m3fn, torch.int8, torch.uint8):
            raise SystemExit(f"checkpoint: {name}: {weight.dtype} without a .scale sibling")
        return weight.to(torch.float32), None
    s = _e8m0_to_float(scale) if scale.dtype in (torch.float8_e8m0fnu, torch.uint8) else scale.float()
    if weight.dtype == torch.float8_e4m3fn:
        rows, cols = weight.shape
        srows, scols = s.shape
        if block_size and (srows, scols) == (math.ceil(rows / block_size[0]), math.ceil(cols / block_size[1])):
            b0, b1 = block_size
        elif rows % srows == 0 and cols % scols == 0:  # e.g. Engram tables: 1 x 32 blocks
            b0, b1 = rows // srows, cols // scols
        else:
            raise SystemExit(f"checkpoint: {name}: scale shape {list(s.shape)} does not tile {list(weight.shape)}")
        return weight.to(torch.float32) * _expand_scale(s, rows, cols, b0, b1), f"fp8 {b0}x{b1}"
    if weight.dtype in (torch.int8, torch.uint8):  # packed FP4 E2M1, even element in the low nibble
        rows, half = weight.shape
        cols = 2 * half
        u = weight.view(torch.uint8)
        codes = torch.stack([u & 0xF, u >> 4], dim=-1).reshape(rows, cols).long()
        values = torch.tensor(_E2M1, dtype=torch.float32)[codes]
        srows, scols = s.shape
        if srows != rows or cols % scols:
            raise SystemExit(f"checkpoint: {name}: FP4 scale shape {list(s.shape)} does not fit [{rows}, {cols}]")
        b1 = cols // scols
        return values * _expand_scale(s, rows, cols, 1, b1), f"fp4 1x{b1}"
    raise SystemExit(f"checkpoint: {name}: a .scale sibling on a {weight.dtype} tensor")


def native_to_reference(name: str) -> str | None:
    if name.startswith(SKIPPED_PREFIXES):
        return None
    if name == "head.weight":
        return "lm_head.weight"
    if name in ("embed.weight", "norm.weight") or name.startswith("layers."):
        return "model." + name
    raise SystemExit(f"checkpoint: unexpected tensor {name} (not in the release's naming)")


def read_checkpoint(ckpt: Path):
    """{native name: torch tensor as stored}, plus {shard file: sha256}. A tied head (config.json's
    text_config.tie_word_embeddings) reads as a `head.weight` that is embed.weight."""
    from safetensors import safe_open

    index = ckpt / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = sorted(set(weight_map.values()))
    elif (ckpt / "model.safetensors").is_file():
        weight_map, shards = None, ["model.safetensors"]
    else:
        raise SystemExit(f"{ckpt}: no model.safetensors.index.json or model.safetensors")
    tensors = {}
    for shard in shards:
        with safe_open(str(ckpt / shard), framework="pt") as f:
            for key in f.keys():
                if weight_map is not None and weight_map.get(key) != shard:
                    raise SystemExit(f"{ckpt}/{shard}: tensor {key} is not indexed to this shard")
                if key in tensors:
                    raise SystemExit(f"{ckpt}/{shard}: tensor {key} appears twice")
                tensors[key] = f.get_tensor(key)
    if weight_map is not None and set(weight_map) != set(tensors):
        missing = sorted(set(weight_map) - set(tensors))[:5]
        raise SystemExit(f"{ckpt}: indexed tensors missing from the shards: {missing}")
    if json.loads((ckpt / "config.json").read_text()).get("text_config", {}).get("tie_word_embeddings"):
        if "head.weight" in tensors:
            raise SystemExit(f"{ckpt}: a tied head is stored once, as embed.weight; the shards hold head.weight too")
        tensors["head.weight"] = tensors["embed.weight"]
    return tensors, {shard: sha256_file(ckpt / shard) for shard in shards}


def load_explicit(model, ckpt: Path, quant: dict | None):
    """Rename + dequantise the release tensors and load them into `model` (fp32), strictly: every
    model parameter must come from the checkpoint with its exact shape, every non-skipped checkpoint
    tensor must be used."""
    import torch

    stored, shard_digests = read_checkpoint(ckpt)
    block = tuple(quant["weight_block_size"]) if quant and quant.get("weight_block_size") else None
    expected = model.state_dict()
    loaded, formats, skipped = {}, {}, []
    scales = {k for k in stored if k.endswith(".scale")}
    for name, tensor in stored.items():
        if name in scales:
            continue
        target = native_to_reference(name)
        if target is None:
            skipped.append(name)
            continue
        sibling = name[: -len(".weight")] + ".scale" if name.endswith(".weight") else None
        scale = stored.get(sibling) if sibling else None
        values, fmt = dequantise(name, tensor, scale, block)
        if scale is not None:
            scales.discard(sibling)
            formats[fmt] = formats.get(fmt, 0) + 1
            # The Engram table keeps its scale as a parameter (used only when the table itself is
            # loaded as fp8; in fp32 the dequantised rows are the table).
            scale_target = target[: -len(".weight")] + ".scale"
            if scale_target in expected:
                loaded[scale_target] = _e8m0_to_float(scale)
        if target not in expected:
            raise SystemExit(f"checkpoint: {name} -> {target}: the reference has no such parameter")
        if tuple(values.shape) != tuple(expected[target].shape):
            raise SystemExit(f"checkpoint: {name}: logical shape {list(values.shape)}, the reference "
                             f"expects {list(expected[target].shape)}")
        loaded[target] = values
    leftover = sorted(k for k in scales if not k.startswith(SKIPPED_PREFIXES))
    if leftover:
        raise SystemExit(f"checkpoint: .scale tensors without a weight: {leftover[:5]}")
    for key in expected:
        if key not in loaded and key.endswith("engram.embed.scale"):
            loaded[key] = torch.ones_like(expected[key])  # plain layout: no scale, unused in fp32
    missing = sorted(set(expected) - set(loaded))
    if missing:
        raise SystemExit(f"checkpoint: the reference needs tensors the checkpoint lacks: {missing[:8]}")
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in loaded.items()}, strict=True, assign=False)
    return {
        "tensors_loaded": len(loaded),
        "tensors_skipped": len(skipped),
        "skipped_prefixes": sorted({s.split(".")[0] for s in skipped}),
        "dequantised": formats,
        "shards": shard_digests,
    }


def load_from_pretrained(ckpt: Path, config):
    """transformers' own path, for cross-checking: needs `accelerate` for FP8 checkpoints (on a CPU
    it dequantises at load) and the `head.weight` rename that PyPI's conversion mapping lacks."""
    import torch
    from transformers.models.deepseek_v41 import DeepseekV41ForCausalLM

    raw = json.loads((ckpt / "config.json").read_text())
    if "quantization_config" in raw:
        config.quantization_config = raw["quantization_config"]
    model, info = DeepseekV41ForCausalLM.from_pretrained(
        str(ckpt), config=config, dtype=torch.float32, output_loading_info=True,
        key_mapping={r"^head\.weight$": "lm_head.weight"})
    missing = [k for k in info["missing_keys"] if not k.endswith("engram.embed.scale")]
    unexpected = [k for k in info["unexpected_keys"] if not k.startswith(SKIPPED_PREFIXES)]
    if missing or unexpected or info["mismatched_keys"]:
        raise SystemExit(f"from_pretrained: missing {missing[:5]}, unexpected {unexpected[:5]}, "
                         f"mismatched {info['mismatched_keys'][:5]}")
    # On a machine without a GPU the FP8 quantizer dequantises to bfloat16 whatever `dtype` says;
    # E4M3 and E2M1 values times a power of two are exact in bfloat16, so widening is lossless.
    return model.to(torch.float32).eval()


def build_reference(ckpt: Path, loader: str = "explicit"):
    import torch
    from transformers import AutoTokenizer
    from transformers.models.deepseek_v41 import DeepseekV41ForCausalLM

    config, quant, notes = load_config(ckpt)
    for note in notes:
        log(f"config: {note}")
    t0 = time.time()
    if loader == "explicit":
        torch.manual_seed(0)  # the init is overwritten entirely; seeded only for repeatability
        model = DeepseekV41ForCausalLM(config).to(torch.float32).eval()
        load_info = load_explicit(model, ckpt, quant)
    else:
        model = load_from_pretrained(ckpt, config)
        load_info = {"shards": {p.name: sha256_file(p) for p in sorted(ckpt.glob("*.safetensors"))}}
    load_info["loader"] = loader
    load_info["seconds"] = round(time.time() - t0, 3)
    # config= : AutoTokenizer would otherwise parse config.json again, without the normalisations
    tokenizer = AutoTokenizer.from_pretrained(str(ckpt), config=config)
    tc = model.config
    if tc.engram_layer_ids:
        model.model.bind_tokenizer(tokenizer)
    return model, tokenizer, {"config_notes": notes, "load": load_info, "quantization_config": quant}


# --------------------------------------------------------------------------------------------
# top-k tie watch (diagnostic only: the reference's result is unchanged)
# --------------------------------------------------------------------------------------------

@contextmanager
def watch_topk_ties(report: dict):
    """Counts top-k calls inside the reference whose k-th and (k+1)-th largest finite values are
    exactly equal: there the reference's choice is torch's unspecified tie order, so an engine
    cannot be expected to match it. Keyed by the calling function."""
    import torch

    original = torch.Tensor.topk

    def topk(self, k, dim=-1, largest=True, sorted=True, **kwargs):  # noqa: A002
        result = original(self, k, dim=dim, largest=largest, sorted=sorted, **kwargs)
        n = self.shape[dim]
        if largest and 0 < k < n and self.is_floating_point():
            with torch.no_grad():
                kth = result.values.amin(dim=dim, keepdim=True)
                rest = self.scatter(dim, result.indices, float("-inf"))
                nxt = rest.amax(dim=dim, keepdim=True)
                tied = (kth == nxt) & torch.isfinite(kth)
                count = int(tied.sum())
            if count:
                frame = sys._getframe(1)
                site = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
                report[site] = report.get(site, 0) + count
        return result

    torch.Tensor.topk = topk
    try:
        yield report
    finally:
        torch.Tensor.topk = original


@contextmanager
def stable_topk(enabled: bool):
    """With --stable-topk: the reference's top-k calls (indexer, candidate blocks, router) break
    exact ties by the lower index (a stable descending sort). Identical to torch.topk wherever
    there is no exact tie at the k-th place; where there is one, torch's order is unspecified and
    this gives the rule an engine can implement. Recorded in the metadata."""
    import torch

    if not enabled:
        yield
        return
    original = torch.Tensor.topk

    def topk(self, k, dim=-1, largest=True, sorted=True, **kwargs):  # noqa: A002
        values, indices = torch.sort(self, dim=dim, descending=largest, stable=True)
        return torch.return_types.topk((values.narrow(dim, 0, k), indices.narrow(dim, 0, k)))

    torch.Tensor.topk = topk
    try:
        yield
    finally:
        torch.Tensor.topk = original


# --------------------------------------------------------------------------------------------
# golden data
# --------------------------------------------------------------------------------------------

def summarise_logits(logits, top_k: int, n_probes: int, first_position: int):
    """logits [T, V] fp32 -> (top_ids, top_logits, lse, probe_logits) for positions
    first_position .. first_position+T-1. Top-k ties are ordered by lower id first."""
    import torch

    t, v = logits.shape
    order = torch.sort(-logits, dim=-1, stable=True).indices[:, :top_k]  # stable: lower id first
    top_logits = logits.gather(1, order)
    lse = torch.logsumexp(logits.double(), dim=-1).float()
    positions = torch.arange(first_position, first_position + t).unsqueeze(1)
    probes = (positions * PROBE_A + torch.arange(n_probes).unsqueeze(0) * PROBE_B + PROBE_C) % v
    return order.to(torch.int32), top_logits, lse, logits.gather(1, probes)


def run_prompt(model, ids: list[int], n_continue: int, top_k: int, n_probes: int, self_check: bool,
               with_hashes: bool, chunk: int = 256):
    import torch
    from transformers import DynamicCache

    out = {}
    checks = {}
    input_ids = torch.tensor([ids], dtype=torch.long)
    s = len(ids)
    cache = DynamicCache(config=model.config)
    t0 = time.time()
    with torch.no_grad():
        hidden = model.model(input_ids=input_ids, past_key_values=cache, use_cache=True).last_hidden_state[0]
        parts = [summarise_logits(model.lm_head(hidden[i:i + chunk]).float(), top_k, n_probes, i)
                 for i in range(0, s, chunk)]
    checks["prefill_seconds"] = round(time.time() - t0, 3)
    out["ids"] = torch.tensor(ids, dtype=torch.int32)
    out["top_ids"] = torch.cat([p[0] for p in parts])
    out["top_logits"] = torch.cat([p[1] for p in parts])
    out["lse"] = torch.cat([p[2] for p in parts])
    out["probe_logits"] = torch.cat([p[3] for p in parts])
    if with_hashes and model.model.engram_hash_state is not None:
        state = model.model.engram_hash_state
        out["engram_hash"] = state(input_ids, torch.arange(s).unsqueeze(0), None)[0].to(torch.int32)

    # greedy continuation through the cache: step 0 uses the prefill's last position
    last_logits = model.lm_head(hidden[-1:]).float()
    greedy, step_logits = [], []
    t0 = time.time()
    with torch.no_grad():
        for step in range(n_continue):
            step_logits.append(last_logits)
            token = int(torch.sort(-last_logits[0], stable=True).indices[0])
            greedy.append(token)
            if step + 1 == n_continue:
                break
            position = torch.tensor([[s + step]])
            last_logits = model(input_ids=torch.tensor([[token]]), position_ids=position,
                                past_key_values=cache, use_cache=True).logits[:, -1].float()
    checks["decode_seconds"] = round(time.time() - t0, 3)
    if n_continue:
        g = summarise_logits(torch.cat(step_logits), top_k, n_probes, s - 1)
        out["greedy_ids"] = torch.tensor(greedy, dtype=torch.int32)
        out["greedy_top_ids"], out["greedy_top_logits"], out["greedy_lse"] = g[0], g[1], g[2]

    if self_check and n_continue:
        # One-shot prefill over prompt + continuation: its logits must agree with the cached
        # prefill at every prompt position and with every decode step. It runs with a fresh cache:
        # the reference's use_cache=False path concatenates the compressed KV of successive KV
        # sources instead of replacing it (docs/reference-model.md), so it is never used here.
        # Prompt positions are compared on what the file stores (the top-K logits at the stored
        # ids, the log-sum-exp and the probe logits); decode steps on the full logit vector.
        # Sequence position p is prompt position p (p < S) or decode step p - (S - 1) (p >= S - 1).
        full = torch.tensor([ids + greedy[:-1]], dtype=torch.long)
        with torch.no_grad():
            h = model.model(input_ids=full, past_key_values=DynamicCache(config=model.config),
                            use_cache=True).last_hidden_state[0]
            worst_prompt, worst_decode = 0.0, 0.0
            argmax_same = True
            over, first_over = 0, None  # prompt positions whose stored values differ by > 1e-3
            first_unstable = None       # first sequence position whose values differ by > UNSTABLE
            first_unstable_prompt, first_unstable_step = None, None
            for i in range(0, h.shape[0], chunk):
                logits = model.lm_head(h[i:i + chunk]).float()
                _, _, lse, probes = summarise_logits(logits, top_k, n_probes, i)
                for j in range(logits.shape[0]):
                    p = i + j
                    if p < s:
                        got = logits[j].gather(0, out["top_ids"][p].long())
                        d = max(float((got - out["top_logits"][p]).abs().max()),
                                float((lse[j] - out["lse"][p]).abs()),
                                float((probes[j] - out["probe_logits"][p]).abs().max()))
                        worst_prompt = max(worst_prompt, d)
                        if d > 1e-3:
                            over += 1
                            first_over = p if first_over is None else first_over
                        if d > UNSTABLE and first_unstable_prompt is None:
                            first_unstable_prompt = p
                            first_unstable = p if first_unstable is None else min(first_unstable, p)
                    if p >= s - 1:
                        n = p - (s - 1)
                        d = float((logits[j] - step_logits[n][0]).abs().max())
                        worst_decode = max(worst_decode, d)
                        if int(logits[j].argmax()) != greedy[n]:
                            argmax_same = False
                        if d > UNSTABLE and first_unstable_step is None:
                            first_unstable_step = n
                            first_unstable = p if first_unstable is None else min(first_unstable, p)
        checks["oneshot_vs_cached_prefill_max_abs_topk"] = worst_prompt
        checks["oneshot_vs_cached_prefill_positions_over_1e-3"] = over
        checks["oneshot_vs_cached_prefill_first_over_1e-3"] = first_over
        checks["oneshot_vs_decode_max_abs"] = worst_decode
        checks["oneshot_argmax_equals_greedy"] = argmax_same
        checks["oneshot_vs_cached_prefill_first_over_1e-4"] = first_unstable_prompt
        checks["oneshot_vs_decode_first_step_over_1e-4"] = first_unstable_step
        checks["first_unstable_position"] = first_unstable
    return out, checks


def builtin_prompts(tokenizer, vocab_size: int) -> list[dict]:
    """Three deterministic prompts: the HF integration test's chat prompt (14 tokens), an English
    paragraph, and a long (> 4,096 tokens) mixture of text and pseudo-random ids that crosses many
    compression groups, windows and candidate blocks."""
    chat = [0, 128803, 63006, 44388, 305, 4575, 678, 1205, 2645, 440, 477, 16, 128804, 128822]
    paragraph = (
        "hippo is a runtime host for long-lived agents. Each agent keeps its model state between turns, "
        "so a conversation that lasts a week costs no more to continue than one that started a minute ago. "
        "The engine compresses the key-value cache into a few hundred bytes per token, reads only the "
        "blocks an indexer selects, and looks up n-gram memories by hashing the last four tokens. "
        "Numbers like 3.14159, 2026-12-02 and 129280 appear, as do names: DeepSeek, Engram, Sinkhorn.")
    text_ids = [0] + tokenizer(paragraph, add_special_tokens=False)["input_ids"]
    # long: repeated paragraph (real n-grams, repeats for Engram and the indexer) interleaved
    # with blocks of LCG ids (no special ids below 3)
    long_ids, state = [0], 12345
    while len(long_ids) < 4700:
        long_ids += text_ids[1:]
        block = []
        for _ in range(97):
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            block.append(3 + (state >> 33) % (min(vocab_size, 128000) - 3))
        long_ids += block
    return [{"name": "chat14", "ids": chat}, {"name": "paragraph", "ids": text_ids},
            {"name": "long4700", "ids": long_ids[:4700]}]


def wide_prompts(tokenizer, vocab_size: int) -> list[dict]:
    """For the release-width `wide` preset: chat14 and the first 800 ids of long4700 (past 512 ratio-1
    entries, so the top-512 saturates; long4700 itself would need gigabytes of attention scores)."""
    chat, _, long = builtin_prompts(tokenizer, vocab_size)
    return [chat, {"name": "mixed800", "ids": long["ids"][:800]}]


def generate(args) -> None:
    import torch
    from safetensors.torch import save_file

    torch.set_num_threads(args.threads)
    info = assemble_reference.activate(args.reference)
    ckpt = Path(args.checkpoint)
    model, tokenizer, build_info = build_reference(ckpt, args.loader)
    vocab = model.config.vocab_size
    if args.prompts:
        prompts = json.loads(Path(args.prompts).read_text())
        for p in prompts:
            if "ids" not in p:
                p["ids"] = tokenizer(p["text"], add_special_tokens=False)["input_ids"]
    else:
        prompts = (wide_prompts if args.builtin_prompts == "wide" else builtin_prompts)(tokenizer, vocab)
    if args.only:
        wanted = args.only.split(",")
        prompts = [p for p in prompts if p["name"] in wanted]
    for p in prompts:
        if not p["ids"] or max(p["ids"]) >= vocab or min(p["ids"]) < 0:
            raise SystemExit(f"prompt {p['name']}: ids outside [0, {vocab})")
    tensors, prompt_meta = {}, []
    ties: dict = {}
    t_all = time.time()
    for i, p in enumerate(prompts):
        model.model.engram_hash_state = None
        if model.config.engram_layer_ids:
            model.model.bind_tokenizer(tokenizer)  # fresh n-gram history per prompt
        with stable_topk(args.stable_topk), watch_topk_ties(ties) if not args.no_tie_watch else _null():
            before = dict(ties)
            out, checks = run_prompt(model, p["ids"], args.continue_tokens, args.top_k, args.probes,
                                     not args.no_self_check, args.with_hashes)
            checks["topk_ties"] = {k: v - before.get(k, 0) for k, v in ties.items() if v != before.get(k, 0)}
        for key, value in out.items():
            tensors[f"p{i}.{key}"] = value.contiguous()
        prompt_meta.append({"index": i, "name": p["name"], "tokens": len(p["ids"]), **checks})
        log(f"prompt {i} {p['name']}: {len(p['ids'])} tokens, {checks}")
    total_ties = sum(sum(m["topk_ties"].values()) for m in prompt_meta)
    meta = {
        "format": "hippo-golden", "version": FORMAT_VERSION,
        "prompts": prompt_meta,
        "top_k": args.top_k, "probes": args.probes, "continue": args.continue_tokens,
        "probe_formula": f"(s*{PROBE_A} + j*{PROBE_B} + {PROBE_C}) mod {vocab}",
        "dtype": "float32", "device": "cpu", "threads": args.threads,
        "topk_tie_rule": "lower index first (--stable-topk)" if args.stable_topk else "torch.topk (unspecified on ties)",
        "checkpoint": {
            "dir": ckpt.name,
            "made_by": args.made_by,
            "config_sha256": sha256_file(ckpt / "config.json"),
            "tokenizer_sha256": sha256_file(ckpt / "tokenizer.json") if (ckpt / "tokenizer.json").is_file() else None,
            "index_sha256": sha256_file(ckpt / "model.safetensors.index.json")
            if (ckpt / "model.safetensors.index.json").is_file() else None,
            **build_info,
        },
        "reference": {k: info[k] for k in ("transformers", "torch", "shim")} | {
            "upstream_commit": info["manifest"]["pinned_commit"], "files": info["manifest"]["files"],
            "pinned": info["manifest"]["pinned"]},
        "seconds": round(time.time() - t_all, 3),
    }
    if total_ties and not (args.allow_ties or args.stable_topk):
        raise SystemExit(f"gen_model_golden: {total_ties} exact top-k ties inside the reference "
                         f"({[m['topk_ties'] for m in prompt_meta]}): its output there depends on torch's "
                         "tie order. Use a config without ties (see docs/reference-model.md) or "
                         "--allow-ties to write the file anyway with the count recorded.")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, args.out, metadata={"hippo_golden": json.dumps(meta, sort_keys=True)})
    size = os.path.getsize(args.out)
    log(f"wrote {args.out}: {len(tensors)} tensors, {size} bytes, {meta['seconds']} s")


@contextmanager
def _null():
    yield


def engram_map(args) -> None:
    """The Engram tables' addressing as the reference builds it: the compressed token map from
    tokenizer.json, the per-layer hash multipliers (NumPy PCG64), primes and row offsets."""
    import torch
    from safetensors.torch import save_file

    assemble_reference.activate(args.reference)
    model, tokenizer, _ = build_reference(Path(args.checkpoint), args.loader)
    state = model.model.engram_hash_state
    if state is None:
        raise SystemExit("the checkpoint has no Engram layers")
    tensors = {
        "engram.token_map": state.token_map.to(torch.int32),
        "engram.multipliers": state.multipliers.to(torch.int64),
        "engram.primes": state.primes.to(torch.int64),
        "engram.offsets": state.offsets.to(torch.int64),
    }
    ckpt = Path(args.checkpoint)
    meta = {"compressed_vocab_size": int(state.token_map.max()) + 1, "pad_id": int(state.pad_id),
            "layer_ids": list(state.layout.layer_ids),
            "tokenizer_sha256": sha256_file(ckpt / "tokenizer.json"),
            "config": {k: getattr(model.config, k) for k in (
                "engram_vocab_size", "engram_max_ngram_size", "engram_n_heads", "engram_pad_id",
                "engram_compressed_vocab_size")},
            "reference_upstream_commit": assemble_reference.UPSTREAM_COMMIT}
    out = Path(args.engram_map)
    out.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"hippo_engram": json.dumps(meta, sort_keys=True)}
    if out.suffix == ".zst":
        # A zstd frame around the safetensors image (the C++ side decompresses, then parses it with
        # engine/weights/safetensors.h). The zstd CLI: a Debian package scripts/setup installs.
        import subprocess

        from safetensors.torch import save

        image = save(tensors, metadata=metadata)
        # --stream-size: the frame header records the content size (ZSTD_getFrameContentSize), as it
        # would for a file argument, so a reader can size its buffer and decompress in one call.
        subprocess.run(["zstd", "-19", "-q", "-f", f"--stream-size={len(image)}", "-o", str(out)],
                       input=image, check=True)
        log(f"wrote {out}: {len(image)} bytes of safetensors, {os.path.getsize(out)} compressed; {meta}")
    else:
        save_file(tensors, str(out), metadata=metadata)
        log(f"wrote {out}: {os.path.getsize(out)} bytes; {meta}")


# --------------------------------------------------------------------------------------------
# self-test: write a random checkpoint in the release layout with `safetensors`, load it back
# --------------------------------------------------------------------------------------------

def _fp8_quantise(w, b0: int, b1: int):
    """(E4M3 weight, E8M0 scale bytes, dequantised) with power-of-two block scales."""
    import torch

    rows, cols = w.shape
    pr, pc = -rows % b0, -cols % b1
    padded = torch.nn.functional.pad(w.float(), (0, pc, 0, pr))
    blocks = padded.view(padded.shape[0] // b0, b0, padded.shape[1] // b1, b1)
    amax = blocks.abs().amax(dim=(1, 3)).clamp_min(1e-4)
    exp = torch.ceil(torch.log2(amax / 448.0))
    scale = torch.exp2(exp)
    q = (blocks / scale[:, None, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    deq = (q.float() * scale[:, None, :, None]).view(padded.shape)[:rows, :cols]
    scale_bytes = (exp + 127).to(torch.uint8).view(torch.float8_e8m0fnu)
    return q.view(padded.shape)[:rows, :cols].contiguous(), scale_bytes, deq


def _fp4_quantise(w, b1: int = 32):
    import torch

    rows, cols = w.shape
    groups = w.float().view(rows, cols // b1, b1)
    amax = groups.abs().amax(-1).clamp_min(1e-4)
    exp = torch.ceil(torch.log2(amax / 6.0))
    scale = torch.exp2(exp)
    q = (groups / scale.unsqueeze(-1)).clamp(-6, 6)
    codes = torch.bucketize(q.abs(), torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]), right=False)
    values = torch.tensor(_E2M1[:8])[codes] * torch.where(q < 0, -1.0, 1.0)
    nibbles = (codes.to(torch.uint8) | ((q < 0).to(torch.uint8) << 3)).view(rows, cols)
    packed = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).view(torch.int8)
    return packed, (exp + 127).to(torch.uint8).view(torch.float8_e8m0fnu), (values * scale.unsqueeze(-1)).view(rows, cols)


def write_release_checkpoint(model, out: Path, quantised: bool, tokenizer_dir: Path, config_dict: dict):
    """Write `model`'s weights in the release layout (native names; FP8 dense linears, FP4 routed
    experts, FP8 Engram tables when `quantised`), rounding the in-memory model to exactly what the
    checkpoint holds, so loading it back must reproduce the model bit for bit."""
    import shutil

    import torch
    from safetensors.torch import save_file

    fp8_suffixes = ("attn.wq_a.weight", "attn.wq_b.weight", "attn.wkv.weight", "attn.wo_a.weight",
                    "attn.wo_b.weight", "indexer.wq_b.weight", "engram.wkv.weight",
                    "shared_experts.w1.weight", "shared_experts.w2.weight", "shared_experts.w3.weight")
    f32_leaves = ("hc_attn_fn", "hc_attn_base", "hc_attn_scale", "hc_ffn_fn", "hc_ffn_base", "hc_ffn_scale",
                  "attn_sink", "bias", "bias_vl", "q_weight", "k_weight")
    native = {}
    with torch.no_grad():
        for name, param in model.named_parameters():
            n = name.replace("model.layers.", "layers.").replace("model.embed.", "embed.")
            n = n.replace("model.norm.", "norm.").replace("lm_head.", "head.")
            leaf = name.split(".")[-1]
            if name.endswith("engram.embed.scale"):
                continue
            if quantised and name.endswith("engram.embed.weight"):
                q, s, deq = _fp8_quantise(param, 1, 32)
                native[n], native[n[:-7] + ".scale"] = q, s
                param.copy_(deq)
            elif quantised and ".experts." in name and param.ndim == 2:
                q, s, deq = _fp4_quantise(param)
                native[n], native[n[:-7] + ".scale"] = q, s
                param.copy_(deq)
            elif quantised and name.endswith(fp8_suffixes):
                q, s, deq = _fp8_quantise(param, 32, 32)
                native[n], native[n[:-7] + ".scale"] = q, s
                param.copy_(deq)
            elif leaf in f32_leaves:
                native[n] = param.detach().float().clone()
            else:
                bf = param.detach().to(torch.bfloat16)
                native[n] = bf.clone()
                param.copy_(bf.float())
    out.mkdir(parents=True, exist_ok=True)
    names = sorted(native)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    weight_map = {}
    for shard, keys in shards.items():
        save_file({k: native[k].contiguous() for k in keys}, str(out / shard), metadata={"format": "pt"})
        weight_map.update({k: shard for k in keys})
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    cfg = dict(config_dict)
    if quantised:
        cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic",
                                      "weight_block_size": [32, 32], "scale_fmt": "ue8m0", "expert_dtype": "fp4"}
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_dir / f, out / f)


def tiny_text_config(engram_sizes=None) -> dict:
    """Every structural feature of the release at small width (the same schedule as hippo's `tiny`
    preset, with 8 index heads so that the indexer has no exact score ties)."""
    return dict(
        vocab_size=129280, hidden_size=32, num_hidden_layers=12, num_attention_heads=4, num_key_value_heads=1,
        head_dim=64, qk_rope_head_dim=16, q_lora_rank=32, o_groups=2, o_lora_rank=32, sliding_window=128,
        compress_ratios=[0, 0] + [2] * 5 + [1] * 5 + [0] * 3, kv_source_layer_ids=[2, 4, 7],
        index_source_layer_ids=[2, 4, 7, 9, 11], candidate_source_layer_id=7, candidate_topk_blocks=4,
        candidate_block_size=4, index_n_heads=8, index_head_dim=32, index_topk=16, n_routed_experts=8,
        num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32, engram_layer_ids=[1, 4],
        engram_vocab_size=1000, engram_n_heads=2, engram_head_dim=32, engram_max_ngram_size=4, engram_pad_id=2,
        engram_compressed_vocab_size=99092, engram_num_embeddings=engram_sizes or [6126, 6332],
        num_nextn_predict_layers=3, rms_norm_eps=1e-20,
        rope_scaling={"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                      "original_max_position_embeddings": 65536},
        bos_token_id=0, eos_token_id=1, pad_token_id=2)


def selftest(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    assemble_reference.activate(args.reference)
    from transformers import AutoTokenizer, DynamicCache
    from transformers.models.deepseek_v41 import DeepseekV41Config, DeepseekV41ForCausalLM

    work = Path(args.selftest)
    tok_dir = Path(args.tokenizer)
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    text = tiny_text_config()
    config_dict = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
                   "text_config": text, "vision_config": {"model_type": "deepseek_v41_vision"},
                   "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2}
    ids = builtin_prompts(tokenizer, 129280)[2]["ids"][:300]
    results = {}
    for fmt in ("plain", "quantised"):
        torch.manual_seed(1)
        model = DeepseekV41ForCausalLM(DeepseekV41Config.from_dict(json.loads(json.dumps(config_dict)))).eval()
        with torch.no_grad():  # spread the random init so mHC, sinks and biases are not trivial
            for name, p in model.named_parameters():
                if name.endswith(("attn_sink", "hc_attn_base", "hc_ffn_base", "bias")):
                    p.normal_(0.0, 0.5)
        out = work / f"tiny-{fmt}"
        write_release_checkpoint(model, out, fmt == "quantised", tok_dir, config_dict)
        model.model.bind_tokenizer(tokenizer)
        loaded, _, info = build_reference(out, "explicit")
        x = torch.tensor([ids])
        t0 = time.time()
        with torch.no_grad():
            a = model(x).logits
            b = loaded(x).logits
        elapsed = time.time() - t0
        same = torch.equal(a, b)
        pretrained = build_reference(out, "from_pretrained")[0]
        with torch.no_grad():
            c = pretrained(x).logits
        results[fmt] = {"explicit_bit_identical": same, "from_pretrained_bit_identical": torch.equal(a, c),
                        "max_abs": float((a - b).abs().max()), "forward_300_two_models_s": round(elapsed, 2),
                        "load": {k: v for k, v in info["load"].items() if k != "shards"}}
        log(f"selftest {fmt}: {results[fmt]}")
        if not same:
            raise SystemExit(f"selftest {fmt}: loading the written checkpoint changed the logits")
    # decode through the cache equals the one-shot forward
    cache = DynamicCache(config=loaded.config)
    with torch.no_grad():
        full = loaded(torch.tensor([ids])).logits
        head = loaded(torch.tensor([ids[:201]]), past_key_values=cache, use_cache=True).logits
        steps = [loaded(torch.tensor([[t]]), past_key_values=cache, use_cache=True).logits for t in ids[201:]]
    d = float((torch.cat([head] + steps, 1) - full).abs().max())
    log(f"selftest: prefill 201 + 99 decode steps vs one-shot: max |delta| {d:.3g}")
    if d > 1e-4:
        raise SystemExit("selftest: cached decode disagrees with the one-shot forward")
    log("selftest ok")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", required=True,
                        help="overlay directory made by scripts/reference/assemble_reference.py install")
    parser.add_argument("--checkpoint", help="checkpoint directory in the release layout")
    parser.add_argument("--out", help="golden output file (.safetensors)")
    parser.add_argument("--prompts", help='JSON list of {"name": ..., "ids": [...]} or {"name", "text"}')
    parser.add_argument("--builtin-prompts", nargs="?", const="tiny", choices=["tiny", "wide"],
                        help="the built-in prompts: the three of tiny (the default when --prompts is not "
                             "given), or wide's two (chat14, mixed800)")
    parser.add_argument("--only", help="comma-separated prompt names to keep (e.g. chat14,paragraph)")
    parser.add_argument("--continue", dest="continue_tokens", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--probes", type=int, default=8)
    parser.add_argument("--loader", choices=("explicit", "from_pretrained"), default="explicit")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--with-hashes", action="store_true")
    parser.add_argument("--no-self-check", action="store_true")
    parser.add_argument("--no-tie-watch", action="store_true")
    parser.add_argument("--allow-ties", action="store_true",
                        help="write the file even if the reference met exact top-k ties (counted in the metadata)")
    parser.add_argument("--stable-topk", action="store_true",
                        help="break exact top-k ties inside the reference by the lower index")
    parser.add_argument("--made-by", help="how the checkpoint was made (recorded in the metadata), "
                        "e.g. 'hippo model init --preset tiny --seed 1'")
    parser.add_argument("--engram-map", help="write the Engram addressing tables to this file and exit")
    parser.add_argument("--selftest", help="work directory for the round-trip self-test")
    parser.add_argument("--tokenizer", default=str(REPO / ".cache" / "deepseek-v4-tokenizer"),
                        help="directory with tokenizer.json (self-test only)")
    args = parser.parse_args()
    if args.selftest:
        selftest(args)
    elif args.checkpoint and args.engram_map:
        engram_map(args)
    elif args.checkpoint and args.out:
        generate(args)
    else:
        parser.error("give --selftest DIR, or --checkpoint with --out or --engram-map")


if __name__ == "__main__":
    main()
