#!/usr/bin/env python3
"""Held-out agent tasks on a model served by `hippo serve`, through /v1/chat/completions with the
official `openai` client: how often the model solves a task exactly.

    .venv/bin/python scripts/eval_demo.py [--model-dir DIR] [--tasks 20] [--kinds calc,search,...] [--json OUT]

starts `hippo serve` on the checkpoint, by default the embedded default model (a fresh database in a
temporary folder, a free port), and
for each task of each kind (scripts/gen_agent_corpus.py, held-out split: names, words, files and
questions no training session used) plays the conversation as an agent would: the user's turn goes
in, and every tool call the model makes must be the expected one (tool name and arguments equal as
JSON); its result is the tool's real result (the calculator runs; file listings and memory come
from the task) and goes back in; the task is solved when the model's final answer holds every
expected fact (the result, each file name, the remembered value, the copied passage). The team kinds
(--kinds plan,part,combine: examples/multi_agent.py's coordinator and workers) grade a plan as solved
when it has as many lines as parts were asked for, each a distinct part of the task's kind; a
worker's answer when its part's template gives it with any draw of its free words
(gen_agent_corpus.team_pattern); a combined answer when it holds every worker's answer. Turns that
are not graded (small talk between a fact and its question) keep the model's own answer. Greedy
decoding. Prints per kind and in all the share of tasks solved, and the share in which every call
the model made named the expected tools (and text came where text was expected) up to the first
mistake; --json writes every transcript. --speculative MODE sets the server's drafting (off,
context, dspark, auto: its default); after the tasks the server's /metrics give, per drafter, the
draft tokens verified and taken, and the mean tokens taken per verified draft.

    .venv/bin/python scripts/eval_demo.py --recall 1000,8000,32000 [--tasks 10]

measures instead how often the model recalls a fact stated that many tokens before the question.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gen_agent_corpus  # noqa: E402

KINDS = ["calc", "search", "both", "memory", "memory_missing", "fact", "copy"]
TEAM_KINDS = list(gen_agent_corpus.TEAM_KINDS)  # examples/multi_agent.py's: --kinds plan,part,combine


class Server:
    """`hippo serve` on a checkpoint, a fresh database and a free port, with one API key."""

    def __init__(self, hippo: str, model_dir: str | None, tokenizer: str, workdir: pathlib.Path, speculative: str):
        db = str(workdir / "eval.db")
        r = subprocess.run([hippo, "key", "create", "--tenant", "eval", "--db", db], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"hippo key create: {r.stderr}")
        self.api_key = r.stdout.strip()
        self.out = open(workdir / "serve.out", "w+")
        model = ["--model", model_dir] if model_dir else ["--tokenizer", tokenizer]
        self.proc = subprocess.Popen([hippo, "--log-level", "warn", "serve", *model, "--db", db,
                                      "--port", "0", "--bind", "127.0.0.1", "--speculative", speculative],
                                     stdout=self.out, stderr=subprocess.STDOUT, cwd=workdir)
        deadline = time.monotonic() + 120
        while True:
            m = re.search(r"listening on http://[^:]+:(\d+)", (workdir / "serve.out").read_text())
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}/v1"
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"hippo serve did not start: {(workdir / 'serve.out').read_text()}")
            time.sleep(0.1)

    def metrics(self) -> str:
        import urllib.request

        request = urllib.request.Request(self.url[: -len("/v1")] + "/metrics",
                                         headers={"Authorization": f"Bearer {self.api_key}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read().decode()

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.out.close()


@contextlib.contextmanager
def served_model(args, timeout: float):
    """An `openai` client of a `hippo serve` on the model of args, the model's id and the server."""
    from openai import OpenAI

    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.hippo, args.model_dir, args.tokenizer, pathlib.Path(tmp), args.speculative)
        try:
            client = OpenAI(base_url=server.url, api_key=server.api_key, max_retries=0, timeout=timeout)
            yield client, client.models.list().data[0].id, server
        finally:
            server.close()


def play(client, model: str, task: dict, max_tokens: int):
    """Plays one task: (solved, why, transcript, whether every call named the expected tools)."""
    expected = task["messages"]
    tools = task.get("tools")
    history = [m for m in expected[:1] if m["role"] == "system"]
    transcript = []
    i = len(history)
    final_text = None
    right_tools = True
    while i < len(expected):
        m = expected[i]
        if m["role"] == "user":
            history.append(m)
            i += 1
            continue
        # expected[i] is the assistant's turn: ask the model for it.
        r = client.chat.completions.create(model=model, messages=history, tools=tools, temperature=0,
                                           max_tokens=max_tokens)
        got = r.choices[0].message
        calls = [(c.function.name, c.function.arguments) for c in (got.tool_calls or [])]
        transcript.append({"text": got.content, "calls": calls})
        want_calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                      for c in m.get("tool_calls") or []]
        if want_calls:
            right_tools = [name for name, _ in calls] == [name for name, _ in want_calls]
            try:
                made = [(name, json.loads(arguments)) for name, arguments in calls]
            except json.JSONDecodeError:
                return False, f"calls with arguments that are not JSON: {calls}", transcript, right_tools
            if made != want_calls:
                return False, f"called {made}, expected {want_calls}", transcript, right_tools
            history.append({"role": "assistant", "content": got.content or "", "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for c in got.tool_calls]})
            results = expected[i + 1:i + 1 + len(want_calls)]
            for c, result in zip(got.tool_calls, results):
                history.append({"role": "tool", "tool_call_id": c.id, "content": result["content"]})
            i += 1 + len(want_calls)
            continue
        if calls:
            return False, f"called {calls} where a text answer was expected", transcript, False
        history.append({"role": "assistant", "content": got.content or ""})
        final_text = got.content or ""
        i += 1
    graded = task["task"][-1]
    if "pattern" in graded:  # a plan or a worker's answer: one of the many sensible ones, no line twice
        answer = (final_text or "").strip()
        lines = answer.splitlines()
        if not re.fullmatch(graded["pattern"], answer) or len(set(lines)) != len(lines):
            return False, f"the answer {final_text!r} is not one the task's templates give", transcript, right_tools
        return True, "", transcript, right_tools
    facts = graded.get("expect", [])
    missing = [f for f in facts if f not in (final_text or "")]
    if missing:
        return False, f"the answer {final_text!r} lacks {missing}", transcript, right_tools
    return True, "", transcript, right_tools


def recall(client, model: str, generator, distance: int, max_tokens: int):
    """A fact stated, a user turn of about `distance` tokens of notes after it (the corpus' passage
    words, ~2.5 tokens each), then the question: (solved, answer, prompt tokens)."""
    key = generator.rng.choice(generator.keys)
    value = generator.fact_value(key)
    notes = generator.passage(max(1, round(distance / 2.5)))
    messages = [{"role": "user", "content": f"My {key} is {value}."},
                {"role": "assistant", "content": "Got it."},
                {"role": "user", "content": f"Here are my notes: {notes}"},
                {"role": "assistant", "content": "Okay, noted."},
                {"role": "user", "content": f"What is my {key}?"}]
    r = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=max_tokens)
    answer = r.choices[0].message.content or ""
    return value in answer, answer, r.usage.prompt_tokens


def corpus_format(model_dir: pathlib.Path) -> dict:
    """The task format of the model's corpus, as Generator's keyword arguments: gen_agent_corpus.py's
    --spaced-copies, --repo-names and --fixed-team-answers, from the manifest in its provenance.json
    (train_demo.py export's; the first corpus' format where there is none)."""
    try:
        manifest = json.loads((model_dir / "provenance.json").read_text())["corpus"]
    except (OSError, KeyError, ValueError):
        manifest = {}
    return {"spaced_copies": bool(manifest.get("spaced_copies")), "repo_names": bool(manifest.get("repo_names")),
            "fixed_team_answers": bool(manifest.get("fixed_team_answers"))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", help="a checkpoint (with tokenizer.json); default: the embedded default model")
    parser.add_argument("--tokenizer", default=str(ROOT / ".cache/deepseek-v4-tokenizer"),
                        help="for the embedded default model")
    parser.add_argument("--hippo", default=str(ROOT / "build/release/hippo"))
    parser.add_argument("--tasks", type=int, default=20, help="tasks per kind")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of {','.join(KINDS + TEAM_KINDS)}")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--recall", default="", help="distances in tokens (e.g. 1000,8000,32000): instead of the "
                        "tasks, recall of a fact stated that far back, --tasks trials each")
    parser.add_argument("--speculative", default="auto", choices=["off", "context", "dspark", "auto"])
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--spaced-copies", action="store_true",
                        help="tasks as gen_agent_corpus.py --spaced-copies writes them (default: as the model's "
                             "provenance.json says its corpus was written)")
    args = parser.parse_args(argv)
    task_format = corpus_format(pathlib.Path(args.model_dir or ROOT / "models" / "demo"))
    task_format["spaced_copies"] |= args.spaced_copies
    generator = gen_agent_corpus.Generator(args.seed, "heldout", **task_format)
    if args.recall:
        return main_recall(args, generator, [int(d) for d in args.recall.split(",")])
    kinds = args.kinds.split(",")
    tasks = [(kind, generator.single_task(kind)) for kind in kinds for _ in range(args.tasks)]
    results = {kind: [] for kind in kinds}
    tools_right = {kind: [] for kind in kinds}
    records = []
    with served_model(args, timeout=300) as (client, model, server):
        start = time.time()
        for n, (kind, task) in enumerate(tasks, 1):
            solved, why, transcript, right = play(client, model, task, args.max_tokens)
            results[kind].append(solved)
            tools_right[kind].append(right)
            records.append({"kind": kind, "solved": solved, "right_tools": right, "why": why, "task": task,
                            "model": transcript})
            if n % 10 == 0 or n == len(tasks):
                print(f"eval_demo: {n}/{len(tasks)} tasks, {time.time() - start:.0f} s", file=sys.stderr, flush=True)
        metrics = server.metrics()
    print(f"{'kind':<15} {'solved':>10} {'':>6}  {'right tools':>11}")
    for kind in kinds + ["all"]:
        ok = results[kind] if kind != "all" else [x for k in kinds for x in results[k]]
        right = tools_right[kind] if kind != "all" else [x for k in kinds for x in tools_right[k]]
        print(f"{kind:<15} {sum(ok):>4}/{len(ok):<5} {100 * sum(ok) / len(ok):5.1f}%  {100 * sum(right) / len(right):10.1f}%")
    print(speculation_summary(metrics, args.speculative))
    if args.json:
        args.json.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n")


def speculation_summary(metrics: str, mode: str) -> str:
    """The drafting counters of hippo serve's /metrics in a few lines."""
    values = {}
    for line in metrics.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    lines = [f"speculative decoding ({mode}):"]
    for drafter in ("dspark", "context"):
        drafted = values.get(f'hippo_drafted_tokens_by_drafter_total{{drafter="{drafter}"}}', 0)
        taken = values.get(f'hippo_accepted_draft_tokens_by_drafter_total{{drafter="{drafter}"}}', 0)
        if drafted:
            lines.append(f"  {drafter}: {taken:.0f} of {drafted:.0f} draft tokens taken ({100 * taken / drafted:.1f}%)")
    drafts = values.get("hippo_draft_accepted_tokens_count", 0)
    if drafts:
        taken = values["hippo_draft_accepted_tokens_sum"] / drafts
        lines.append(f"  {drafts:.0f} verified drafts took {taken:.2f} tokens each: {taken + 1:.2f} tokens per verify "
                     "with the model's own token")
    return "\n".join(lines)


def main_recall(args, generator, distances):
    records = []
    with served_model(args, timeout=3600) as (client, model, _):
        for distance in distances:
            start = time.time()
            solved = []
            for _ in range(args.tasks):
                ok, answer, prompt_tokens = recall(client, model, generator, distance, args.max_tokens)
                solved.append(ok)
                records.append({"distance": distance, "solved": ok, "answer": answer, "prompt_tokens": prompt_tokens})
            print(f"recall at {distance:>7} tokens: {sum(solved):>3}/{len(solved):<3} {100 * sum(solved) / len(solved):5.1f}%  "
                  f"(prompts of ~{prompt_tokens} tokens, {time.time() - start:.0f} s)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
