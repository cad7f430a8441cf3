#!/usr/bin/env python3
"""A coordinator and its workers on `hippo serve`: the coordinator session splits a task into parts,
one worker session per part answers it, all workers at once (asyncio, spread over several
WebSocket connections; the server batches their decoding), and the coordinator combines their
answers in the same session, so its first turn is still in its context (usage shows it cached).

    export HIPPO_API_KEY=$(build/release/hippo key create --tenant default --label examples)
    .venv/bin/python examples/multi_agent.py --url ws://127.0.0.1:8080/v1/agents --workers 3 \\
        "Plan a three-day trip to Lisbon"

(from the repository root, with `build/release/hippo serve` running there: examples/README.md).

The default model (a small demo model trained here, models/demo/README.md) plans a task of the
kinds it trained on into usable parts, but its workers' answers are not sensible yet; the
orchestration is real all the same.
"""
import argparse
import asyncio
import contextlib
import re
import sys
import time

from hippo_agents import CLIENT_ERRORS, AgentsClient, add_connection_arguments, explain, format_usage

COORDINATOR = ("You coordinate a team. Split the user's task into exactly {n} independent parts, one per line, "
               "numbered 1. to {n}. Later you combine the team's answers into one.")
WORKER = "You are worker {i} of a team. Answer only your part of the task, briefly."


def parts_from_plan(plan: str, task: str, n: int):
    """The plan's first n numbered or non-empty lines; "part i of n" where it has too few."""
    lines = [re.sub(r"^\s*(\d+[.)]|[-*])\s*", "", line).strip() for line in plan.splitlines()]
    lines = [line for line in lines if len(line) >= 3][:n]
    return [lines[i] if i < len(lines) else f"Part {i + 1} of {n} of the task: {task}" for i in range(n)]


async def run_worker(client, connection, number, part, max_output_tokens, out):
    start = time.monotonic()
    sid = await client.create_session(instructions=WORKER.format(i=number))
    await client.say(sid, part)
    response = await client.respond(sid, max_output_tokens=max_output_tokens)
    seconds = time.monotonic() - start
    out(f"[worker {number}] session {sid} on connection {connection}: {response.usage['output_tokens']} tokens "
        f"in {seconds:.2f} s, finish {response.finish_reason}")
    return {"worker": number, "session_id": sid, "part": part, "answer": response.text, "seconds": seconds,
            "connection": connection, "usage": response.usage}


async def run_team(url, api_key, task, workers=3, connections=2, max_output_tokens=48, out=print):
    connections = max(1, min(connections, workers))
    async with AgentsClient.connect(url, api_key) as coordinator:
        sid = await coordinator.create_session(instructions=COORDINATOR.format(n=workers))
        out(f"[coordinator] session {sid}")
        await coordinator.say(sid, task)
        plan = await coordinator.respond(sid, max_output_tokens=max_output_tokens)
        out(f"[plan] {plan.text.strip()!r}; {format_usage(plan.usage)}")
        parts = parts_from_plan(plan.text, task, workers)
        for i, part in enumerate(parts, 1):
            out(f"[part {i}] {part}")

        # The workers: their own sessions, spread over `connections` connections (the coordinator's
        # and more), all responses in flight at once.
        start = time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            clients = [coordinator]
            for _ in range(connections - 1):
                clients.append(await stack.enter_async_context(AgentsClient.connect(url, api_key)))
            results = await asyncio.gather(*(
                run_worker(clients[i % connections], i % connections + 1, i + 1, part, max_output_tokens, out)
                for i, part in enumerate(parts)))
        wall = time.monotonic() - start
        out(f"[team] {workers} workers on {connections} connection(s): {wall:.2f} s together, "
            f"{sum(r['seconds'] for r in results):.2f} s summed over the workers")
        for r in results:
            out(f"[answer {r['worker']}] {r['answer'].strip()!r}")

        # The coordinator combines, in its own session: the plan is still in its context.
        # (the demo model's corpus writes each answer on a line of its own, as copies keep their ids)
        report = "\n".join(f"Answer {r['worker']} (to: {r['part']}):\n{r['answer'].strip()}" for r in results)
        await coordinator.say(sid, f"Your team answered:\n{report}\nCombine these into one answer to the task.")
        combined = await coordinator.respond(sid, max_output_tokens=max_output_tokens)
        out(f"[combined] {combined.text.strip()!r}; {format_usage(combined.usage)}")
        return {"coordinator": sid, "plan": plan, "parts": parts, "workers": results, "combined": combined,
                "wall_seconds": wall}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_connection_arguments(parser)
    parser.add_argument("task", nargs="?", default="Plan a weekend in Lyon")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--connections", type=int, default=2, help="WebSocket connections the workers share")
    parser.add_argument("--max-output-tokens", type=int, default=48)
    args = parser.parse_args(argv)
    if args.workers < 1 or args.connections < 1:
        parser.error("--workers and --connections must be at least 1")
    try:
        asyncio.run(run_team(args.url, args.api_key, args.task, args.workers, args.connections, args.max_output_tokens))
    except CLIENT_ERRORS as e:
        print(f"multi_agent: {explain(e, args.url, args.api_key)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
