#!/usr/bin/env python3
"""Trains hippo's demo model: the `demo` preset (engine/config/presets.cpp) on the synthetic agent
corpus of scripts/gen_agent_corpus.py, on the CPU, with Hugging Face's DeepSeek-V4.1 reference module
(scripts/reference/), so the trained weights mean the same in hippo and in the reference.

    # the corpus, with the project's .venv (it renders through `hippo model render`)
    .venv/bin/python scripts/gen_agent_corpus.py --seed 1 --sessions 20000 --out runs/corpus
    # training, with the reference's virtualenv (scripts/reference/README.md); resumable: run it
    # again with the same --run to continue from the last saved state
    REF=~/.venvs/hippo-ref/bin/python
    $REF scripts/train_demo.py train --reference OVERLAY --corpus runs/corpus --run runs/demo [--steps 900]
    # what a saved state has learnt: held-out answer loss (all tokens, copied ones), copy accuracy
    $REF scripts/train_demo.py measure --reference OVERLAY --corpus runs/corpus --run runs/demo
    # the trained weights in the init checkpoint's layout (FP8 dense, FP4 experts, as the release)
    $REF scripts/train_demo.py export --reference OVERLAY --run runs/demo --out models/demo

The run folder holds init/ (`hippo model init --preset demo --seed SEED`: the starting weights, and
the layout the export fills), state.pt (weights, optimiser, step, data order; saved every
--save-minutes and at the end) and log.jsonl (one line per --log-every steps: step, tokens, loss,
tokens/s).

How it trains:
- Every parameter of the text model that gets a gradient, starting from hippo's own init.
- With --copy-steps N, first N steps of copying alone (CopyStage): the agent corpus alone
  did not teach this model to copy, which its tasks need (docs/BENCHMARKS.md). The agent stage then
  unlearned it (0% of copied tokens after 900 steps); --copy-mix W keeps a copy batch in every agent
  step, its loss weighted by W.
- Copied answer tokens (CopiedTokens: a rare id that the user turns or tool results of the session
  already hold, such as a question's number, a search word, a tool's result) are what the tasks
  turn on and a small share of the loss; the log reports their own loss (`copy_loss`), and
  --copy-weight W weights them W times in the agent loss.
- The loss is next-token cross-entropy on the ids the model generates (the answer spans of
  `hippo model render`): the prompt, tool results and user turns are context only.
- --tie-head trains one tensor as both the embedding's and the head's rows of the used ids (the
  checkpoint still stores two, equal): copying then needs only attention to move a token's
  embedding, which the head reads back as that token. Untied, this model's copy stage copied 1% of
  the tokens after 1,000 steps (12% after 2,000); tied, 95% after 400 (docs/BENCHMARKS.md).
- The head: only the ids the corpus uses are trained. Every other row of the 129,280 x 64 head is
  zero, so at inference each such id has logit 0; the training softmax over the used ids gets one
  more logit, log(n_unused), which stands for all of them together. That is the same distribution
  the full head gives at inference, at a fraction of the cost.
- The reference's fake-quantisers (FP8 window KV, FP4 compressed KV and index keys/queries) are
  rounded in the forward and passed straight through in the backward (without that no gradient
  reaches the compressor). Inference and export use the reference unchanged.
- With --round-weights, the weights too: every forward sees them as the export writes them (FP8
  dense, FP4 experts, BF16 norms and embedding), the gradient straight through to the float weights
  the optimiser keeps (WeightRounding); `measure --round-weights` measures the model so rounded.
- The indexers' projections get no gradient from the answer loss (selection is a top-k); with
  --indexer-kl W they learn their layers' attention by KL divergence, DeepSeek-V3.2's way
  (IndexerDistillation). Not trained: the routers' selection biases, the DSpark stages and the
  vision tower (the reference has neither; they keep hippo's init here; scripts/train_dspark.py then
  trains the DSpark stages).
- Speed: the mHC mixes run compiled (compiled_mixes; not with --eager); a session runs in chunks of
  --chunk tokens through the reference's cache (cost linear in its length; the masked one-shot
  attention is quadratic), and the sessions of a batch that share their
  first --min-shared tokens (the tool agent's 547-token system block) run them once, each continuing
  from a copy of that cache. The gradient is the same function's (the differences are summation
  order: 2e-6 against a largest entry of 15 on a five-session group); the settings of every run of a
  training are kept in state.pt and provenance.json.
Sessions longer than --max-tokens are skipped. Deterministic for a seed on one machine: the data
order comes from the seed, torch runs with a fixed thread count.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "reference"))


def log(message: str) -> None:
    print(f"train_demo: {message}", file=sys.stderr, flush=True)


def load_reference(overlay: str, init: Path):
    """The reference model at the init checkpoint's weights with its tokenizer bound, the checkpoint's
    quantisation config, and the tokenizer."""
    import assemble_reference

    assemble_reference.activate(overlay, quiet=True)
    import gen_model_golden as golden
    import torch
    from transformers import AutoTokenizer
    from transformers.models.deepseek_v41 import DeepseekV41ForCausalLM

    config, quant, _ = golden.load_config(init)
    torch.manual_seed(0)
    model = DeepseekV41ForCausalLM(config).to(torch.float32)
    golden.load_explicit(model, init, quant)
    tokenizer = AutoTokenizer.from_pretrained(str(init), config=config)
    model.model.bind_tokenizer(tokenizer)
    return model, quant, tokenizer


def straight_through_quantisers():
    """Forward: the reference's rounding, unchanged. Backward: identity (straight-through)."""
    from transformers.models.deepseek_v41 import modeling_deepseek_v41 as m

    for name in ("_fake_quant_fp4_block", "_fake_quant_fp8_block"):
        rounding = getattr(m, name)

        def ste(x, *args, _rounding=rounding, **kwargs):
            y = _rounding(x.detach(), *args, **kwargs)
            return y + (x - x.detach()) if x.requires_grad else y

        setattr(m, name, ste)


def compiled_mixes():
    """The mHC mixes (`hc_mixes`: the projection, the gates and the Sinkhorn iterations) through
    torch.compile: the same function, its ~80 small operations and their backward fused into a few
    loops; a fifth of a step's time (docs/BENCHMARKS.md). The first forward compiles (~40 s)."""
    import torch
    from transformers.models.deepseek_v41 import modeling_deepseek_v41 as m

    mixes = torch.compile(m.DeepseekV41DecoderLayer.hc_mixes, dynamic=True)
    m.DeepseekV41DecoderLayer.hc_mixes = lambda layer, *args: mixes(layer, *args)


class WeightRounding:
    """--round-weights: every forward and backward sees the weights as the export writes them (FP8
    E4M3 with UE8M0 block scales, FP4 E2M1 with UE8M0 per 32, BF16: the init checkpoint's dtype of
    each), and the gradient passes straight through to the float weights the optimiser keeps (the
    rounded values are swapped in for a step's forwards and backwards, the float ones back before
    the optimiser's step). Without it the export rounds weights that were never trained rounded: at
    step 4,095 the held-out respelt argument starts that measure finds right went 85% -> 67%."""

    def __init__(self, model, init: Path, block):
        import torch
        from safetensors import safe_open

        import gen_model_golden as golden

        self.block = tuple(block)
        params = dict(model.named_parameters())
        self.targets = []  # (parameter, the checkpoint's dtype, its native name)
        index = json.loads((init / "model.safetensors.index.json").read_text())
        for shard in sorted(set(index["weight_map"].values())):
            with safe_open(str(init / shard), framework="pt") as f:
                for name in f.keys():
                    target = golden.native_to_reference(name)
                    dtype = f.get_tensor(name).dtype
                    if target in params and not name.endswith(".scale") and dtype != torch.float32:
                        self.targets.append((params[target], dtype, name))

    @contextlib.contextmanager
    def applied(self):
        import torch

        with torch.no_grad():
            kept = [p.data for p, _, _ in self.targets]
            for p, dtype, name in self.targets:
                p.data = export_rounding(name, p.data, dtype, self.block)[2].to(p.dtype)
        try:
            yield
        finally:
            for (p, _, _), data in zip(self.targets, kept):
                p.data = data


class IndexerDistillation:
    """Trains the lightning indexers the way DeepSeek-V3.2 does (its paper, §2.1): each index source's
    scores, softmaxed over the compressed entries a query can see, learn by KL divergence the
    distribution its attention would give them, here the mean over the heads of every layer that
    reuses its selection of each head's softmax over all the visible entries (not only the selected
    ones: dense, so that an entry the indexer now ranks low can still rise). The main loss never
    reaches the indexer (selection is a top-k), and the indexer's inputs are detached, so this loss
    trains the indexer alone and the model around it stays what the answer loss makes it. Rows are
    subsampled: the queries past the window whose position is a multiple of --indexer-stride."""

    def __init__(self, model, row_stride: int):
        from transformers.models.deepseek_v41 import modeling_deepseek_v41 as m

        self.m = m
        self.config = model.config
        self.row_stride = row_stride
        self.sources = sorted(self.config.index_source_layer_ids)
        self.records = {}  # source layer: {"logits": [S, T] with grad, "target": [S, T] summed, "layers": n}
        self.rows = None
        distillation = self
        original_attention, original_indexer = m.DeepseekV41Attention.forward, m.DeepseekV41Indexer.forward

        def indexer_forward(indexer, hidden_states, q_residual, latent, first_group_position, position_ids,
                            cache_layer, shared):
            original_indexer(indexer, hidden_states.detach(), q_residual.detach(),
                             None if latent is None else latent.detach(), first_group_position, position_ids,
                             cache_layer, shared)
            distillation.record_scores(indexer, hidden_states, q_residual, position_ids, shared)

        def attention_forward(attention, hidden_states, **kwargs):
            out = original_attention(attention, hidden_states, **kwargs)
            distillation.record_target(attention, hidden_states, kwargs)
            return out

        m.DeepseekV41Indexer.forward = indexer_forward
        m.DeepseekV41Attention.forward = attention_forward

    def begin(self, positions):
        """Before a chunk's forward at these absolute positions: which of its rows the loss samples."""
        import torch

        absolute = torch.as_tensor(positions)
        rows = ((absolute % self.row_stride == 0) & (absolute >= self.config.sliding_window)).nonzero()[:, 0]
        self.rows = rows if len(rows) else None
        self.records = {}

    def visible(self, position_ids, ratio: int, width: int):
        """[S', T] mask of the compressed entries each sampled row can see."""
        import torch

        lens = (position_ids[0, self.rows].long() + 1) // ratio
        return torch.arange(width).view(1, -1) < lens.view(-1, 1)

    def record_scores(self, indexer, hidden_states, q_residual, position_ids, shared):
        """The indexer's scores for the sampled rows, with their graph (its own weights only)."""
        import torch

        index_k = shared.get("index_k")
        if self.rows is None or index_k is None:
            return
        h, r, pos = hidden_states.detach()[:, self.rows], q_residual.detach()[:, self.rows], position_ids[:, self.rows]
        cos, sin = indexer.rotary_emb(h, position_ids=pos, layer_type="compress")
        q = indexer.wq_b(r).view(1, len(self.rows), indexer.num_heads, indexer.head_dim)
        q = self.m._fake_quant_fp4_block(self.m.apply_rotary_pos_emb(q, cos, sin), block_size=32)
        scores = torch.einsum("bshd,btd->bsht", q.float(), index_k[:, 0].float()).relu() * indexer.softmax_scale
        weights = indexer.weights_proj(h).float() * indexer.heads_scaling
        logits = (scores * weights.unsqueeze(-1)).sum(dim=2)[0]
        visible = self.visible(position_ids, indexer.compress_ratio, logits.shape[-1])
        selectable = visible
        if indexer.uses_candidates and shared.get("candidates") is not None:  # the real top-k's range
            selectable = visible & shared["candidates"][0, self.rows]
        self.records[indexer.layer_idx] = {"logits": logits.masked_fill(~visible, float("-inf")),
                                           "selectable": selectable, "target": torch.zeros_like(logits), "layers": 0}

    def record_target(self, attention, hidden_states, kwargs):
        """Adds this layer's dense attention over the compressed entries (sampled rows, no graph) to
        the target of the index source whose selection it reuses."""
        import torch

        if not attention.compress_ratio or self.rows is None:
            return
        source = max((s for s in self.sources if s <= attention.layer_idx), default=None)
        record = self.records.get(source)
        compressed = kwargs["shared"].get("compress_kv")
        if record is None or compressed is None:
            return
        with torch.no_grad():
            cos, sin = kwargs["position_embeddings"][attention.rope_layer_type]
            h = hidden_states[:, self.rows]
            q = attention.wq_b(attention.q_norm(attention.wq_a(h))).view(1, len(self.rows), attention.num_heads, -1)
            q = self.m.apply_rotary_pos_emb(q, cos[:, self.rows], sin[:, self.rows]).transpose(1, 2)
            logits = (q @ compressed[:, 0].float().transpose(-1, -2).unsqueeze(1))[0] * attention.scaling
            visible = self.visible(kwargs["position_ids"], attention.compress_ratio, logits.shape[-1])
            probs = logits.masked_fill(~visible, float("-inf")).softmax(-1).nan_to_num(0.0).mean(0)
            record["target"] += probs
            record["layers"] += 1

    def take(self):
        """The records of the chunk just run (for loss or coverage); forwards outside
        begin() and take() (the copy stage's batches) record nothing."""
        records, self.records, self.rows = self.records, {}, None
        return records

    @staticmethod
    def targets(chunks):
        """(source, record, target, rows) of every index source with a target in these chunks'
        records: the target averaged over its layers, and how many sampled rows it has."""
        for records in chunks:
            for source, record in records.items():
                if record["layers"]:
                    target = record["target"] / record["layers"]
                    yield source, record, target, int((target.sum(-1) > 0).sum())

    @staticmethod
    def loss(chunks):
        """The summed KL divergence (target to indexer) of these chunks' sampled rows over the index
        sources, and how many rows it sums."""
        import torch

        total, rows = 0.0, 0
        for _, record, target, n in IndexerDistillation.targets(chunks):
            logp = torch.log_softmax(record["logits"], dim=-1)
            total = total + (target * (target.clamp_min(1e-30).log() - logp)).where(target > 0, 0.0).sum()
            rows += n
        return total, rows

    def coverage(self, chunks):
        """Per index source: the target mass that the indexer's top-k (within the candidate blocks
        where the source uses them, as at inference) holds, summed over these chunks' sampled rows,
        and the rows (measure's report)."""
        out = {}
        for source, record, target, n in self.targets(chunks):
            k = min(self.config.index_topk, target.shape[-1])
            top = record["logits"].masked_fill(~record["selectable"], float("-inf")).topk(k, dim=-1)
            held = target.gather(-1, top.indices).where(top.values > float("-inf"), 0.0)
            mass, rows = out.get(source, (0.0, 0))
            out[source] = (mass + float(held.sum()), rows + n)
        return out


def read_corpus(path: Path, max_tokens: int):
    sessions = []
    skipped = 0
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if len(d["ids"]) > max_tokens:
                skipped += 1
                continue
            sessions.append((d["ids"], d["answers"]))
    return sessions, skipped


def prefix_length(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def share_prefixes(batch, min_shared: int):
    """The batch's sessions in groups that share at least min_shared leading tokens (the tool
    agent's system block is 547 tokens), in batch order of each group's first session."""
    if min_shared <= 0:
        return [[session] for session in batch]
    groups = []
    for session in batch:
        for group in groups:
            if prefix_length(group[0][0], session[0]) >= min_shared:
                group.append(session)
                break
        else:
            groups.append([session])
    return groups


def copy_cache(cache):
    """A copy of a DynamicCache that a forward can extend without changing the original: the
    reference's cache layers replace their tensors (torch.cat) rather than write into them, so
    copying the layer objects and their dicts is enough, and the copies share the autograd graph."""
    import copy

    copied = copy.copy(cache)
    copied.layers = []
    for layer in cache.layers:
        twin = copy.copy(layer)
        for name, value in vars(layer).items():
            if isinstance(value, dict):
                setattr(twin, name, dict(value))
        copied.layers.append(twin)
    return copied


class CopiedTokens:
    """Which answer tokens copy from the conversation: those whose id occurs earlier in the session
    outside the answers (a user turn, a tool result) and in at most --copy-rare of the sessions (so
    not the chat and DSML markup, the tool names or the system block's words, which every session
    holds), and before each run of them the common tokens that continue the same source backwards
    (the "to" of "toaster", a run's true first token, where greedy decoding must find the source).
    Also a copy: a word that an answer writes bare (after markup, as a tool call's argument or an
    answer starts) where the conversation held it with its leading space, " thunder" written as
    "th"+"under": other ids, spelt anew, and so the hardest start of all."""

    max_extension = 8  # a run's start moves back at most this many common tokens

    def __init__(self, sessions, rare: float, tokenizer):
        from collections import Counter

        counts = Counter(i for ids, _ in sessions for i in set(ids))
        self.common = {i for i, n in counts.items() if n > rare * len(sessions)}
        self.tokenizer = tokenizer
        self.texts = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.spaced = {}  # a bare word's text: its ids with a leading space

    def positions(self, ids, answers):
        """The indices into ids of the answer tokens that copy."""
        return self.runs(ids, answers)[0]

    def runs(self, ids, answers):
        """The copied positions (positions()), {each run's first position: where in ids its source
        starts (the latest earlier occurrence outside the answers)}, and the runs that a respelt word
        starts."""
        in_answer = self.in_answers(ids, answers)
        latest, source, out = {}, {}, []  # id: its latest position outside the answers; p: that of ids[p]
        for p, i in enumerate(ids):
            if not in_answer[p]:
                latest[i] = p
            elif i in latest and i not in self.common:
                out.append(p)
                source[p] = latest[i]
        copied, sources = set(out), {}
        for p in self.starts(out):
            q = source[p]
            for _ in range(self.max_extension):
                if not (in_answer[p - 1] and p - 1 not in copied and q > 0 and not in_answer[q - 1]
                        and ids[p - 1] == ids[q - 1]):
                    break
                p, q = p - 1, q - 1
                copied.add(p)
            sources[p] = q
        respelt = self.respelt(ids, in_answer)
        for p, (end, q) in respelt.items():
            copied.update(range(p, end))
        runs = {}  # each merged run's first position: its source (a respelt word's, where one starts it)
        for p in self.starts(sorted(copied)):
            runs[p] = respelt[p][1] if p in respelt else sources[p]
        return sorted(copied), runs, set(respelt) & set(runs)

    def respelt(self, ids, in_answer):
        """{p: (end, q)}: answer tokens ids[p:end] write bare a rare word that ids[q:] held earlier,
        outside the answers, with its leading space."""
        found = {}
        for p in range(1, len(ids)):
            word = self.respelt_at(ids, in_answer, p)
            if word is not None:
                found[p] = word
        return found

    def respelt_at(self, ids, in_answer, p):
        """(end, q) where a respelt word starts at p (respelt()), else None."""
        before = self.texts[ids[p - 1]]
        if not (in_answer[p] and self.is_letters(ids[p])) or before[-1].isalnum() or before[-1] == "\u0120":
            return None
        end = p + 1
        while end < len(ids) and in_answer[end] and self.is_letters(ids[end]):
            end += 1
        spaced = self.spaced_ids(self.text(ids[p:end]))
        if all(i in self.common for i in spaced):  # " The": not a copy; " to"+"aster" is
            return None
        for q in range(p - len(spaced), -1, -1):
            if ids[q: q + len(spaced)] == spaced and not any(in_answer[q: q + len(spaced)]):
                return end, q
        return None

    @staticmethod
    def in_answers(ids, answers):
        """For each position of ids, whether it lies in one of the answers."""
        in_answer = [False] * len(ids)
        for b, e in answers:
            in_answer[b:e] = [True] * (e - b)
        return in_answer

    def text(self, ids) -> str:
        """The tokens' text as the tokenizer spells it (a leading space as "\u0120")."""
        return "".join(self.texts[i] for i in ids)

    def is_letters(self, i) -> bool:
        return self.texts[i].isascii() and self.texts[i].isalpha()

    def spaced_ids(self, word: str):
        """The ids of word with a leading space."""
        if word not in self.spaced:
            self.spaced[word] = self.tokenizer.encode(" " + word, add_special_tokens=False)
        return self.spaced[word]

    @staticmethod
    def inside_tool_results(ids, tool_result: list[int], end: list[int]):
        """For each position, whether it lies inside a tool result: between the token runs
        `tool_result` and `end` (the chat encoding spells both tags in several ordinary tokens, so
        the model must recognise a tag there, not one id)."""
        inside, open_ = [False] * len(ids), False
        for p in range(len(ids)):
            if ids[max(0, p - len(end) + 1): p + 1] == end:
                open_ = False
            inside[p] = open_
            if ids[max(0, p - len(tool_result) + 1): p + 1] == tool_result:
                open_ = True
        return inside

    @staticmethod
    def starts(positions):
        """The first token of each run of copied tokens: where the model must find what to copy,
        with no earlier copied token to continue from (the rest of a run is induction)."""
        return [p for k, p in enumerate(positions) if k == 0 or positions[k - 1] != p - 1]


class RestrictedVocabulary:
    """The ids the corpus uses (`ids`, `used`), and `kept` ones (a state's trained ids, --new-corpus),
    each one's column in the trained head (`column`, -1 for the others), and the logit log(n_unused)
    that stands for every other id in the softmax: their head rows are zero, so each has logit 0 at
    inference (a trained row left out would break that)."""

    def __init__(self, sessions, vocab_size: int, kept=()):
        import torch

        self.ids = sorted({i for ids, _ in sessions for i in ids} | set(kept))
        self.used = torch.tensor(self.ids)
        self.column = torch.full((vocab_size,), -1, dtype=torch.long)
        self.column[self.used] = torch.arange(len(self.ids))
        self.unused_logit = math.log(vocab_size - len(self.ids))

    def with_unused(self, logits_used):
        """Logits over the used ids, plus the one logit standing for all the others."""
        import torch

        return torch.cat([logits_used, logits_used.new_full((*logits_used.shape[:-1], 1), self.unused_logit)], dim=-1)


def write_state(run: Path, state: dict) -> None:
    """state.pt of the run, replaced whole (never half written)."""
    import torch

    path = run / "state.pt"
    torch.save(state, str(path) + ".partial")
    os.replace(str(path) + ".partial", path)


def load_saved(run: Path):
    """The run's state.pt, or None before its first save."""
    import torch

    state = run / "state.pt"
    return torch.load(state, weights_only=False) if state.is_file() else None


def saved_state(run: Path, used: list[int], new_corpus: bool = False, saved=None):
    """The run's state.pt (`saved` where it is already loaded), or None before its first save; an
    error if it was trained on a corpus that uses other ids, unless new_corpus (whose vocabulary keeps
    the state's ids: RestrictedVocabulary's `kept`)."""
    saved = saved if saved is not None else load_saved(run)
    if saved is not None and saved["used"] != used and not new_corpus:
        raise SystemExit(f"{run / 'state.pt'}: trained on another corpus (its used ids differ); start a new --run, "
                         "or go on with --new-corpus")
    return saved


class CopyStage:
    """Before the agent corpus, --copy-steps steps of copying alone: 32 sequences a step of BOS,
    n = 4..24 ids drawn from those the corpus' answers use, a separator, and the same n again, with
    the loss on the copy, at a constant --lr. The agent corpus alone did not teach this model to
    copy in 1,500 steps; this stage does, slowly (docs/BENCHMARKS.md: 36% of copied tokens after
    2,500 steps). With --copy-filler F, F random ids lie around the first n (a random number of
    them before), and the copy is prompted by its first id, its loss on the others: the copy's
    distance differs per sequence, so a fixed offset does not solve it, only induction does
    (tied, from scratch --copy-filler 32 stayed at 0% for 1,050 steps; --copy-filler 4 first, then
    32, copies 99%: docs/BENCHMARKS.md). Resumable: each step's sequences come from the seed and the
    step."""

    separator = 201  # any id; the one of the measured run

    def __init__(self, trainer):
        self.trainer = trainer
        self.pool = sorted({ids[i] for ids, answers in trainer.sessions for b, e in answers for i in range(b, e)})

    def lr_at(self, step):
        return self.trainer.args.lr

    @staticmethod
    def new_window():
        return {"loss": 0.0, "copied": 0.0, "steps": 0}

    def take_step(self, window):
        loss, copied = self.batch_loss(f"copy/{self.trainer.args.seed}/{self.trainer.copy_step}")
        loss.backward()
        window["loss"] += loss.item()
        window["copied"] += copied
        window["steps"] += 1

    def batch_loss(self, seed: str):
        """A batch's mean copy loss (with its graph) and the share of copied tokens the model gets
        right; the batch comes from `seed`."""
        import torch

        t = self.trainer
        rng = random.Random(seed)
        n = rng.randint(4, 24)
        filler = t.args.copy_filler
        if filler == 0:
            ids = torch.tensor([[0] + xs + [self.separator] + xs
                                for xs in ([rng.choice(self.pool) for _ in range(n)] for _ in range(32))])
            first = n + 1  # the position whose hidden state predicts the copy's first id
        else:
            # The n ids after a random share of the filler, the rest of it, the separator and the
            # first id: each copy lies at its own distance, so only finding that id and reading on
            # after it (induction) predicts the others.
            rows = []
            for _ in range(32):
                xs = [rng.choice(self.pool) for _ in range(n)]
                pad = [rng.choice(self.pool) for _ in range(filler)]
                before = rng.randint(0, filler)
                rows.append([0] + pad[:before] + xs + pad[before:] + [self.separator] + xs)
            ids = torch.tensor(rows)
            first = n + filler + 2
        loss, right = self.copy_loss(t, ids, first)
        return loss, right.float().mean().item()

    @staticmethod
    def copy_loss(trainer, ids, first: int):
        """The mean loss (with its graph) of predicting ids[:, first + 1:] from the hidden states at
        first.., and which of those ids the model gets right."""
        import torch.nn.functional as F

        hidden = trainer.model.model(input_ids=ids, use_cache=False).last_hidden_state
        logits = trainer.vocab.with_unused(hidden[:, first:ids.shape[1] - 1] @ trainer.head.T)
        targets = trainer.vocab.column[ids[:, first + 1:]]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return loss, logits.argmax(-1) == targets

    def log_entry(self, window, now, start):
        t = self.trainer
        k = window["steps"]
        entry = {"copy_step": t.copy_step, "loss": window["loss"] / k, "copied": round(window["copied"] / k, 4),
                 "elapsed_s": round(now - start, 1)}
        return entry, (f"copy step {t.copy_step}/{t.args.copy_steps}  loss {entry['loss']:.4f}  "
                       f"copied {entry['copied']:.2f}")


class CuedCopies:
    """Batches of a copy that starts at a cue and on other tokens: 32 sequences of BOS, --copy-filler
    ids around a cue id followed by n = 2..12 ids, a separator, then the n ids again with the first,
    a word, written without its leading space (" thunder" in a question is "th"+"under" in a tool
    call's argument: the chat encoding puts no space there, and a memory key, a copied passage's
    first word, a search word all start that way). The loss is on every copied id, the bare word's
    included: the model must find the span by its cue and spell the word anew, which the agent
    corpus asks of it for each word (CopiedTokens' respelt runs). Words: the used ids whose token is
    a space and letters, whose bare spelling uses only used ids; a batch's words all spell in the
    same number of ids."""

    cue = 202  # any ids other than the separator; inputs only

    def __init__(self, trainer):
        self.trainer = trainer
        tokenizer = trainer.tokenizer
        used = set(trainer.vocab.ids)
        self.by_length = {}  # bare spelling's length: [(spaced id, bare ids)]
        for i in trainer.vocab.ids:
            text = tokenizer.convert_ids_to_tokens(i)
            if len(text) > 1 and text[0] == "\u0120" and text[1:].isascii() and text[1:].isalpha():
                bare = tokenizer.encode(text[1:], add_special_tokens=False)
                if all(b in used for b in bare):
                    self.by_length.setdefault(len(bare), []).append((i, bare))
        self.lengths = sorted(self.by_length)
        self.pool = trainer.copy_stage.pool

    def batch_loss(self, seed: str):
        """A batch's mean loss over the copied ids (with its graph), and the shares of the bare
        words' first ids and of all ids the model gets right."""
        import torch

        t = self.trainer
        rng = random.Random(seed)
        n, filler = rng.randint(2, 12), t.args.copy_filler
        words = self.by_length[rng.choices(self.lengths, [len(self.by_length[k]) for k in self.lengths])[0]]
        rows = []
        for _ in range(32):
            spaced, bare = rng.choice(words)
            xs = [rng.choice(self.pool) for _ in range(n - 1)]
            pad = [rng.choice(self.pool) for _ in range(filler)]
            before = rng.randint(0, filler)
            rows.append([0] + pad[:before] + [self.cue, spaced] + xs + pad[before:] + [CopyStage.separator]
                        + bare + xs)
        ids = torch.tensor(rows)
        first = n + filler + 2  # the separator: its hidden state predicts the bare word's first id
        loss, right = CopyStage.copy_loss(t, ids, first)
        return loss, right[:, 0].float().mean().item(), right.float().mean().item()


class RespeltVariants:
    """Variants of the corpus' respelt words (CopiedTokens.respelt: "th"+"under" written for
    " thunder"): each case is a training session with a respelt word at p (ids[p:end], its spaced
    source at q) and a key that says which words may stand there (`words[key]`: [(spaced ids, bare
    ids)]); a step takes one case and puts 8 of its key's words in both places, the session cut two
    ids after the word, so that what the model learns is to find and respell the word rather than
    which word a question holds. The variants share the session up to the word, which runs once
    (group_loss); the loss is their answer loss (answer_loss) per target."""

    variants = 8

    def __init__(self, trainer):
        self.trainer = trainer
        self.cases = []  # (session, p, end, q, key)
        self.words = {}  # key: [(spaced ids, bare ids)]

    def pairs(self, bare_words):
        """[(spaced ids, bare ids)] of these bare words (tuples of ids), in a fixed order."""
        copied = self.trainer.copied
        return [(copied.spaced_ids(copied.text(bare)), list(bare)) for bare in sorted(bare_words)]

    def loss(self, seed: str):
        """The variants' mean answer loss per target (with its graph)."""
        t = self.trainer
        rng = random.Random(seed)
        k, p, end, q, key = rng.choice(self.cases)
        ids, answers = t.sessions[k]
        spaced = t.copied.spaced_ids(t.copied.text(ids[p:end]))
        b = max(b for b, _ in answers if b <= p)  # the answer the word lies in (after q)
        group = []
        for new_spaced, new_bare in rng.sample(self.words[key], min(self.variants, len(self.words[key]))):
            head = ids[:q] + new_spaced + ids[q + len(spaced): p]
            cut = head + new_bare + ids[end: end + 2]
            group.append((cut, [[b + len(head) - p, len(cut)]]))
        loss, _ = t.group_loss(group)
        t.take_indexer_chunks()  # the distillation learns from the corpus' batches only
        return loss / sum(e - b for _, answers in group for b, e in answers)


class ArgumentWords(RespeltVariants):
    """--argument-mix W: a tool call's one-word string argument that respells a word of the user's
    turn (the search word, a memory value), with the words this parameter takes in the *training*
    split (held-out words are never taught as arguments). The corpus has about one such argument
    per step; this gives the model eight more, each word in a question it was not asked in."""

    role = 8  # a parameter is told by the ids before its value: `parameter name="text" string="true">`

    def __init__(self, trainer):
        super().__init__(trainer)
        copied = trainer.copied
        tag = trainer.tokenizer.encode(' string="true">', add_special_tokens=False)
        close = trainer.tokenizer.encode("</", add_special_tokens=False)
        words = {}  # role: the bare words it takes
        for k, (ids, answers) in enumerate(trainer.sessions):
            in_answer = copied.in_answers(ids, answers)
            for p in range(self.role, len(ids)):
                if ids[p - len(tag): p] != tag:
                    continue
                found = copied.respelt_at(ids, in_answer, p)
                if found is None or ids[found[0]: found[0] + len(close)] != close:
                    continue
                end, q = found
                role = tuple(ids[p - self.role: p])
                self.cases.append((k, p, end, q, role))
                words.setdefault(role, set()).add(tuple(ids[p:end]))
        self.words = {role: self.pairs(bare_words) for role, bare_words in words.items()}
        trainer.say(f"ArgumentWords: {len(self.cases)} arguments, "
                    + ", ".join(f"{len(w)} words" for w in self.words.values()))


class PassageFirstWords(RespeltVariants):
    """--first-word-mix W: a copy task's answer that starts with a respelt word (the passage after
    "Copy:", "Say back to me:" ...), with any word that starts such a passage in the training corpus
    in its place. Copy passages draw every word that a task of either split may write
    (gen_agent_corpus.PASSAGE_ATOMS), so this is where the model may learn to write a held-out word
    bare in an answer: what ArgumentWords teaches for the training split's words, this teaches for all."""

    def __init__(self, trainer):
        super().__init__(trainer)
        copied = trainer.copied
        words = set()
        for k, (ids, answers) in enumerate(trainer.sessions):
            in_answer = copied.in_answers(ids, answers)
            for b, _ in answers:
                found = copied.respelt_at(ids, in_answer, b)
                if found is not None and copied.texts[ids[found[1] - 1]].endswith(":"):
                    self.cases.append((k, b, *found, "passage"))
                    words.add(tuple(ids[b:found[0]]))
        self.words = {"passage": self.pairs(words)}
        trainer.say(f"PassageFirstWords: {len(self.cases)} passages, {len(words)} words")


class Trainer:
    def __init__(self, args):
        import torch

        self.args = args
        self.run = Path(args.run)
        self.init = self.run / "init"
        torch.set_num_threads(args.threads)
        self.model, quant, self.tokenizer = load_reference(args.reference, self.init)
        straight_through_quantisers()
        if not args.eager:
            compiled_mixes()
        self.rounding = WeightRounding(self.model, self.init, quant["weight_block_size"]) if args.round_weights else None
        self.sessions, skipped = read_corpus(Path(args.corpus) / "train.tokens.jsonl", args.max_tokens)
        log(f"{len(self.sessions)} training sessions ({skipped} longer than {args.max_tokens} tokens skipped)")
        new_corpus = getattr(args, "new_corpus", False)
        saved = load_saved(self.run)
        kept = saved["used"] if new_corpus and saved is not None else ()
        self.vocab = RestrictedVocabulary(self.sessions, self.model.config.vocab_size, kept)
        self.copied = CopiedTokens(self.sessions, args.copy_rare, self.tokenizer)
        self.distillation = IndexerDistillation(self.model, args.indexer_stride) if args.indexer_kl > 0 else None
        self.indexer_chunks = []  # the distillation's records of each chunk since take_indexer_chunks()
        # The trained head rows: a parameter of their own, or with --tie-head the embedding's rows of
        # the same ids (one tensor trained for both; the export writes it into both).
        self.own_head = None if args.tie_head else torch.nn.Parameter(
            self.model.lm_head.weight.detach()[self.vocab.used].clone())
        self.model.lm_head.weight.requires_grad_(False)
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            if not p.requires_grad:
                continue
            (no_decay if p.ndim < 2 or "embed" in name else decay).append(p)
        heads = [] if self.own_head is None else [self.own_head]
        self.parameters = decay + heads + no_decay
        # Gradients clipped to norm 1 per group: the indexers' (only IndexerDistillation reaches
        # them) apart from the rest, so that the two losses never scale each other's steps.
        indexers = {id(p) for name, p in self.model.named_parameters() if ".indexer." in name}
        self.clip_groups = [[p for p in self.parameters if id(p) not in indexers],
                            [p for p in self.parameters if id(p) in indexers]]
        self.optimizer = torch.optim.AdamW([{"params": decay + heads, "weight_decay": args.weight_decay},
                                            {"params": no_decay, "weight_decay": 0.0}],
                                           lr=args.lr, betas=(0.9, 0.95))
        self.step = 0
        self.history = []  # the settings of every earlier run of this training: [{from_step, to_step, args}]
        self.order = []
        self.position = 0
        self.epoch = 0
        self.tokens = 0
        self.copy_step = 0  # steps of the copy stage done (CopyStage)
        self.copy_stage = CopyStage(self)
        self.cued_copies = CuedCopies(self) if args.cued_mix > 0 else None
        # RespeltVariants mixes: (name in the log, variants, weight)
        self.variant_mixes = [(name, kind(self), weight) for name, kind, weight in
                              (("argument", ArgumentWords, args.argument_mix),
                               ("first_word", PassageFirstWords, args.first_word_mix)) if weight > 0]
        saved = saved_state(self.run, self.vocab.ids, new_corpus, saved)
        if saved is not None:
            tied = bool(saved["args"].get("tie_head"))
            if tied != args.tie_head:  # the head would silently be another tensor
                raise SystemExit(f"train_demo: {self.run / 'state.pt'} was trained "
                                 f"{'with' if tied else 'without'} --tie-head: give the same")
            if saved["used"] != self.vocab.ids and not args.tie_head:
                raise SystemExit("train_demo: --new-corpus with more ids needs --tie-head (an own head has a row per id)")
            self.model.load_state_dict(saved["model"])
            if self.own_head is not None:
                self.own_head.data.copy_(saved["head"])
            self.optimizer.load_state_dict(saved["optimizer"])
            self.step, self.order, self.position = saved["step"], saved["order"], saved["position"]
            self.epoch, self.tokens = saved["epoch"], saved["tokens"]
            if saved["args"]["corpus"] != args.corpus:  # (--new-corpus) this corpus' own data order, from its start
                self.order, self.position, self.epoch = [], 0, 0
                log(f"a new corpus: {args.corpus} after {saved['args']['corpus']}, "
                    f"{len(set(self.vocab.ids) - set(saved['used']))} ids new (their rows as the init left them)")
            self.copy_step = saved.get("copy_step", 0)
            self.history = saved.get("history") or [{"from_step": 0, "to_step": self.step, "args": saved["args"]}]
            log(f"resumed at copy step {self.copy_step}" if self.step == 0 and self.copy_step
                else f"resumed at step {self.step} ({self.tokens} tokens)")
        self.segment_start = self.step
        self.model.train()

    @property
    def head(self):
        """The head's rows of the used ids, in the order of vocab.used."""
        return self.model.model.embed.weight[self.vocab.used] if self.own_head is None else self.own_head

    # The data order (shuffled per epoch from the seed) and the learning-rate schedule (linear warmup,
    # cosine to a tenth); train_dspark.py's trainer uses both.
    def next_session(self):
        if self.position >= len(self.order):
            self.order = list(range(len(self.sessions)))
            random.Random(self.args.seed * 1000 + self.epoch).shuffle(self.order)
            self.position = 0
            self.epoch += 1
        i = self.order[self.position]
        self.position += 1
        return self.sessions[i]

    def lr_at(self, step):
        a = self.args
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        progress = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    def forward(self, ids, start, cache):
        """Hidden states of ids[start:], continuing `cache` (which holds ids[:start]), in chunks of
        --chunk tokens. The reference's cache carries every state across calls (sliding window,
        partial compress groups, compressed KV, index keys; the Engram history lives in the model),
        so this is the same function as one forward over the whole sequence, in a different
        rounding, at a cost linear in the length instead of quadratic (the masked one-shot
        attention spans every earlier token)."""
        import torch

        x = torch.tensor([ids])
        step = self.args.chunk or len(ids)
        hidden = []
        for i in range(start, len(ids), step):
            j = min(len(ids), i + step)
            if self.distillation is not None:
                self.distillation.begin(torch.arange(i, j))
            out = self.model.model(input_ids=x[:, i:j], position_ids=torch.arange(i, j).unsqueeze(0),
                                   past_key_values=cache, use_cache=True)
            hidden.append(out.last_hidden_state[0])
            if self.distillation is not None:
                self.indexer_chunks.append(self.distillation.take())
        return torch.cat(hidden)

    def take_indexer_chunks(self):
        """The distillation's records of the chunks forwarded since the last call."""
        chunks, self.indexer_chunks = self.indexer_chunks, []
        return chunks

    def answer_loss(self, ids, answers, hidden, start):
        """Summed cross-entropy of the answer tokens, the copied ones (CopiedTokens) weighted by
        --copy-weight and the first of each run of them by --start-weight (with its graph), and for
        the log: the plain sum, the copied tokens' sum and their count. hidden[k] is position start + k."""
        import torch
        import torch.nn.functional as F

        positions = torch.cat([torch.arange(b - 1, e - 1) for b, e in answers])
        targets = self.vocab.column[torch.tensor(ids)[positions + 1]]
        logits = self.vocab.with_unused(hidden[positions - start] @ self.head.T)
        losses = F.cross_entropy(logits, targets, reduction="none")
        copied = torch.zeros(len(ids), dtype=torch.bool)
        copied_positions = self.copied.positions(ids, answers)
        copied[copied_positions] = True
        weights = torch.ones(len(ids))
        weights[copied] = self.args.copy_weight
        weights[CopiedTokens.starts(copied_positions)] = self.args.start_weight or self.args.copy_weight
        copied, weights = copied[positions + 1], weights[positions + 1]
        loss = (losses * weights).sum()
        plain = losses.detach()
        return loss, plain.sum().item(), plain[copied].sum().item(), int(copied.sum())

    def group_loss(self, group):
        """Summed answer loss of sessions that share their first `shared` tokens (none of them an
        answer): the shared prefix runs once, with its gradient, and each session continues from
        a copy of its cache, so the gradient is that of running every session whole. With it, the
        sums for the log (answer_loss): [plain, copied tokens', copied tokens' count]."""
        from transformers import DynamicCache

        shared = min(prefix_length(group[0][0], ids) for ids, _ in group)
        shared = min([shared] + [answers[0][0] - 1 for _, answers in group])
        cache = DynamicCache(config=self.model.config)
        if len(group) > 1 and shared > 0:
            self.forward(group[0][0][:shared], 0, cache)
        else:
            shared = 0
        loss, sums = 0, [0.0, 0.0, 0]
        for ids, answers in group:
            hidden = self.forward(ids, shared, copy_cache(cache))
            session_loss, *session_sums = self.answer_loss(ids, answers, hidden, shared)
            loss = loss + session_loss
            sums = [a + b for a, b in zip(sums, session_sums)]
        return loss, sums

    def history_now(self):
        segment = {"from_step": self.segment_start, "to_step": self.step, "args": vars(self.args)}
        return self.history + ([segment] if self.step > self.segment_start else [])

    def save(self):
        write_state(self.run, {"model": self.model.state_dict(), "head": self.head.detach(), "used": self.vocab.ids,
                               "optimizer": self.optimizer.state_dict(), "step": self.step, "order": self.order,
                               "position": self.position, "epoch": self.epoch, "tokens": self.tokens,
                               "args": vars(self.args), "history": self.history_now(), "copy_step": self.copy_step})

    say = staticmethod(log)  # progress lines, under this script's name

    # The training loop, which the copy stage, the agent stage and train_dspark.py's trainer run:
    # steps until the attribute `counter` reaches `total` or (resumably) --minutes after `start`;
    # each step sets the stage's learning rate, lets its take_step() run a batch's forward and
    # backward (adding to the log window), clips each of clip_groups to norm 1 and steps the optimiser;
    # every --log-every steps its log_entry() makes the log line; state.pt every --save-minutes and
    # at the end. Returns whether it reached `total`.
    def run_stage(self, stage, counter: str, total: int, start: float) -> bool:
        import torch

        a = self.args
        last_save = time.time()
        window = stage.new_window()
        name = counter.replace("_", " ")
        with open(self.run / "log.jsonl", "a") as log_file:
            while getattr(self, counter) < total:
                if a.minutes and time.time() - start > a.minutes * 60:
                    self.say(f"stopping after {a.minutes} minutes at {name} {getattr(self, counter)}; "
                             "run again to continue")
                    break
                for group in self.optimizer.param_groups:
                    group["lr"] = stage.lr_at(getattr(self, counter))
                with self.rounding.applied() if getattr(self, "rounding", None) else contextlib.nullcontext():
                    stage.take_step(window)
                for clipped in self.clip_groups:
                    torch.nn.utils.clip_grad_norm_(clipped, 1.0)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                setattr(self, counter, getattr(self, counter) + 1)
                done = getattr(self, counter)
                if done % a.log_every == 0 or done == total:
                    entry, message = stage.log_entry(window, time.time(), start)
                    log_file.write(json.dumps(entry) + "\n")
                    log_file.flush()
                    self.say(message)
                    window = stage.new_window()
                if time.time() - last_save > a.save_minutes * 60:
                    self.save()
                    last_save = time.time()
        self.save()
        self.say(f"saved {self.run / 'state.pt'} at {name} {getattr(self, counter)}")
        return getattr(self, counter) >= total

    def train(self):
        """The copy stage (if --copy-steps asks for one and the agent stage has not begun), then the
        agent corpus; --minutes bounds both together."""
        start = time.time()
        if self.step == 0 and self.copy_step < self.args.copy_steps:
            if not self.run_stage(self.copy_stage, "copy_step", self.args.copy_steps, start):
                return
        stop_at = self.args.steps if self.args.stop_at is None else min(self.args.stop_at, self.args.steps)
        self.run_stage(self, "step", stop_at, start)

    @staticmethod
    def new_window():
        return {"loss": 0.0, "targets": 0, "tokens": 0, "t": time.time(), "copied": 0.0, "copy_batches": 0,
                "copy_loss": 0.0, "copy_targets": 0, "indexer_kl": 0.0, "indexer_rows": 0,
                "cued_first": 0.0, "cued_copied": 0.0, "cued_batches": 0, "argument_loss": 0.0, "argument_batches": 0,
                "first_word_loss": 0.0, "first_word_batches": 0}

    def take_step(self, window):
        """A batch of sessions until --batch-tokens, its answer loss backward; with --copy-mix W,
        also a copy stage batch, its loss weighted by W (the agent stage alone unlearns copying); with
        --cued-mix W, a CuedCopies batch the same way, with --argument-mix W ArgumentWords' and with
        --first-word-mix W PassageFirstWords'."""
        a = self.args
        if a.copy_mix > 0:
            loss, copied = self.copy_stage.batch_loss(f"copy-mix/{a.seed}/{self.step}")
            (a.copy_mix * loss).backward()
            window["copied"] += copied
            window["copy_batches"] += 1
        if self.cued_copies is not None:
            loss, first, copied = self.cued_copies.batch_loss(f"cued/{a.seed}/{self.step}")
            (a.cued_mix * loss).backward()
            window["cued_first"] += first
            window["cued_copied"] += copied
            window["cued_batches"] += 1
        for name, variants, weight in self.variant_mixes:
            loss = variants.loss(f"{name.replace('_', '-')}/{a.seed}/{self.step}")
            (weight * loss).backward()
            window[f"{name}_loss"] += loss.item()
            window[f"{name}_batches"] += 1
        batch, n_tokens = [], 0
        while n_tokens < a.batch_tokens:
            batch.append(self.next_session())
            n_tokens += len(batch[-1][0])
        n_targets = sum(e - b for _, answers in batch for b, e in answers)
        for group in share_prefixes(batch, a.min_shared):
            loss, (plain, copy_loss, n_copied) = self.group_loss(group)
            loss = loss / n_targets
            if self.distillation is not None:
                kl, rows = IndexerDistillation.loss(self.take_indexer_chunks())
                if rows:
                    # per sampled row of the batch (about batch tokens / stride of them), summed over the sources
                    loss = loss + a.indexer_kl * kl * a.indexer_stride / n_tokens
                    window["indexer_kl"] += kl.item()
                    window["indexer_rows"] += rows
            loss.backward()
            window["loss"] += plain
            window["copy_loss"] += copy_loss
            window["copy_targets"] += n_copied
        self.tokens += n_tokens
        window["tokens"] += n_tokens
        window["targets"] += n_targets

    def log_entry(self, window, now, start):
        a = self.args
        rate = window["tokens"] / (now - window["t"])
        entry = {"step": self.step, "tokens": self.tokens, "loss": window["loss"] / window["targets"],
                 "copy_loss": window["copy_loss"] / max(1, window["copy_targets"]),
                 "lr": self.lr_at(self.step - 1), "tokens_per_s": round(rate, 1), "elapsed_s": round(now - start, 1)}
        indexer = ""
        if window["indexer_rows"]:
            entry["indexer_kl"] = round(window["indexer_kl"] / window["indexer_rows"], 4)
            indexer = f"  indexer KL {entry['indexer_kl']:.3f}"
        copied = ""
        if a.copy_mix > 0:
            entry["copied"] = round(window["copied"] / window["copy_batches"], 4)
            copied = f"  copied {entry['copied']:.2f}"
        if window["cued_batches"]:
            k = window["cued_batches"]
            entry["cued_first"] = round(window["cued_first"] / k, 4)
            entry["cued_copied"] = round(window["cued_copied"] / k, 4)
            copied += f"  cued first {entry['cued_first']:.2f} all {entry['cued_copied']:.2f}"
        for name, _, _ in self.variant_mixes:
            if window[f"{name}_batches"]:
                entry[f"{name}_loss"] = round(window[f"{name}_loss"] / window[f"{name}_batches"], 4)
                copied += f"  {name.replace('_', ' ')} loss {entry[f'{name}_loss']:.3f}"
        eta = (a.steps - self.step) * (now - window["t"]) / a.log_every / 60
        return entry, (f"step {self.step}/{a.steps}  loss {entry['loss']:.4f}  copy loss {entry['copy_loss']:.3f}"
                       f"{copied}{indexer}  {rate:.0f} tokens/s  "
                       f"{self.tokens / 1e6:.2f}M tokens  ~{eta:.0f} min left")


def measure(args) -> None:
    """Prints, as one JSON line, what a saved state has learnt: the answer loss of the first
    --sessions held-out sessions, all tokens and the copied ones (CopiedTokens, by the training
    corpus' counts); the share of copied runs whose first token is the argmax (teacher-forced: the
    token that greedy decoding must get right to start a copy, which the loss hides among the easy
    rest of the run), also apart for the runs whose source lies in a tool result (where the agent
    quotes what its tool returned), for those a respelt word starts (CopiedTokens), for those that
    start a tool call's string argument, and for the respelt ones among those; and the share of
    copied ids it gets right on --copy-batches seeded copy-stage batches (seeds of their own, none a
    training step's). With --round-weights, of the weights as the export writes them."""
    import torch
    from transformers import DynamicCache

    t = Trainer(args)
    t.model.eval()
    if t.distillation is None:
        t.distillation = IndexerDistillation(t.model, args.indexer_stride)
    mass = {}  # index source: [top-k's share of the target, rows]
    heldout, _ = read_corpus(Path(args.corpus) / "heldout.tokens.jsonl", args.max_tokens)
    sums = [0.0, 0.0, 0.0, 0]  # all answer tokens' loss, their count, the copied ones' loss, their count
    tags = [t.tokenizer.encode(tag, add_special_tokens=False) for tag in ("<tool_result>", "</tool_result>")]
    argument = t.tokenizer.encode(' string="true">', add_special_tokens=False)  # a DSML string argument's start
    starts = {kind: [0, 0] for kind in ("all", "from_tool_results", "respelt", "in_arguments", "respelt_in_arguments")}
    with torch.no_grad(), t.rounding.applied() if t.rounding else contextlib.nullcontext():
        for ids, answers in heldout[: args.sessions]:
            hidden = t.forward(ids, 0, DynamicCache(config=t.model.config))
            for source, (held, rows) in t.distillation.coverage(t.take_indexer_chunks()).items():
                total = mass.setdefault(source, [0.0, 0])
                total[0] += held
                total[1] += rows
            _, plain, copy_loss, n_copied = t.answer_loss(ids, answers, hidden, 0)
            sums = [a + b for a, b in zip(sums, [plain, sum(e - b for b, e in answers), copy_loss, n_copied])]
            _, sources, respelt = t.copied.runs(ids, answers)
            if sources:
                at = torch.tensor(list(sources), dtype=torch.long)
                best = t.vocab.with_unused(hidden[at - 1] @ t.head.T).argmax(-1)
                inside = CopiedTokens.inside_tool_results(ids, *tags)
                for ok, p, q in zip((best == t.vocab.column[torch.tensor(ids)[at]]).tolist(), sources, sources.values()):
                    kinds = ["all"] + ["from_tool_results"] * inside[q] + ["respelt"] * (p in respelt)
                    in_argument = ids[p - len(argument): p] == argument
                    kinds += ["in_arguments"] * in_argument + ["respelt_in_arguments"] * (in_argument and p in respelt)
                    for kind in kinds:
                        starts[kind][0] += ok
                        starts[kind][1] += 1
        copied = [t.copy_stage.batch_loss(f"measure/{args.seed}/{i}")[1] for i in range(args.copy_batches)]
    print(json.dumps({"step": t.step, "copy_step": t.copy_step, "round_weights": args.round_weights, "heldout_sessions": min(args.sessions, len(heldout)),
                      "heldout_loss": round(sums[0] / sums[1], 4), "heldout_copy_loss": round(sums[2] / sums[3], 4),
                      "heldout_other_loss": round((sums[0] - sums[2]) / (sums[1] - sums[3]), 4),
                      **{f"heldout_copy_starts{'' if kind == 'all' else '_' + kind}{suffix}": value
                         for kind, (right, count) in starts.items()
                         for suffix, value in (("", count), ("_right", round(right / max(1, count), 4)))},
                      "copy_stage_copied": round(sum(copied) / len(copied), 4), "copy_filler": args.copy_filler,
                      "heldout_indexer_topk_mass": {str(s): round(m / max(1, n), 4) for s, (m, n) in sorted(mass.items())}}))


def export_rounding(name: str, value, dtype, block):
    """value in the format a checkpoint tensor of `dtype` has: (what is stored, its UE8M0 scales or
    None, the value that reads back). FP8 E4M3 with block scales (Engram tables 1 x 32, others
    `block`), packed FP4 E2M1 with scales per 32, or the dtype itself. The export stores the first
    two; WeightRounding trains through the third."""
    import torch
    import gen_model_golden as golden

    if dtype == torch.float8_e4m3fn:
        b0, b1 = (1, 32) if name.endswith("engram.embed.weight") else block
        return golden._fp8_quantise(value, b0, b1)
    if dtype in (torch.int8, torch.uint8):
        q, scales, read_back = golden._fp4_quantise(value)
        return q.view(dtype), scales, read_back
    stored = value.to(dtype)
    return stored, None, stored.to(value.dtype)


def store_like(tensors: dict, name: str, value, block) -> None:
    """tensors[name] = value in the format the tensor already has there (export_rounding), with its
    scales beside it."""
    stored, scales, _ = export_rounding(name, value, tensors[name].dtype, block)
    tensors[name] = stored
    if scales is not None:
        tensors[name[: -len(".weight")] + ".scale"] = scales


def export(args):
    """The trained weights written into a copy of the init checkpoint, tensor by tensor in its own
    dtypes (BF16, F32, FP8 E4M3 with UE8M0 block scales, packed FP4 E2M1 with UE8M0 per 32); the head
    and embedding rows of the ids the corpus never used are zero. A head trained tied (--tie-head) is
    stored once, as embed.weight (config.json says tie_word_embeddings; shards renumbered where one
    held only the head). DSpark stages and vision keep the init (scripts/train_dspark.py export writes
    the trained stages afterwards)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    run = Path(args.run)
    init = run / "init"
    model, quant, _ = load_reference(args.reference, init)
    import gen_model_golden as golden

    saved = torch.load(run / "state.pt", weights_only=False)
    model.load_state_dict(saved["model"])
    used = torch.tensor(saved["used"])
    head = torch.zeros_like(model.lm_head.weight)
    head[used] = saved["head"]
    model.lm_head.weight.data.copy_(head)
    # The embedding rows of ids the corpus never used kept their random init (no gradient reached
    # them): zero, so that such an input is neutral (and the shard compresses in git).
    embed = model.model.embed.weight.data
    kept_rows = embed[used].clone()
    embed.zero_()
    embed[used] = kept_rows
    params = dict(model.named_parameters())
    block = tuple(quant["weight_block_size"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():  # a previous export; its README.md stays
        if old.name != "README.md":
            old.unlink()
    tied = bool(saved["args"].get("tie_head"))
    index = json.loads((init / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    written = []  # (tensors, metadata) of each shard that keeps any
    replaced = kept = 0
    for shard in shards:
        tensors = {}
        with safe_open(str(init / shard), framework="pt") as f:
            metadata = f.metadata()
            for name in f.keys():
                tensors[name] = f.get_tensor(name)
        if tied:
            tensors.pop("head.weight", None)
        for name in list(tensors):
            if name.endswith(".scale") and name[: -len(".scale")] + ".weight" in tensors:
                continue
            target = golden.native_to_reference(name)
            if target is None or target not in params:
                kept += 1
                continue
            store_like(tensors, name, params[target].detach().float(), block)
            replaced += 1
        if tensors:
            written.append((tensors, metadata))
    weight_map, total = {}, 0
    for i, (tensors, metadata) in enumerate(written):
        shard = f"model-{i + 1:05d}-of-{len(written):05d}.safetensors"
        save_file(tensors, str(out / shard), metadata=metadata)
        os.chmod(out / shard, 0o644)
        weight_map.update({name: shard for name in tensors})
        total += sum(t.numel() * t.element_size() for t in tensors.values())
    # hippo's config.json with its two tie_word_embeddings flags set, in its own layout.
    config = (init / "config.json").read_text()
    if tied:
        config = config.replace('"tie_word_embeddings": false', '"tie_word_embeddings": true')
    parsed = json.loads(config)
    assert parsed["tie_word_embeddings"] is tied and parsed["text_config"]["tie_word_embeddings"] is tied, config
    (out / "config.json").write_text(config)
    index = {"metadata": {**index.get("metadata", {}), "total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    last = write_saved_log(run, saved, out / "training-log.jsonl")
    write_provenance(out, saved, run, last)
    log(f"exported step {saved['step']} to {out}: {replaced} tensors trained, {kept} kept from the init "
        f"(add tokenizer.json to load it; `hippo serve` adds it to its copy)")


def source_commit() -> str:
    """HEAD of this repository, marked when tracked files other than the outputs (models/, the golden
    data in tests/data/) have uncommitted changes."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":!models", ":!tests/data"], capture_output=True, text=True).stdout.strip() != ""
    return commit + ("+uncommitted changes" if dirty else "")


def command_options(args: dict) -> str:
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in sorted(args.items())
                    if k not in ("command", "reference", "run", "corpus", "hippo", "tokenizer"))


def write_saved_log(run: Path, saved: dict, path: Path) -> dict:
    """The log.jsonl lines of the training that `saved` (a state.pt) went through, into `path`: a run
    stopped between two saves logged steps its resume did again, and those lines give way to the new
    ones. Copy-curriculum lines (copy_step) come before the agent stage's (step). Returns the last."""
    def position(entry):
        return (1, entry["step"]) if "step" in entry else (0, entry["copy_step"])

    entries = []
    for line in (run / "log.jsonl").read_text().splitlines():
        entry = json.loads(line)
        while entries and position(entries[-1]) >= position(entry):
            entries.pop()
        entries.append(entry)
    entries = [e for e in entries if (e["step"] <= saved["step"] if "step" in e else e["copy_step"] <= saved["copy_step"])]
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    return entries[-1]


def file_records(folder: Path, names) -> dict:
    """provenance.json's `files`: {name: {bytes, sha256}} of these files of `folder`, in name order."""
    import hashlib

    return {name: {"bytes": (folder / name).stat().st_size,
                   "sha256": hashlib.sha256((folder / name).read_bytes()).hexdigest()} for name in sorted(names)}


def write_provenance(out: Path, saved: dict, run: Path, last: dict) -> None:
    """provenance.json: how the checkpoint was made (commands, training settings, corpus manifest,
    commit, steps, the last logged loss) and every file's size and sha256."""
    train = saved["args"]
    # A state saved before runs kept their history was one run.
    history = saved.get("history") or [{"from_step": 0, "to_step": saved["step"], "args": train}]
    # Every corpus the segments trained on (--new-corpus went on from one to the next), in order.
    corpora = list(dict.fromkeys(segment["args"]["corpus"] for segment in history))
    manifests = [json.loads((Path(corpus) / "manifest.json").read_text()) for corpus in corpora]

    def corpus_command(manifest):
        return (f"scripts/gen_agent_corpus.py --seed {manifest['seed']} "
                f"--sessions {manifest['splits']['train']['sessions']}"
                + (" --spaced-copies" if manifest.get("spaced_copies") else "")
                + (" --repo-names" if manifest.get("repo_names") else "")
                + (f" --team-share {manifest['team_share']}" if "team_share" in manifest else "")
                + (" --fixed-team-answers" if manifest.get("fixed_team_answers") else "")
                + (f" --extra-words {manifest['extra_words']}" if manifest.get("extra_words") else ""))

    def segment_command(segment):
        where = f", corpus {corpora.index(segment['args']['corpus']) + 1}" if len(corpora) > 1 else ""
        return (f"scripts/train_demo.py train {command_options(segment['args'])} (steps {segment['from_step']}-"
                f"{segment['to_step']}{where})")

    files = file_records(out, [p.name for p in out.iterdir() if p.name not in ("provenance.json", "README.md")])
    provenance = {
        "made_by": [f"hippo model init --preset demo --seed {train['seed']}",
                    *[f"{corpus_command(m)}{f' (corpus {k})' if len(corpora) > 1 else ''}"
                      for k, m in enumerate(manifests, 1)],
                    *[segment_command(segment) for segment in history],
                    "scripts/train_demo.py export"],
        "commit": source_commit(),
        "steps": saved["step"],
        "tokens": saved["tokens"],
        "last_logged": last,
        "corpus": manifests[-1],  # the last: its task format is the model's (scripts/eval_demo.py)
        **({"earlier_corpora": manifests[:-1]} if len(manifests) > 1 else {}),
        "files": files,
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")


def add_run_arguments(parser, steps: int, lr: float, warmup: int) -> None:
    """The options of a training run that this script and train_dspark.py share."""
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--minutes", type=float, default=0, help="stop (resumably) after this long; 0: no limit")
    parser.add_argument("--max-tokens", type=int, default=2048, help="skip longer sessions")
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--save-minutes", type=float, default=10)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    m = sub.add_parser("measure", help="a saved state's held-out losses and copy-stage accuracy (measure())")
    m.add_argument("--sessions", type=int, default=25, help="the first this many held-out sessions")
    m.add_argument("--copy-batches", type=int, default=4, help="seeded copy-stage batches of 32 sequences")
    for p in (t, m):
        add_train_arguments(p)
    e = sub.add_parser("export")
    e.add_argument("--out", required=True)
    for p in (t, m, e):
        p.add_argument("--reference", required=True, help="the overlay of scripts/reference/assemble_reference.py")
        p.add_argument("--run", required=True)
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--hippo", default=str(ROOT / "build/release/hippo"))
        p.add_argument("--tokenizer", default=str(ROOT / ".cache/deepseek-v4-tokenizer"))
    args = parser.parse_args(argv)
    if args.command == "train":
        init = Path(args.run) / "init"
        if not (init / "config.json").is_file():
            Path(args.run).mkdir(parents=True, exist_ok=True)
            subprocess.run([args.hippo, "--log-level", "warn", "model", "init", "--preset", "demo", "--seed",
                            str(args.seed), "--out", str(init), "--tokenizer", args.tokenizer], check=True)
        Trainer(args).train()
    elif args.command == "measure":
        measure(args)
    else:
        export(args)


def add_train_arguments(t) -> None:
    """The options of `train` (and of `measure`, which rebuilds its trainer)."""
    add_run_arguments(t, steps=900, lr=3e-3, warmup=30)
    t.add_argument("--eager", action="store_true", help="run the mHC mixes eagerly, not compiled (compiled_mixes)")
    t.add_argument("--stop-at", type=int,
                   help="stop (resumably) at this agent step, the schedule still spanning --steps (default: at --steps)")
    t.add_argument("--batch-tokens", type=int, default=3000, help="sessions per step until this many tokens")
    t.add_argument("--weight-decay", type=float, default=0.01)
    t.add_argument("--chunk", type=int, default=512, help="forward in chunks of this many tokens (0: one forward)")
    t.add_argument("--min-shared", type=int, default=256,
                   help="sessions of a batch that share this many leading tokens run them once")
    t.add_argument("--copy-steps", type=int, default=0, help="first, this many steps of copying alone (CopyStage)")
    t.add_argument("--copy-mix", type=float, default=0,
                   help="each agent step also trains a copy batch, its loss weighted by this")
    t.add_argument("--copy-weight", type=float, default=1,
                   help="weight of the copied answer tokens (CopiedTokens) in the agent loss")
    t.add_argument("--start-weight", type=float, default=0,
                   help="weight of the first token of each run of copied tokens (default: --copy-weight)")
    t.add_argument("--cued-mix", type=float, default=0,
                   help="each agent step also trains a cued, respaced copy batch (CuedCopies), its loss this weight")
    t.add_argument("--argument-mix", type=float, default=0,
                   help="each agent step also trains 8 variants of a respelt tool-call argument (ArgumentWords), "
                        "their loss this weight")
    t.add_argument("--first-word-mix", type=float, default=0,
                   help="each agent step also trains 8 variants of a copy answer's respelt first word, any "
                        "one-word passage atom of either split (PassageFirstWords), their loss this weight")
    t.add_argument("--copy-rare", type=float, default=0.05,
                   help="an id in more than this share of the sessions is never a copied token")
    t.add_argument("--copy-filler", type=int, default=0,
                   help="copy stage: this many random ids around the copied ones, the copy prompted by its first")
    t.add_argument("--indexer-kl", type=float, default=0,
                   help="train the indexers by KL to their layers' dense attention (IndexerDistillation), this weight")
    t.add_argument("--indexer-stride", type=int, default=8,
                   help="the indexer loss samples the query positions past the window that are multiples of this")
    t.add_argument("--tie-head", action="store_true",
                   help="train the head's rows as the embedding's rows of the same ids (one tensor)")
    t.add_argument("--new-corpus", action="store_true",
                   help="go on from a state trained on another --corpus (the vocabulary keeps that one's ids too; "
                        "new ids' rows as the init left them; this corpus' data order from its start)")
    t.add_argument("--round-weights", action="store_true",
                   help="forwards see the weights rounded as the export writes them, the gradient passed straight "
                        "through (WeightRounding); measure: the exported model's figures")


if __name__ == "__main__":
    main()
