"""The embedded default model (the trained demo checkpoint in models/demo) doing its job through a real
`hippo serve`: the README's tool-agent task over WebSocket with examples/tool_agent.py, a tool call
and its answer over /v1/chat/completions with the official `openai` client and in `hippo chat`,
held-out tasks solved (scripts/eval_demo.py), and the committed files being the ones provenance.json
records."""
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys

import openai
import pytest

from serve_helpers import HIPPO, Server, clean_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO = ROOT / "models" / "demo"
sys.path.insert(0, str(ROOT / "examples"))
import tool_agent  # noqa: E402

CALCULATOR = [{"type": "function", "function": t} for t in tool_agent.TOOLS if t["name"] == "calculator"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("demo")
    with Server(work, "--db", str(work / "hippo.db"), env={"HIPPO_TOKENIZER": os.environ["HIPPO_TOKENIZER_DIR"]}) as s:
        yield s
        assert s.stop() == 0, s.log()


def test_the_committed_checkpoint_is_the_one_its_provenance_records():
    provenance = json.loads((DEMO / "provenance.json").read_text())
    on_disk = sorted(p.name for p in DEMO.iterdir() if p.name not in ("provenance.json", "README.md"))
    assert on_disk == sorted(provenance["files"])
    for name, entry in provenance["files"].items():
        data = (DEMO / name).read_bytes()
        assert len(data) == entry["bytes"], name
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
    total = sum(e["bytes"] for e in provenance["files"].values())
    assert total <= 40e6, total  # the aim; 25.4 MB with the head stored once, in the embedding


def test_model_inspect_shows_the_demo_model():
    r = subprocess.run([HIPPO, "model", "inspect", str(DEMO)], capture_output=True, text=True, env=clean_env(),
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "hidden 64" in r.stdout and "8 heads x 64" in r.stdout and "top 64" in r.stdout
    assert "vocab 129280 (head tied to the embedding)" in r.stdout


def test_the_tool_agent_runs_the_readme_task_with_real_tool_calls(server):
    """examples/tool_agent.py over WebSocket on the repository's own docs: the model calls the
    calculator with the question's expression and the file search with its word, in one block, the
    agent runs both and the model answers with the result and the docs' own file names (all six
    when it was shipped, one of them twice), and stops."""
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "tool_agent.py"), "--url", server.ws,
                        "--api-key", server.api_key, "--root", str(ROOT / "docs"),
                        "What is 17 * 23, and which docs mention snapshots?"],
                       capture_output=True, text=True, env=clean_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"^\[round 1\] finish tool_calls", out, re.M), out
    calls = re.findall(r"^\[tool call\] (call_\d+) (\w+) (.*)$", out, re.M)
    assert [(call_id, name, json.loads(arguments)) for call_id, name, arguments in calls] == [
        ("call_0", "calculator", {"expression": "17 * 23"}), ("call_1", "search_files", {"text": " snapshots"})], out
    assert re.search(r"^\[tool result\] call_0 calculator: 391$", out, re.M), out
    assert re.search(r"^\[tool result\] call_1 search_files: \S+\.md: \d+ lines?$", out, re.M), out
    assert re.search(r"^\[round 2\] finish stop", out, re.M), out
    answer = re.findall(r"^\[answer\] (.+)$", out, re.M)
    assert len(answer) == 1 and answer[0].startswith("17 * 23 = 391.") and "DSML" not in out.split("[answer]")[1], out
    found = re.findall(r"^(\S+\.md): \d+ lines?$", out.split("[tool result] call_1 search_files: ")[1], re.M)
    listed = [line for line in out.split("[answer]")[1].splitlines()[1:] if line.strip()]
    assert set(listed) <= set(found) and len(set(listed)) >= len(found) - 1, (found, listed)


def test_a_tool_call_and_its_answer_over_the_openai_api(server):
    client = openai.OpenAI(base_url=server.http + "/v1", api_key=server.api_key, max_retries=0, timeout=120)
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is 17 * 23?"}]
    first = client.chat.completions.create(model="default", messages=messages, tools=CALCULATOR, temperature=0)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    call = choice.message.tool_calls[0]
    assert call.function.name == "calculator"
    assert json.loads(call.function.arguments) == {"expression": "17 * 23"}
    result = tool_agent.Toolbox(ROOT).run("calculator", call.function.arguments)
    assert result == "391"
    messages.append({"role": "assistant", "content": choice.message.content, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": "calculator", "arguments": call.function.arguments}}]})
    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    second = client.chat.completions.create(model="default", messages=messages, tools=CALCULATOR, temperature=0)
    assert second.choices[0].finish_reason == "stop"
    assert "391" in second.choices[0].message.content, second.choices[0].message.content

    chat = client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Who are you?"}],
                                          temperature=0)
    assert chat.choices[0].finish_reason == "stop"
    assert "hippo" in chat.choices[0].message.content, chat.choices[0].message.content


def test_hippo_chat_shows_the_models_tool_call(server):
    """`hippo chat --tools examples/tools.json`, as the README shows it: the model's call is printed,
    the next line typed is its result, and the model answers with it."""
    r = subprocess.run([HIPPO, "chat", "--url", server.ws, "--api-key", server.api_key,
                        "--tools", str(ROOT / "examples" / "tools.json")],
                       input="What is 17 * 23?\n391\n", capture_output=True, text=True, env=clean_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert '[tool call] call_0 calculator {"expression": "17 * 23"}' in lines, r.stdout
    call = lines.index('[tool call] call_0 calculator {"expression": "17 * 23"}')
    assert any("391" in line and not line.startswith("[") for line in lines[call + 1:]), r.stdout


def test_held_out_tasks():
    """scripts/eval_demo.py on tasks no training session saw (three of each kind here; the full
    measurement is in docs/BENCHMARKS.md): the model picks the expected tools (or answers in text
    where text is expected) and solves most tasks exactly (17 of these 21 when it was shipped).
    Greedy decoding: the same tasks give the same result."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval_demo.py"), "--hippo", HIPPO,
                        "--tokenizer", os.environ["HIPPO_TOKENIZER_DIR"], "--tasks", "3"],
                       capture_output=True, text=True, env=clean_env(), timeout=600)
    assert r.returncode == 0, r.stderr
    total = re.search(r"^all\s+(\d+)/(\d+)\s+[\d.]+%\s+([\d.]+)%", r.stdout, re.M)
    assert total, r.stdout
    assert int(total[1]) >= 17 and float(total[3]) >= 90, r.stdout


def test_held_out_team_tasks():
    """examples/multi_agent.py's sessions, graded by scripts/eval_demo.py (three of each: a plan, a
    worker's answer, a combined answer). The shipped model solved 5 of these 9 (3 of 3 combined; its
    workers' answers are not sensible yet: models/demo/README.md)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval_demo.py"), "--hippo", HIPPO,
                        "--tokenizer", os.environ["HIPPO_TOKENIZER_DIR"], "--tasks", "3",
                        "--kinds", "plan,part,combine"],
                       capture_output=True, text=True, env=clean_env(), timeout=600)
    assert r.returncode == 0, r.stderr
    solved = {kind: int(n) for kind, n in re.findall(r"^(\w+)\s+(\d+)/3\s", r.stdout, re.M)}
    assert set(solved) == {"plan", "part", "combine"}, r.stdout
    assert solved["combine"] == 3 and sum(solved.values()) >= 5, r.stdout
