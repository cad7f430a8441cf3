#!/usr/bin/env python3
"""A tool-calling agent on `hippo serve`: real local tools, a calculator (arithmetic evaluated
safely from Python's syntax tree, never eval), a file search under a folder and a key-value memory
(remember / recall, kept by this process), declared in session.create. The loop: response.create;
when the response ends in tool calls (finish_reason "tool_calls"), run each tool and append its
result as a `tool_result` input item, then create the next response; until the model answers in
text or --max-rounds is reached.

    export HIPPO_API_KEY=$(build/release/hippo key create --tenant default --label examples)
    .venv/bin/python examples/tool_agent.py --url ws://127.0.0.1:8080/v1/agents \\
        --root docs "What is 17 * 23, and which docs mention snapshots?"

(from the repository root, with `build/release/hippo serve` running there: examples/README.md).

The default model of `hippo serve` is a small model trained here (models/demo/README.md): it calls
the right tools in one block, with arguments of the right form, and answers on their results, but it
does not yet copy the question's numbers and words into the calls. The tools run on their own too,
without a server:

    .venv/bin/python examples/tool_agent.py --call calculator '{"expression": "2**10 - 24"}'
"""
import argparse
import ast
import asyncio
import fnmatch
import json
import math
import operator
import pathlib
import sys

from hippo_agents import CLIENT_ERRORS, AgentsClient, add_connection_arguments, explain, format_usage

# The tools' declarations, shared with `hippo chat --tools examples/tools.json`.
TOOLS = json.loads((pathlib.Path(__file__).with_name("tools.json")).read_text())

INSTRUCTIONS = ("You are a careful assistant with tools. Use calculator for any arithmetic and search_files to "
                "look things up in the user's files; answer once you have what you need.")

# ---- the calculator: a whitelist over Python's expression syntax ----

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {"abs": abs, "round": round, "min": min, "max": max, "sqrt": math.sqrt}
MAX_EXPRESSION = 500
MAX_EXPONENT = 10_000
MAX_MAGNITUDE = 10 ** 1000


class CalculatorError(ValueError):
    pass


def calculate(expression: str):
    """The value of an arithmetic expression; CalculatorError for anything else."""
    if len(expression) > MAX_EXPRESSION:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise CalculatorError(f"not an arithmetic expression: {e.msg}") from None
    return _evaluate(tree.body)


def _evaluate(node):
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent {right} is too large")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("the result is too large") from None
        if isinstance(value, complex):
            raise CalculatorError("the result is not a real number")
        if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:
            raise CalculatorError("the result is too large")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
            and not node.keywords):
        args = [_evaluate(a) for a in node.args]
        try:
            return _FUNCTIONS[node.func.id](*args)
        except (TypeError, ValueError) as e:
            raise CalculatorError(f"{node.func.id}: {e}") from None
    raise CalculatorError(f"'{ast.unparse(node)}' is not allowed: only numbers, arithmetic and "
                          f"{', '.join(_FUNCTIONS)}")


# ---- the file search: grep under one folder, never outside it ----

MAX_FILE_BYTES = 1 << 20
MAX_FILES = 20


def search_files(root: pathlib.Path, text: str, glob: str = "*") -> str:
    """One line per file that contains the text, "path: N lines", sorted by path (short enough for a
    small model to read whole: the demo model copies these paths into its answer)."""
    if not text:
        return "error: give a non-empty text to search for"
    root = root.resolve()
    needle = text.lower()
    matches, more = [], 0
    for path in sorted(root.rglob("*")):
        try:
            if not path.is_file() or not path.resolve().is_relative_to(root):  # no symlinks out of the root
                continue
            rel = path.relative_to(root).as_posix()
            if not (fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(path.name, glob)):
                continue
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:  # binary
            continue
        lines = sum(needle in line.lower() for line in data.decode("utf-8", errors="replace").splitlines())
        if lines:
            if len(matches) < MAX_FILES:
                matches.append(f"{rel}: {lines} line{'s' if lines > 1 else ''}")
            else:
                more += 1
    if not matches:
        return f"no file under {root.name or root} contains {text!r}"
    return "\n".join(matches) + (f"\n... and {more} more files" if more else "")


class Toolbox:
    """Runs a tool call as the model wrote it; every failure is a result the model can read."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.memory = {}  # remember / recall: this process's only, gone when it ends

    def run(self, name: str, arguments: str) -> str:
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as e:
            return f"error: the arguments are not JSON: {e}"
        if not isinstance(args, dict):
            return "error: the arguments must be a JSON object"
        try:
            if name == "calculator":
                return str(calculate(str(args.get("expression", ""))))
            if name == "search_files":
                # (stripped: the demo model writes a copied word with the space it had in the question)
                return search_files(self.root, str(args.get("text", "")).strip(), str(args.get("glob") or "*"))
            if name == "remember":
                key = str(args.get("key", "")).strip().lower()
                if not key:
                    return "error: give a key to remember the value under"
                self.memory[key] = str(args.get("value", ""))
                return f"remembered {key!r}"
            if name == "recall":
                key = str(args.get("key", "")).strip().lower()
                return self.memory.get(key, f"nothing is remembered under {key!r}")
        except CalculatorError as e:
            return f"error: {e}"
        return f"error: there is no tool named {name!r} (tools: {', '.join(t['name'] for t in TOOLS)})"


# ---- the agent loop ----

async def agent_loop(client: AgentsClient, session_id: str, toolbox: Toolbox, max_rounds=4, max_output_tokens=128,
                     pending_calls=(), out=print):
    """Responses and tool rounds until a text answer or max_rounds responses. pending_calls: calls
    that already await results (a resumed session) and run first. Returns a summary dict."""
    calls = list(pending_calls)
    tool_runs = []
    for round_number in range(1, max_rounds + 1):
        if calls:
            results = []
            for call in calls:
                result = toolbox.run(call.name, call.arguments)
                tool_runs.append((call, result))
                out(f"[tool result] {call.call_id} {call.name}: {result}")
                results.append({"type": "tool_result", "call_id": call.call_id, "content": result})
            await client.append(session_id, results)
        response = await client.respond(session_id, max_output_tokens=max_output_tokens)
        out(f"[round {round_number}] finish {response.finish_reason}; {format_usage(response.usage)}")
        calls = response.calls
        if calls and response.text.strip():
            out(f"[model] {response.text.strip()}")
        for call in calls:
            out(f"[tool call] {call.call_id} {call.name} {call.arguments}")
        if not calls:
            out(f"[answer] {response.text.strip()}")
            return {"answer": response.text, "rounds": round_number, "tool_runs": tool_runs, "session_id": session_id}
    out(f"[stopped] {max_rounds} rounds without a final answer; {len(calls)} call(s) left unanswered")
    return {"answer": None, "rounds": max_rounds, "tool_runs": tool_runs, "session_id": session_id}


async def run_agent(url, api_key, task, toolbox, max_rounds=4, max_output_tokens=128, tool_choice="auto", out=print):
    async with AgentsClient.connect(url, api_key) as client:
        session_id = await client.create_session(instructions=INSTRUCTIONS, tools=TOOLS, tool_choice=tool_choice)
        out(f"[session] {session_id}")
        await client.say(session_id, task)
        return await agent_loop(client, session_id, toolbox, max_rounds, max_output_tokens, out=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_connection_arguments(parser)
    parser.add_argument("task", nargs="?", default="What is (17 * 23) + 4**3? Then search my files for 'snapshot'.")
    parser.add_argument("--root", type=pathlib.Path, default=pathlib.Path("."),
                        help="the folder search_files looks in (default: the current one)")
    parser.add_argument("--max-rounds", type=int, default=4)
    parser.add_argument("--max-output-tokens", type=int, default=128)
    parser.add_argument("--tool-choice", choices=["auto", "none", "required"], default="auto")
    parser.add_argument("--call", nargs=2, metavar=("TOOL", "ARGUMENTS_JSON"),
                        help="run one tool here and print its result; no server")
    args = parser.parse_args(argv)
    toolbox = Toolbox(args.root)
    if args.call:
        print(toolbox.run(*args.call))
        return 0
    try:
        asyncio.run(run_agent(args.url, args.api_key, args.task, toolbox, args.max_rounds, args.max_output_tokens,
                              args.tool_choice))
    except CLIENT_ERRORS as e:
        print(f"tool_agent: {explain(e, args.url, args.api_key)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
