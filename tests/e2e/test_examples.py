"""The runnable clients in examples/ against a real `hippo serve` on a tiny checkpoint: each one run
the way examples/README.md says, and its output checked. The checkpoint's weights are random, so
the model's words are gibberish and it does not call tools by itself; the tool-call path is
exercised for real on a session that awaits calls (written by HIPPO_MAKE_TOOL_SESSION, a fixture
built from tests/agents/make_tool_session.cpp through the real store and chat encoder)."""
import asyncio
import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

from serve_helpers import HIPPO, Server, clean_env, make_checkpoint

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import hippo_agents  # noqa: E402
import tool_agent  # noqa: E402

TIMEOUT = 180
MAKE_TOOL_SESSION = os.environ["HIPPO_MAKE_TOOL_SESSION"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("examples-model"))


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    work = tmp_path_factory.mktemp("examples")
    with Server(work, "--model", str(checkpoint), "--db", str(work / "hippo.db")) as s:
        yield s
        assert s.stop() == 0, s.log()


def key_args(server):
    key = getattr(server, "api_key", None)
    return ["--api-key", key] if key else []


def example(name, *args):
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, encoding="utf-8",
                          errors="replace", env=clean_env(), timeout=TIMEOUT)


def usage_of(line):
    m = re.search(r"input_tokens (\d+) \(cached (\d+)\), output_tokens (\d+)", line)
    assert m, line
    return {"input": int(m[1]), "cached": int(m[2]), "output": int(m[3])}


@pytest.fixture
def files(tmp_path):
    root = tmp_path / "files"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "a.txt").write_text("rivers\nThe Hippo sleeps by day.\n")
    (root / "notes" / "b.md").write_text("a hippo in markdown\n")
    (root / "blob.bin").write_bytes(b"hippo\0\1\2")
    (tmp_path / "outside.txt").write_text("a hippo outside the root\n")
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    return root


def test_the_tools_work_on_their_own(files):
    calc = tool_agent.calculate
    assert calc("2 + 3 * 4") == 14 and calc("2**10 - 24") == 1000 and calc("7 / 2") == 3.5
    assert calc("-(3 - 5) % 3") == 2 and calc("sqrt(16) + abs(-2) + max(1, 4, 2) + round(2.6)") == 13.0
    for bad, why in [("__import__('os').system('true')", "not allowed"), ("open('x')", "not allowed"),
                     ("1 / 0", "division by zero"), ("2 ** 100000", "too large"), ("x + 1", "not allowed"),
                     ("1 +", "not an arithmetic expression"), ("1" * 600, "longer than"), ("True + 1", "not allowed"),
                     ("sqrt(-1)", "sqrt")]:
        with pytest.raises(tool_agent.CalculatorError, match=why):
            calc(bad)

    toolbox = tool_agent.Toolbox(files)
    assert toolbox.run("calculator", '{"expression": "17 * 23"}') == "391"
    assert toolbox.run("calculator", '{"expression": "1/0"}') == "error: division by zero"
    assert toolbox.run("calculator", "not json").startswith("error: the arguments are not JSON")
    assert toolbox.run("teleport", "{}").startswith("error: there is no tool named 'teleport'")
    found = toolbox.run("search_files", '{"text": "HIPPO"}').splitlines()
    # Case-insensitive, path:line: text; not in binary files nor through a link out of the root.
    assert found == ["notes/a.txt:2: The Hippo sleeps by day.", "notes/b.md:1: a hippo in markdown"]
    assert toolbox.run("search_files", '{"text": "hippo", "glob": "*.md"}') == "notes/b.md:1: a hippo in markdown"
    assert toolbox.run("search_files", '{"text": "giraffe"}').startswith("no line under")

    r = example("tool_agent.py", "--root", str(files), "--call", "search_files", '{"text": "sleeps"}')
    assert r.returncode == 0 and r.stdout == "notes/a.txt:2: The Hippo sleeps by day.\n", r.stderr
    r = example("tool_agent.py", "--call", "calculator", '{"expression": "2**10 - 24"}')
    assert r.returncode == 0 and r.stdout == "1000\n"


def test_tool_agent_runs_against_the_server(server, files):
    r = example("tool_agent.py", "--url", server.ws, *key_args(server), "--root", str(files), "--max-rounds", "2",
                "--max-output-tokens", "16", "What is 17 * 23? Which of my notes mention hippos?")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"\[session\] s_\w+", lines[0]), r.stdout
    rounds = [line for line in lines if line.startswith("[round ")]
    assert rounds and rounds[0].startswith("[round 1] finish ")
    assert usage_of(rounds[0])["input"] > 0
    # However the random model answered, every call it made was run and answered, and the agent ended.
    calls = [line.split()[2] for line in lines if line.startswith("[tool call] ")]
    results = [line.split()[2] for line in lines if line.startswith("[tool result] ")]
    assert results == calls[:len(results)]
    end = re.findall(r"^\[(answer|stopped)\]", r.stdout, re.M)
    assert len(end) == 1, r.stdout
    if end == ["answer"]:
        assert results == calls


def test_tool_agent_runs_the_calls_of_a_session_that_awaits_them(checkpoint, tmp_path, files):
    """A session whose model asked for a calculation and a file search: the agent loop runs both
    tools for real, the server takes their results (only results for calls it awaits are accepted)
    and the next response runs on them."""
    db = tmp_path / "tools.db"
    r = subprocess.run([MAKE_TOOL_SESSION, str(checkpoint), str(db), "s_tools", json.dumps(tool_agent.TOOLS),
                        "What is 17 * 23? Which of my notes mention hippos?",
                        "calculator", '{"expression": "17 * 23"}', "search_files", '{"text": "hippo", "glob": "*.txt"}'],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr

    async def main(s):
        async with hippo_agents.AgentsClient.connect(s.ws, getattr(s, "api_key", None)) as client:
            view = await client.resume("s_tools")
            assert view["status"] == "awaiting_tool" and view["awaiting_call_ids"] == ["call_0", "call_1"], view
            # Before the results are in, the session takes no response.
            with pytest.raises(hippo_agents.ProtocolError) as refused:
                await client.respond("s_tools", max_output_tokens=2)
            assert refused.value.code == "failed_precondition"
            pending = [hippo_agents.ToolCall("call_0", "calculator", '{"expression": "17 * 23"}'),
                       hippo_agents.ToolCall("call_1", "search_files", '{"text": "hippo", "glob": "*.txt"}')]
            lines = []
            summary = await tool_agent.agent_loop(client, "s_tools", tool_agent.Toolbox(files), max_rounds=1,
                                                  max_output_tokens=6, pending_calls=pending, out=lines.append)
            after = await client.snapshot("s_tools")
            return view, summary, lines, after

    # The fixture's session has no tenant; the server gives such sessions to tenant default.
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), tenant="default") as s:
        view, summary, lines, after = asyncio.run(main(s))
        assert s.stop() == 0, s.log()
    assert [(call.call_id, result) for call, result in summary["tool_runs"]] == [
        ("call_0", "391"), ("call_1", "notes/a.txt:2: The Hippo sleeps by day.")]
    assert lines[:2] == ["[tool result] call_0 calculator: 391",
                         "[tool result] call_1 search_files: notes/a.txt:2: The Hippo sleeps by day."]
    assert lines[2].startswith("[round 1] finish "), lines
    u = usage_of(lines[2])
    assert u["output"] >= 1 and u["input"] > view["n_tokens"] + view["pending_tokens"]  # the results are in the context
    assert after["status"] == "ready" and after["awaiting_call_ids"] == [] and after["n_tokens"] >= u["input"]


def test_multi_agent_runs_a_coordinator_and_concurrent_workers(server):
    r = example("multi_agent.py", "--url", server.ws, *key_args(server), "--workers", "3", "--connections", "2",
                "--max-output-tokens", "24", "Plan a picnic by the river")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    coordinator = re.search(r"^\[coordinator\] session (s_\w+)$", out, re.M)[1]
    workers = re.findall(r"^\[worker (\d)\] session (s_\w+) on connection (\d): (\d+) tokens", out, re.M)
    assert sorted(w[0] for w in workers) == ["1", "2", "3"]
    assert len({w[1] for w in workers} | {coordinator}) == 4  # a session each
    assert {w[2] for w in workers} == {"1", "2"}  # on both connections
    assert all(int(w[3]) >= 1 for w in workers)
    assert len(re.findall(r"^\[part \d\] \S", out, re.M)) == 3
    plan = usage_of(re.search(r"^\[plan\] .*$", out, re.M)[0])
    combined = usage_of(re.search(r"^\[combined\] .*$", out, re.M)[0])
    # The coordinator combined in the same session: its plan turn was still in its context.
    assert combined["cached"] >= plan["input"] and combined["input"] > plan["input"] + plan["output"]


def test_snapshot_resume_survives_a_restart(checkpoint, tmp_path):
    db = tmp_path / "walkthrough.db"
    r = example("snapshot_resume.py", "--hippo", HIPPO, "--model", str(checkpoint), "--db", str(db))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "FAILED" not in out and len(re.findall(r"^\[ok\] ", out, re.M)) == 4, out
    snapshot = int(re.search(r"^\[snapshot\] status \w+, n_tokens (\d+)", out, re.M)[1])
    resumed = re.search(r"^\[resumed\] status (\w+), n_tokens (\d+)", out, re.M)
    assert resumed[1] == "swapped" and int(resumed[2]) == snapshot > 0
    turn2 = usage_of(re.search(r"^\[turn 2\] .*$", out, re.M)[0])
    assert turn2["cached"] >= snapshot  # restored, not prefilled again
    assert "[server] stopped by SIGTERM: exit code 0" in out
    assert db.exists()


def test_examples_say_clearly_when_there_is_no_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"ws://127.0.0.1:{port}/v1/agents"
    for name in ("tool_agent.py", "multi_agent.py"):
        r = example(name, "--url", url)
        assert r.returncode == 1, (name, r.stderr)
        assert url in r.stderr and "Traceback" not in r.stderr, r.stderr
