#!/usr/bin/env python3
"""Trains the demo model's DSpark draft stages (`../shared/design/dspark.md`) by distillation from the
frozen target, on the target's own hidden states, with the torch twin of hippo's draft
(scripts/dspark_twin.py), and writes them into the target's checkpoint.

    REF=~/.venvs/hippo-ref/bin/python
    # the target: scripts/train_demo.py export --out models/demo; then
    $REF scripts/train_dspark.py train --reference OVERLAY --checkpoint models/demo --corpus runs/corpus \\
        --run runs/dspark [--steps 800] [--minutes M] [--threads 1]
    $REF scripts/train_dspark.py export --reference OVERLAY --checkpoint models/demo --run runs/dspark

How it trains (DeepSpec's recipe for DSpark, on this corpus):
- Anchors are the positions p inside the corpus' answer spans (the tokens the model generates): the
  state holds ids[:p], the anchor is ids[p], slot k predicts ids[p + k + 1]; a slot whose target lies
  past its span's end (a tool result or a user turn follows) carries no loss.
- Slot k's loss is the KL divergence from the target's next-token distribution at p + k (one frozen
  forward of the session, which also gives the features) to the draft's: softmax(U_k + W2 W1[prev_k])
  with prev_k = ids[p + k] (teacher forcing; at inference the previous draft, the same token whenever
  it was accepted). Both softmaxes run over the ids the corpus uses plus one logit log(n_unused) for
  the rest, as scripts/train_demo.py does: the rows of unused ids in the head, W1 and W2 stay zero.
- The confidence head learns, by binary cross-entropy on detached inputs, whether slot k's draft (the
  argmax) is the target's argmax: the probability that verification accepts it.
- Trained: main_proj, main_norm, the stages, the draft norm, W1, W2, the confidence head and the noise
  token's embedding row (the target never reads it). The target and its head are frozen.
Deterministic for a seed on one machine; resumable (state.pt, log.jsonl in --run).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "reference"))
import train_demo  # noqa: E402  (the data order, schedule, run options and export helpers)


def log(message: str) -> None:
    print(f"train_dspark: {message}", file=sys.stderr, flush=True)


def load(args):
    """The frozen target and the twin, both from the checkpoint."""
    import dspark_twin

    target, twin, quant = dspark_twin.load_target_and_twin(args.reference, Path(args.checkpoint), args.tokenizer)
    target.requires_grad_(False)
    return target, twin, quant


class Trainer:
    def __init__(self, args):
        import torch

        self.args = args
        self.run = Path(args.run)
        self.run.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(args.threads)
        self.target, self.twin, _ = load(args)
        self.sessions, _ = train_demo.read_corpus(Path(args.corpus) / "train.tokens.jsonl", args.max_tokens)
        self.vocab = train_demo.RestrictedVocabulary(self.sessions, self.target.config.vocab_size)
        used = self.vocab.used
        self.head = self.target.lm_head.weight[used]
        # W1 and W2 train on the used ids' rows only; the twin's full tables are written from them.
        self.twin.markov_embed.requires_grad_(False)
        self.twin.markov_head.requires_grad_(False)
        self.w1 = torch.nn.Parameter(self.twin.markov_embed.detach()[used].clone())
        self.w2 = torch.nn.Parameter(self.twin.markov_head.detach()[used].clone())
        self.parameters = [p for p in self.twin.parameters() if p.requires_grad] + [self.w1, self.w2]
        self.clip_groups = [self.parameters]
        self.optimizer = torch.optim.AdamW(self.parameters, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
        self.step, self.order, self.position, self.epoch = 0, [], 0, 0
        saved = train_demo.saved_state(self.run, self.vocab.ids)
        if saved is not None:
            self.twin.load_state_dict(saved["twin"])
            self.w1.data.copy_(saved["w1"])
            self.w2.data.copy_(saved["w2"])
            self.optimizer.load_state_dict(saved["optimizer"])
            self.step, self.order, self.position, self.epoch = saved["step"], saved["order"], saved["position"], saved["epoch"]
            log(f"resumed at step {self.step}")
        self.twin.train()

    say = staticmethod(log)
    # The data order, the learning-rate schedule and the training loop of train_demo.py.
    next_session = train_demo.Trainer.next_session
    lr_at = train_demo.Trainer.lr_at
    run_stage = train_demo.Trainer.run_stage

    def train(self):
        self.run_stage(self, "step", self.args.steps, time.time())

    def session_losses(self, ids, answers):
        """(summed KL, summed confidence BCE, slots, accepted-if-greedy slots) of one session."""
        import torch
        import torch.nn.functional as F

        import dspark_twin

        B = self.twin.block
        with torch.no_grad():
            features, target_hidden = dspark_twin.target_taps(self.target, ids)
            target_logp = F.log_softmax(self.vocab.with_unused(target_hidden @ self.head.T), dim=-1)
        anchors = [p for b, e in answers for p in range(b, e - 1)]
        span_end = {p: e for b, e in answers for p in range(b, e - 1)}
        positions = torch.tensor(anchors)
        tokens = torch.tensor(ids)
        hidden, normed = self.twin(self.target, features, positions, tokens[positions])
        slot_positions = positions.unsqueeze(1) + torch.arange(B)  # slot k predicts position + k + 1
        live = slot_positions + 1 < torch.tensor([span_end[p] for p in anchors]).unsqueeze(1)
        prev = tokens[slot_positions.clamp_max(len(ids) - 1)]
        e1 = self.w1[self.vocab.column[prev].clamp_min(0)]  # prev is a corpus token: always a used id
        logits = normed @ self.head.T + e1 @ self.w2.T
        draft_logp = F.log_softmax(self.vocab.with_unused(logits), dim=-1)
        teacher = target_logp[slot_positions.clamp_max(len(ids) - 1)]
        kl = (teacher.exp() * (teacher - draft_logp)).sum(-1)
        kl = (kl * live).sum()
        accepted = (draft_logp.argmax(-1) == teacher.argmax(-1)).float()
        confidence = self.twin.confidence(torch.cat([hidden.detach(), e1.detach()], dim=-1))[..., 0]
        bce = F.binary_cross_entropy_with_logits(confidence, accepted, reduction="none")
        bce = (bce * live).sum()
        return kl, bce, int(live.sum()), float((accepted * live).sum())

    def save(self):
        used = self.vocab.used
        self.twin.markov_embed.data.zero_()
        self.twin.markov_embed.data[used] = self.w1.detach()
        self.twin.markov_head.data.zero_()
        self.twin.markov_head.data[used] = self.w2.detach()
        train_demo.write_state(self.run, {"twin": self.twin.state_dict(), "w1": self.w1.detach(), "w2": self.w2.detach(),
                                          "used": self.vocab.ids, "optimizer": self.optimizer.state_dict(),
                                          "step": self.step, "order": self.order, "position": self.position,
                                          "epoch": self.epoch, "args": vars(self.args)})

    @staticmethod
    def new_window():
        return {"kl": 0.0, "bce": 0.0, "slots": 0, "accepted": 0.0, "t": time.time()}

    def take_step(self, window):
        """--batch-sessions sessions, their KL and confidence losses backward."""
        batch = [self.next_session() for _ in range(self.args.batch_sessions)]
        n_slots = sum(min(self.twin.block, e - 1 - p) for _, answers in batch for b, e in answers for p in range(b, e - 1))
        for ids, answers in batch:
            kl, bce, slots, accepted = self.session_losses(ids, answers)
            ((kl + bce) / max(1, n_slots)).backward()
            window["kl"] += kl.item()
            window["bce"] += bce.item()
            window["slots"] += slots
            window["accepted"] += accepted

    def log_entry(self, window, now, start):
        a = self.args
        n = max(1, window["slots"])
        entry = {"step": self.step, "kl": window["kl"] / n, "confidence_bce": window["bce"] / n,
                 "greedy_match": window["accepted"] / n, "lr": self.lr_at(self.step - 1),
                 "seconds_per_step": round((now - window["t"]) / a.log_every, 2)}
        return entry, (f"step {self.step}/{a.steps}  KL {entry['kl']:.4f}  slots matching the target's argmax "
                       f"{100 * entry['greedy_match']:.1f}%  {entry['seconds_per_step']} s/step")


def export(args):
    """The trained draft written into the checkpoint's own tensors (mtp.*, the noise token's embedding
    row) in their formats, its log beside them (dspark-training-log.jsonl); provenance.json gains a
    `dspark` entry and new file digests."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    import dspark_twin

    target, twin, quant = load(args)
    saved = torch.load(Path(args.run) / "state.pt", weights_only=False)
    twin.load_state_dict(saved["twin"])
    checkpoint = Path(args.checkpoint)
    names = dspark_twin.checkpoint_names(twin)
    params = dict(twin.named_parameters())
    block = tuple(quant["weight_block_size"])
    index = json.loads((checkpoint / "model.safetensors.index.json").read_text())
    written = 0
    for shard in sorted(set(index["weight_map"].values())):
        with safe_open(str(checkpoint / shard), framework="pt") as f:
            metadata = f.metadata()
            tensors = {name: f.get_tensor(name) for name in f.keys()}
        changed = False
        for twin_name, name in names.items():
            if name not in tensors:
                continue
            value = params[twin_name].detach().float()
            if twin_name == "noise_embed":
                table = tensors[name].float()
                table[twin.noise_id] = value
                value = table
            train_demo.store_like(tensors, name, value, block)
            written += 1
            changed = True
        if changed:
            save_file(tensors, str(checkpoint / shard), metadata=metadata)
            os.chmod(checkpoint / shard, 0o644)
    provenance_path = checkpoint / "provenance.json"
    provenance = json.loads(provenance_path.read_text())
    train = saved["args"]
    provenance["made_by"] = [c for c in provenance["made_by"] if not c.startswith("scripts/train_dspark.py")]
    provenance["made_by"] += [
        "scripts/train_dspark.py train " + train_demo.command_options({k: v for k, v in train.items() if k != "checkpoint"}),
        "scripts/train_dspark.py export"]
    last = train_demo.write_saved_log(Path(args.run), saved, checkpoint / "dspark-training-log.jsonl")
    provenance["dspark"] = {"commit": train_demo.source_commit(), "steps": saved["step"], "last_logged": last}
    # The checkpoint's files as the text model's export listed them, and this log (not a tokenizer
    # copied in to evaluate it).
    provenance["files"] = train_demo.file_records(checkpoint, {*provenance["files"], "dspark-training-log.jsonl"})
    provenance_path.write_text(json.dumps(provenance, indent=1) + "\n")
    log(f"wrote {written} DSpark tensors (step {saved['step']}) into {checkpoint}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    train_demo.add_run_arguments(t, steps=800, lr=2e-3, warmup=20)
    t.add_argument("--batch-sessions", type=int, default=4)
    t.add_argument("--seed", type=int, default=1)
    e = sub.add_parser("export")
    for p in (t, e):
        p.add_argument("--reference", required=True, help="the overlay of scripts/reference/assemble_reference.py")
        p.add_argument("--checkpoint", required=True, help="the target's checkpoint (train_demo.py export)")
        p.add_argument("--run", required=True)
        p.add_argument("--tokenizer", default=str(ROOT / ".cache/deepseek-v4-tokenizer"))
    args = parser.parse_args(argv)
    if args.command == "train":
        Trainer(args).train()
    else:
        export(args)


if __name__ == "__main__":
    main()
