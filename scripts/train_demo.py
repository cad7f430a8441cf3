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
    # the trained weights in the init checkpoint's layout (FP8 dense, FP4 experts, as the release)
    $REF scripts/train_demo.py export --reference OVERLAY --run runs/demo --out models/demo

The run folder holds init/ (`hippo model init --preset demo --seed SEED`: the starting weights, and
the layout the export fills), state.pt (weights, optimiser, step, data order; saved every
--save-minutes and at the end) and log.jsonl (one line per --log-every steps: step, tokens, loss,
tokens/s).

How it trains:
- Every parameter of the text model that gets a gradient, starting from hippo's own init.
- The loss is next-token cross-entropy on the ids the model generates (the answer spans of
  `hippo model render`): the prompt, tool results and user turns are context only.
- The head: only the ids the corpus uses are trained. Every other row of the 129,280 x 64 head is
  zero, so at inference each such id has logit 0; the training softmax over the used ids gets one
  more logit, log(n_unused), which stands for all of them together. That is the same distribution
  the full head gives at inference, at a fraction of the cost.
- The reference's fake-quantisers (FP8 window KV, FP4 compressed KV and index keys/queries) are
  rounded in the forward and passed straight through in the backward (without that no gradient
  reaches the compressor). Inference and export use the reference unchanged.
- Not trained (no gradient reaches them): the indexer's projections (selection is a top-k), the
  routers' selection biases, the DSpark stages and the vision tower (the reference has neither;
  they keep hippo's init).
Sessions longer than --max-tokens are skipped. Deterministic for a seed on one machine: the data
order comes from the seed, torch runs with a fixed thread count.
"""
from __future__ import annotations

import argparse
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
    """The reference model at the init checkpoint's weights, and its tokenizer bound."""
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
    return model, quant


def straight_through_quantisers():
    """Forward: the reference's rounding, unchanged. Backward: identity (straight-through)."""
    from transformers.models.deepseek_v41 import modeling_deepseek_v41 as m

    for name in ("_fake_quant_fp4_block", "_fake_quant_fp8_block"):
        rounding = getattr(m, name)

        def ste(x, *args, _rounding=rounding, **kwargs):
            y = _rounding(x.detach(), *args, **kwargs)
            return y + (x - x.detach()) if x.requires_grad else y

        setattr(m, name, ste)


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


class Trainer:
    def __init__(self, args):
        import torch

        self.args = args
        self.run = Path(args.run)
        self.init = self.run / "init"
        torch.set_num_threads(args.threads)
        self.model, _ = load_reference(args.reference, self.init)
        straight_through_quantisers()
        self.sessions, skipped = read_corpus(Path(args.corpus) / "train.tokens.jsonl", args.max_tokens)
        log(f"{len(self.sessions)} training sessions ({skipped} longer than {args.max_tokens} tokens skipped)")
        used = sorted({i for ids, _ in self.sessions for i in ids})
        vocab = self.model.config.vocab_size
        self.used = torch.tensor(used)
        self.column = torch.full((vocab,), -1, dtype=torch.long)
        self.column[self.used] = torch.arange(len(used))
        self.unused_logit = math.log(vocab - len(used))
        self.head = torch.nn.Parameter(self.model.lm_head.weight.detach()[self.used].clone())
        self.model.lm_head.weight.requires_grad_(False)
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            if not p.requires_grad:
                continue
            (no_decay if p.ndim < 2 or "embed" in name else decay).append(p)
        self.parameters = decay + [self.head] + no_decay
        self.optimizer = torch.optim.AdamW([{"params": decay + [self.head], "weight_decay": args.weight_decay},
                                            {"params": no_decay, "weight_decay": 0.0}],
                                           lr=args.lr, betas=(0.9, 0.95))
        self.step = 0
        self.order = []
        self.position = 0
        self.epoch = 0
        self.tokens = 0
        state = self.run / "state.pt"
        if state.is_file():
            saved = torch.load(state, weights_only=False)
            if saved["used"] != used:
                raise SystemExit(f"{state}: trained on another corpus (its used ids differ); start a new --run")
            self.model.load_state_dict(saved["model"])
            self.head.data.copy_(saved["head"])
            self.optimizer.load_state_dict(saved["optimizer"])
            self.step, self.order, self.position = saved["step"], saved["order"], saved["position"]
            self.epoch, self.tokens = saved["epoch"], saved["tokens"]
            log(f"resumed at step {self.step} ({self.tokens} tokens)")
        self.model.train()

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

    def session_loss(self, ids, answers):
        """Summed cross-entropy of the answer tokens."""
        import torch
        import torch.nn.functional as F

        x = torch.tensor([ids])
        hidden = self.model.model(input_ids=x, use_cache=True).last_hidden_state[0]
        positions = torch.cat([torch.arange(b - 1, e - 1) for b, e in answers])
        targets = self.column[x[0, positions + 1]]
        logits = hidden[positions] @ self.head.T
        logits = torch.cat([logits, torch.full((len(positions), 1), self.unused_logit)], dim=1)
        return F.cross_entropy(logits, targets, reduction="sum")

    def save(self):
        import torch

        state = self.run / "state.pt"
        torch.save({"model": self.model.state_dict(), "head": self.head.detach(), "used": self.used.tolist(),
                    "optimizer": self.optimizer.state_dict(), "step": self.step, "order": self.order,
                    "position": self.position, "epoch": self.epoch, "tokens": self.tokens,
                    "args": vars(self.args)}, str(state) + ".partial")
        os.replace(str(state) + ".partial", state)

    def train(self):
        import torch

        a = self.args
        start = time.time()
        last_save = start
        window = {"loss": 0.0, "targets": 0, "tokens": 0, "t": time.time()}
        with open(self.run / "log.jsonl", "a") as log_file:
            while self.step < a.steps:
                if a.minutes and time.time() - start > a.minutes * 60:
                    log(f"stopping after {a.minutes} minutes at step {self.step}; run again to continue")
                    break
                for group in self.optimizer.param_groups:
                    group["lr"] = self.lr_at(self.step)
                batch, n_tokens = [], 0
                while n_tokens < a.batch_tokens:
                    batch.append(self.next_session())
                    n_tokens += len(batch[-1][0])
                n_targets = sum(e - b for _, answers in batch for b, e in answers)
                step_loss = 0.0
                for ids, answers in batch:
                    loss = self.session_loss(ids, answers)
                    (loss / n_targets).backward()
                    step_loss += loss.item()
                self.tokens += n_tokens
                window["tokens"] += n_tokens
                torch.nn.utils.clip_grad_norm_(self.parameters, 1.0)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.step += 1
                window["loss"] += step_loss
                window["targets"] += n_targets
                if self.step % a.log_every == 0 or self.step == a.steps:
                    now = time.time()
                    rate = window["tokens"] / (now - window["t"])
                    entry = {"step": self.step, "tokens": self.tokens, "loss": window["loss"] / window["targets"],
                             "lr": self.lr_at(self.step - 1), "tokens_per_s": round(rate, 1),
                             "elapsed_s": round(now - start, 1)}
                    log_file.write(json.dumps(entry) + "\n")
                    log_file.flush()
                    eta = (a.steps - self.step) * (now - window["t"]) / a.log_every / 60
                    log(f"step {self.step}/{a.steps}  loss {entry['loss']:.4f}  {rate:.0f} tokens/s  "
                        f"{self.tokens / 1e6:.2f}M tokens  ~{eta:.0f} min left")
                    window = {"loss": 0.0, "targets": 0, "tokens": 0, "t": now}
                if time.time() - last_save > a.save_minutes * 60:
                    self.save()
                    last_save = time.time()
        self.save()
        log(f"saved {self.run / 'state.pt'} at step {self.step}")


def export(args):
    """The trained weights written into a copy of the init checkpoint, tensor by tensor in its own
    dtypes (BF16, F32, FP8 E4M3 with UE8M0 block scales, packed FP4 E2M1 with UE8M0 per 32); the head
    and embedding rows of the ids the corpus never used are zero. DSpark stages and vision keep the
    init."""
    import shutil

    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    run = Path(args.run)
    init = run / "init"
    model, quant = load_reference(args.reference, init)
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
    index = json.loads((init / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    replaced = kept = 0
    for shard in shards:
        tensors = {}
        with safe_open(str(init / shard), framework="pt") as f:
            metadata = f.metadata()
            for name in f.keys():
                tensors[name] = f.get_tensor(name)
        for name in list(tensors):
            if name.endswith(".scale") and name[: -len(".scale")] + ".weight" in tensors:
                continue
            target = golden.native_to_reference(name)
            if target is None or target not in params:
                kept += 1
                continue
            value = params[target].detach().float()
            stored = tensors[name]
            scale_name = name[: -len(".weight")] + ".scale"
            if stored.dtype == torch.float8_e4m3fn:
                b0, b1 = (1, 32) if name.endswith("engram.embed.weight") else block  # tables: 1 x 32
                q, s, _ = golden._fp8_quantise(value, b0, b1)
                tensors[name], tensors[scale_name] = q, s
            elif stored.dtype in (torch.int8, torch.uint8):
                q, s, _ = golden._fp4_quantise(value)
                tensors[name], tensors[scale_name] = q.view(stored.dtype), s
            else:
                tensors[name] = value.to(stored.dtype)
            replaced += 1
        save_file(tensors, str(out / shard), metadata=metadata)
        os.chmod(out / shard, 0o644)
    shutil.copyfile(init / "config.json", out / "config.json")
    shutil.copyfile(init / "model.safetensors.index.json", out / "model.safetensors.index.json")
    shutil.copyfile(run / "log.jsonl", out / "training-log.jsonl")
    write_provenance(out, saved, run)
    log(f"exported step {saved['step']} to {out}: {replaced} tensors trained, {kept} kept from the init "
        f"(add tokenizer.json to load it; `hippo serve` adds it to its copy)")


def write_provenance(out: Path, saved: dict, run: Path) -> None:
    """provenance.json: how the checkpoint was made (commands, training settings, corpus manifest,
    commit, steps, the last logged loss) and every file's size and sha256."""
    import hashlib

    train = saved["args"]
    corpus = Path(train["corpus"])
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip() != ""
    last = json.loads((run / "log.jsonl").read_text().splitlines()[-1])
    files = {}
    for path in sorted(out.iterdir()):
        if path.name not in ("provenance.json", "README.md"):
            files[path.name] = {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    manifest = json.loads((corpus / "manifest.json").read_text())
    provenance = {
        "made_by": [f"hippo model init --preset demo --seed {train['seed']}",
                    f"scripts/gen_agent_corpus.py --seed {manifest['seed']} --sessions {manifest['splits']['train']['sessions']}",
                    "scripts/train_demo.py train " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in sorted(train.items())
                                                          if k not in ("command", "reference", "run", "corpus", "hippo", "tokenizer")),
                    "scripts/train_demo.py export"],
        "commit": commit + ("+uncommitted changes" if dirty else ""),
        "steps": saved["step"],
        "tokens": saved["tokens"],
        "last_logged": last,
        "corpus": manifest,
        "files": files,
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--corpus", required=True)
    t.add_argument("--steps", type=int, default=900)
    t.add_argument("--minutes", type=float, default=0, help="stop (resumably) after this long; 0: no limit")
    t.add_argument("--batch-tokens", type=int, default=3000, help="sessions per step until this many tokens")
    t.add_argument("--max-tokens", type=int, default=2048)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--warmup", type=int, default=30)
    t.add_argument("--weight-decay", type=float, default=0.01)
    t.add_argument("--threads", type=int, default=2, help="torch threads")
    t.add_argument("--log-every", type=int, default=10)
    t.add_argument("--save-minutes", type=float, default=10)
    e = sub.add_parser("export")
    e.add_argument("--out", required=True)
    for p in (t, e):
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
    else:
        export(args)


if __name__ == "__main__":
    main()
