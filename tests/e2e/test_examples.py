"""The runnable clients in examples/ against a real `hippo serve`.

test_documented_command runs every command of examples/README.md (and every command of README.md's
"Using it" section that invokes examples/) verbatim, through bash, in the order the page gives them,
the way a user does after README.md's run command: from a folder laid out like the repository root
of a fresh clone (copies of examples/ and docs/, .venv and build/release/hippo linking to the
project's venv and to HIPPO_BIN), with a server started there by the run command's own `hippo serve`
(it writes models/default and hippo.db there and makes the first key), and with the environment the
page tells a user to set (its `export` lines, evaluated by bash) and no other HIPPO_* variable. The
one change: the server listens on a free port, not 8080, and `127.0.0.1:8080` in a command is
rewritten to that port. A command that fails (a missing file, a missing key, a drifted option) fails
its test; each one's output is checked for its structural lines.

The other tests run the examples against a tiny checkpoint of their own. Its weights are random, so
the model's words are gibberish and it does not call tools by itself; the tool-call path is
exercised for real on a session that awaits calls (written by HIPPO_MAKE_TOOL_SESSION, a fixture
built from tests/agents/make_tool_session.cpp through the real store and chat encoder)."""
import asyncio
import json
import os
import pathlib
import re
import shlex
import shutil
import socket
import subprocess
import sys

import pytest

from serve_helpers import HIPPO, Server, clean_env, make_checkpoint

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
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


def example(name, *args, env=None):
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, encoding="utf-8",
                          errors="replace", env=clean_env(env), timeout=TIMEOUT)


def usage_of(line):
    m = re.search(r"input_tokens (\d+) \(cached (\d+)\), output_tokens (\d+)", line)
    assert m, line
    return {"input": int(m[1]), "cached": int(m[2]), "output": int(m[3])}


@pytest.fixture
def files(tmp_path):
    root = tmp_path / "files"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "a.txt").write_text("rivers\nThe Hippo sleeps by day.\n")
    (root / "notes" / "b.md").write_text("a hippo in markdown\nand a second Hippo line\n")
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
    # Case-insensitive, a file and its count of matching lines; not in binary files nor through a
    # link out of the root.
    assert found == ["notes/a.txt: 1 line", "notes/b.md: 2 lines"]
    assert toolbox.run("search_files", '{"text": "hippo", "glob": "*.md"}') == "notes/b.md: 2 lines"
    assert toolbox.run("search_files", '{"text": "giraffe"}') == "no file under files contains 'giraffe'"
    # The demo model writes a copied word with the space it had in the question: the search strips it.
    assert toolbox.run("search_files", '{"text": " hippo", "glob": "*.md"}') == "notes/b.md: 2 lines"
    assert toolbox.run("recall", '{"key": "Locker code"}') == "nothing is remembered under 'locker code'"
    assert toolbox.run("remember", '{"key": "Locker code", "value": "4417"}') == "remembered 'locker code'"
    assert toolbox.run("recall", '{"key": "locker code "}') == "4417"
    # A value comes back as it was stored, a leading space included (the demo model's answers copy it so).
    assert toolbox.run("remember", '{"key": " dog\'s name", "value": " Karl"}') == 'remembered "dog\'s name"'
    assert toolbox.run("recall", '{"key": " dog\'s name"}') == " Karl"

    r = example("tool_agent.py", "--root", str(files), "--call", "search_files", '{"text": "sleeps"}')
    assert r.returncode == 0 and r.stdout == "notes/a.txt: 1 line\n", r.stderr
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
        ("call_0", "391"), ("call_1", "notes/a.txt: 1 line")]
    assert lines[:2] == ["[tool result] call_0 calculator: 391",
                         "[tool result] call_1 search_files: notes/a.txt: 1 line"]
    assert lines[2].startswith("[round 1] finish "), lines
    u = usage_of(lines[2])
    assert u["output"] >= 1 and u["input"] > view["n_tokens"] + view["pending_tokens"]  # the results are in the context
    assert after["status"] == "ready" and after["awaiting_call_ids"] == [] and after["n_tokens"] >= u["input"]


def test_multi_agent_runs_a_coordinator_and_concurrent_workers(server):
    r = example("multi_agent.py", "--url", server.ws, *key_args(server), "--workers", "3", "--connections", "2",
                "--max-output-tokens", "24", "Plan a weekend in Lyon")
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
    # An exported key is for the user's own server: the walkthrough makes its own in its database.
    r = example("snapshot_resume.py", "--hippo", HIPPO, "--model", str(checkpoint), "--db", str(db),
                env={"HIPPO_API_KEY": "hk_a_key_of_another_database"})
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "[key] created an API key" in out, out
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
        # How to start one, as README.md and examples/README.md say.
        assert "connection refused" in r.stderr and hippo_agents.START_COMMAND in r.stderr, r.stderr


def test_examples_say_what_to_do_without_a_key(server):
    """No key: the server answers the upgrade with 401, and the examples say which key to export and
    how to make one (the command examples/README.md gives); a key the server does not know: that."""
    documented = [command for _, command in doc_commands(EXAMPLES / "README.md")]
    assert hippo_agents.KEY_COMMAND in documented and hippo_agents.START_COMMAND in documented
    for name in ("tool_agent.py", "multi_agent.py"):
        r = example(name, "--url", server.ws, "--max-output-tokens", "2")
        assert r.returncode == 1, (name, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and server.ws in r.stderr, r.stderr
        assert "HTTP 401" in r.stderr and hippo_agents.KEY_COMMAND in r.stderr and "--api-key" in r.stderr, r.stderr
        r = example(name, "--url", server.ws, "--max-output-tokens", "2", env={"HIPPO_API_KEY": "hk_not_a_key"})
        assert r.returncode == 1, (name, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "refused the API key (HTTP 401" in r.stderr, r.stderr
        assert hippo_agents.KEY_COMMAND in r.stderr, r.stderr


# ---- the documented commands, verbatim ----

FENCE = re.compile(r"^\s*```\s*(\w*)")
INLINE_COMMAND = re.compile(r"`((?:\.venv/bin/python|build/release/hippo|export) [^`]+)`")
TEST_PORT_PLACEHOLDER = "127.0.0.1:8080"


def doc_commands(path, section=None, only=None):
    """(line number, command) of a markdown file: each line of its ```sh blocks (a trailing backslash
    joins the next line; comment lines skipped) and each inline code span that starts with
    `.venv/bin/python `, `build/release/hippo ` or `export `. section: only under that `## ` heading;
    only: only commands that contain that text."""
    commands = []
    fence = None
    in_section = section is None
    pending = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = FENCE.match(line)
        if m:
            fence = None if fence is not None else m[1]
            continue
        if fence is None:
            if section is not None and line.startswith("## "):
                in_section = line[3:].strip() == section
            if in_section:
                commands += [(number, c) for c in INLINE_COMMAND.findall(line)]
            continue
        if not in_section or fence not in ("sh", "bash", "shell"):
            continue
        if pending:
            start, text = pending
            text += "\n" + line
        else:
            start, text = number, line
        if text.rstrip().endswith("\\"):
            pending = (start, text)
            continue
        pending = None
        if text.strip() and not text.strip().startswith("#"):
            commands.append((start, text.strip()))
    seen = set()
    return [(n, c) for n, c in commands if (only is None or only in c) and not (c in seen or seen.add(c))]


def words(command):
    return shlex.split(command, comments=True)


def is_server_command(command):
    return words(command)[:2] == ["build/release/hippo", "serve"]


def without_port(args):
    """hippo serve's arguments without --port N (the test's server takes a free port)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--port":
            skip = True
        elif not a.startswith("--port="):
            out.append(a)
    return out


def readme_serve_args():
    """The arguments of the `hippo serve` that ends README.md's run command."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"<!-- run-command -->\s*```sh\n(.*?)\n```", text, re.S)
    assert m, "README.md has no <!-- run-command --> block"
    last = m[1].split("&&")[-1].strip()
    assert is_server_command(last), f"README.md's run command does not end by starting the server: {m[1]}"
    return without_port(words(last)[2:])


DOCUMENTED = ([("examples/README.md", n, c) for n, c in doc_commands(EXAMPLES / "README.md")] +
              [("README.md", n, c) for n, c in doc_commands(REPO / "README.md", section="Using it", only="examples/")])
RUNNABLE = [d for d in DOCUMENTED if not is_server_command(d[2]) and not d[2].startswith("export ")]


def test_the_docs_give_a_command_for_each_example_and_start_the_readme_server():
    assert RUNNABLE, "no commands found in examples/README.md"
    scripts = {p.name for p in EXAMPLES.glob("*.py")} - {"hippo_agents.py"}
    named = {pathlib.Path(w).name for _, _, c in RUNNABLE for w in words(c) if w.startswith("examples/")}
    assert scripts <= named, f"examples without a documented command: {sorted(scripts - named)}"
    # A server the pages start is the one README.md's run command starts.
    for doc, number, command in DOCUMENTED:
        if is_server_command(command):
            assert without_port(words(command)[2:]) == readme_serve_args(), \
                f"{doc}:{number}: {command!r} is not README.md's `hippo serve`"


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory):
    """A folder laid out like the repository root of a fresh clone after README.md's run command,
    with its server running there (as the run command leaves it), and the environment of the
    `export` lines of examples/README.md (evaluated by bash there, in order)."""
    root = tmp_path_factory.mktemp("clone")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(EXAMPLES, root / "examples", ignore=ignore)
    shutil.copytree(REPO / "docs", root / "docs", ignore=ignore)
    shutil.copy(REPO / "README.md", root / "README.md")
    (root / ".venv").symlink_to(REPO / ".venv")
    (root / "build" / "release").mkdir(parents=True)
    (root / "build" / "release" / "hippo").symlink_to(pathlib.Path(HIPPO).resolve())
    with Server(root, *readme_serve_args(), make_key=False) as server:
        env = {}
        for number, command in doc_commands(EXAMPLES / "README.md"):
            m = re.match(r"export ([A-Za-z_]\w*)=", command)
            if not m:
                continue
            r = subprocess.run(["bash", "-c", f'{command}\nprintf %s "${m[1]}"'], cwd=root, env=clean_env(env),
                               capture_output=True, text=True, timeout=TIMEOUT)
            assert r.returncode == 0 and r.stdout.strip(), f"examples/README.md:{number}: {command}: {r.stderr}"
            env[m[1]] = r.stdout
        yield root, server, env
        assert server.proc.poll() is None, server.log()
        assert server.stop() == 0, server.log()
    log = server.stderr_path.read_text()
    assert re.search(r'tenant "?default"?', log), f"the first start made no key for tenant default: {log}"
    assert (root / "models" / "default" / "config.json").exists() and (root / "hippo.db").exists()


def check_example_output(argv, out):
    """The structural lines of an example's output (the model's words are gibberish)."""
    name = pathlib.Path(argv[1]).name if len(argv) > 1 else ""
    option = lambda flag, default: argv[argv.index(flag) + 1] if flag in argv else default  # noqa: E731
    if name == "tool_agent.py" and "--call" in argv:
        tool = option("--call", "")
        assert out.strip() and not out.startswith("error"), out
        if tool == "search_files":
            assert all(re.match(r"\S+: \d+ lines?$|\.\.\. and \d+ more files$", line) for line in out.splitlines()), out
        elif tool == "calculator":
            float(out)
    elif name == "tool_agent.py":
        lines = out.splitlines()
        assert re.fullmatch(r"\[session\] s_\w+", lines[0]), out
        assert any(line.startswith("[round 1] finish ") for line in lines), out
        assert len(re.findall(r"^\[(answer|stopped)\]", out, re.M)) == 1, out
    elif name == "multi_agent.py":
        workers = int(option("--workers", 3))
        assert re.search(r"^\[coordinator\] session s_\w+$", out, re.M), out
        assert len(re.findall(r"^\[worker \d+\] session s_\w+ on connection \d+: \d+ tokens", out, re.M)) == workers
        assert re.search(r"^\[plan\] ", out, re.M) and re.search(r"^\[combined\] ", out, re.M), out
    elif name == "snapshot_resume.py":
        assert "FAILED" not in out and len(re.findall(r"^\[ok\] ", out, re.M)) == 4, out
        assert "[server] stopped by SIGTERM: exit code 0" in out, out


@pytest.mark.parametrize("doc,number,command", RUNNABLE, ids=[f"{d}:{n}" for d, n, _ in RUNNABLE])
def test_documented_command(fresh_clone, doc, number, command):
    root, server, env = fresh_clone
    run = command.replace(TEST_PORT_PLACEHOLDER, f"127.0.0.1:{server.port}")
    r = subprocess.run(["bash", "-c", run], cwd=root, env=clean_env(env), capture_output=True, encoding="utf-8",
                       errors="replace", timeout=2 * TIMEOUT)
    assert r.returncode == 0, f"{doc}:{number}: {command}\nexit {r.returncode}\n{r.stdout}\n{r.stderr}"
    check_example_output(words(run), r.stdout)
