"""End-to-end tests of `hippo chat` against a real `hippo serve` on a tiny checkpoint, driven through
pipes as a script would: stdin lines in, the streamed answers and the bracketed lines about the chat
(`[session] ...`, `[usage] ...`, `[snapshot] ...`) on stdout, errors of the server on stderr."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from serve_helpers import HIPPO, Server, clean_env, make_checkpoint

TIMEOUT = 120
USAGE = re.compile(r"^\[usage\] input_tokens (\d+) \(cached (\d+)\), output_tokens (\d+), finish (\w+); "
                   r"first token [\d.]+ ms, prefill [\d.]+ ms, decode [\d.]+ ms", re.M)
VIEW = re.compile(r"^\[(session|snapshot)\] (s_\w+) (resumed|snapshotted): status (\w+), n_tokens (\d+), "
                  r"pending_tokens (\d+)", re.M)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("chat-model"))


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    work = tmp_path_factory.mktemp("chat")
    with Server(work, "--model", str(checkpoint), "--db", str(work / "hippo.db")) as s:
        yield s
        assert s.stop() == 0, s.log()


def chat_command(server, *args):
    cmd = [HIPPO, "chat", "--url", server.ws, *args]
    key = getattr(server, "api_key", None)
    if key:
        cmd += ["--api-key", key]
    return cmd


def chat(server, *args, input=""):
    return subprocess.run(chat_command(server, *args), input=input, capture_output=True, encoding="utf-8",
                          errors="replace", env=clean_env(), timeout=TIMEOUT)


def usages(out):
    return [{"input": int(m[1]), "cached": int(m[2]), "output": int(m[3]), "finish": m[4]} for m in USAGE.finditer(out)]


def views(out, kind):
    return [{"session": m[2], "status": m[4], "n_tokens": int(m[5])} for m in VIEW.finditer(out) if m[1] == kind]


def created_session(out):
    m = re.search(r"^\[session\] (s_\w+) created$", out, re.M)
    assert m, out
    return m[1]


def test_a_conversation_snapshot_and_resume_in_a_new_chat(server):
    r = chat(server, "--instructions", "You are a terse hippo.", "--max-output-tokens", "6",
             input="Tell me about rivers.\nAnd lakes?\n/snapshot\n/sessions\n")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    sid = created_session(r.stdout)
    first, second = usages(r.stdout)
    assert first["output"] == 6 and first["finish"] == "length" and first["cached"] == 0 and first["input"] > 0
    # The second turn builds on the first: everything before it is in the session's state.
    assert second["output"] == 6 and second["cached"] >= first["input"] and second["input"] > first["input"]
    # The answers stream between the lines about the chat.
    answer = r.stdout.split(f"[session] {sid} created\n", 1)[1].split("[usage]", 1)[0]
    assert answer.strip(), r.stdout
    (snap,) = views(r.stdout, "snapshot")
    assert snap["session"] == sid and snap["n_tokens"] > 0
    # /sessions lists through GET /v1/sessions where the server has it, and says so where not.
    listing = r.stdout.split("[sessions]", 1)[1]
    assert listing.startswith(" unavailable") or sid in listing, r.stdout

    # A new chat process continues the same session: its context grows from where it was.
    r2 = chat(server, "--session", sid, "--max-output-tokens", "4", input="Go on.\n/snapshot\n")
    assert r2.returncode == 0, r2.stderr
    (resumed,) = views(r2.stdout, "session")
    assert resumed["session"] == sid and resumed["n_tokens"] == snap["n_tokens"]
    (u,) = usages(r2.stdout)
    assert u["cached"] >= snap["n_tokens"] and u["output"] == 4
    (snap2,) = views(r2.stdout, "snapshot")
    assert snap2["session"] == sid and snap2["n_tokens"] > snap["n_tokens"]

    # /resume inside a chat switches to it; an unknown id is an error and the chat goes on.
    r3 = chat(server, "--max-output-tokens", "3",
              input=f"/resume s_does_not_exist\nStill here?\n/resume {sid}\nOnce more.\n/snapshot\n/new\n/quit\nnot sent\n")
    assert r3.returncode == 0, r3.stderr
    assert "error: not_found:" in r3.stderr and "s_does_not_exist" in r3.stderr
    own = created_session(r3.stdout)
    assert own != sid
    assert len(usages(r3.stdout)) == 2  # "Still here?" in its own session, "Once more." in sid; nothing after /quit
    (resumed3,) = views(r3.stdout, "session")
    assert resumed3 == {"session": sid, "status": resumed3["status"], "n_tokens": snap2["n_tokens"]}
    (snap3,) = views(r3.stdout, "snapshot")
    assert snap3["session"] == sid and snap3["n_tokens"] > snap2["n_tokens"]
    new_sessions = re.findall(r"^\[session\] (s_\w+) created$", r3.stdout, re.M)
    assert len(new_sessions) == 2 and len(set(new_sessions + [sid])) == 3


def test_errors_are_shown_and_the_chat_goes_on(server):
    r = chat(server, "--max-output-tokens", "2",
             input="/cancel\n/bogus\n/tool call_9 42\n/resume\nHello?\n//slash first\n")
    assert r.returncode == 0, r.stderr
    assert "unknown command /bogus" in r.stderr
    assert "error: invalid_argument:" in r.stderr  # a tool result for a call that awaits none
    assert "/resume needs a session id" in r.stderr
    assert len(usages(r.stdout)) == 2 and all(1 <= u["output"] <= 2 for u in usages(r.stdout))
    assert "[chat] no response is running" in r.stdout


def test_cancel_by_command_and_by_ctrl_c(server):
    # A /cancel that follows a message in a script cancels that message's response.
    r = chat(server, "--max-output-tokens", "20000", input="Write a very long story.\n/cancel\n/snapshot\n")
    assert r.returncode == 0, r.stderr
    (u,) = usages(r.stdout)
    assert u["finish"] == "cancelled" and u["output"] < 20000
    assert views(r.stdout, "snapshot")[0]["status"] == "ready"

    # SIGINT (Ctrl-C) during a response cancels it; the chat takes the next line.
    proc = subprocess.Popen(chat_command(server, "--max-output-tokens", "20000"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())
    out = bytearray()
    reader = threading.Thread(target=lambda: [out.extend(chunk) for chunk in iter(lambda: proc.stdout.read1(4096), b"")])
    reader.start()
    try:
        proc.stdin.write(b"Talk for a long time.\n")
        proc.stdin.flush()
        deadline = time.monotonic() + TIMEOUT
        while b"created\n" not in out or len(out.split(b"created\n", 1)[1]) < 20:  # the answer streams
            assert time.monotonic() < deadline and proc.poll() is None, out
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        while b"finish cancelled" not in out:
            assert time.monotonic() < deadline and proc.poll() is None, out
            time.sleep(0.05)
        proc.stdin.write(b"/snapshot\n/quit\n")
        proc.stdin.close()
        assert proc.wait(timeout=TIMEOUT) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join()
    text = out.decode(errors="replace")
    assert "[chat] cancelling the response" in text
    (u,) = usages(text)
    assert u["finish"] == "cancelled" and 0 < u["output"] < 20000
    assert views(text, "snapshot")[0]["status"] == "ready"


def test_a_refused_connection_and_a_bad_url_are_clear_errors():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = subprocess.run([HIPPO, "chat", "--url", f"ws://127.0.0.1:{port}/v1/agents"], input="Hello\n",
                       capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT)
    assert r.returncode == 1
    assert f"cannot connect to ws://127.0.0.1:{port}/v1/agents" in r.stderr and "refused" in r.stderr
    assert r.stdout == ""
    r = subprocess.run([HIPPO, "chat", "--url", "http://127.0.0.1:8080/v1/agents"], input="",
                       capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT)
    assert r.returncode == 2 and "ws://" in r.stderr


def test_a_wrong_endpoint_and_an_unknown_session_at_start_fail(server):
    key = getattr(server, "api_key", None)
    r = subprocess.run([HIPPO, "chat", "--url", server.ws.replace("/v1/agents", "/v1/nothing"),
                        *(["--api-key", key] if key else [])], input="",
                       capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT)
    assert r.returncode == 1 and "refused the WebSocket upgrade: HTTP 404" in r.stderr
    r = chat(server, "--session", "s_missing", input="Hello\n")
    assert r.returncode == 1
    assert "not_found" in r.stderr and "s_missing" in r.stderr


def test_a_missing_or_wrong_key_is_shown_at_once(server):
    # The server answers the upgrade with 401 in milliseconds; the chat says so as soon as it has
    # the answer (it once waited for its 30 s handshake timer first).
    for key_args, hint in [([], "give an API key"), (["--api-key", "hk_" + "x" * 43], "check the API key")]:
        started = time.monotonic()
        r = subprocess.run([HIPPO, "chat", "--url", server.ws, *key_args], input="Hello\n", capture_output=True,
                           text=True, env=clean_env(), timeout=TIMEOUT)
        elapsed = time.monotonic() - started
        assert r.returncode == 1 and "HTTP 401" in r.stderr and hint in r.stderr, r.stderr
        assert elapsed < 5, elapsed


def test_tool_results_for_a_session_that_awaits_them(checkpoint, tmp_path):
    """The random checkpoint calls no tools by itself: a session whose model called two (written by
    HIPPO_MAKE_TOOL_SESSION through the real store) is resumed; a plain line answers the first call,
    /tool the other, and then the next response runs."""
    db = tmp_path / "tools.db"
    tools = [{"name": "calculator", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}},
             {"name": "clock", "parameters": {"type": "object", "properties": {}}}]
    r = subprocess.run([os.environ["HIPPO_MAKE_TOOL_SESSION"], str(checkpoint), str(db), "s_tools", json.dumps(tools),
                        "What is 6 * 7, and what time is it?", "calculator", '{"expression": "6 * 7"}', "clock", "{}"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    # The fixture's session has no tenant; the server gives such sessions to tenant default.
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), tenant="default") as s:
        r = chat(s, "--session", "s_tools", "--max-output-tokens", "3",
                 input="/snapshot\n42\n/tool call_1 half past noon\n/snapshot\n")
        assert s.stop() == 0, s.log()
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\[session\] s_tools resumed: status awaiting_tool, .*, awaiting call_0 call_1$", r.stdout, re.M)
    before, after = views(r.stdout, "snapshot")
    assert before["status"] == "awaiting_tool"
    (u,) = usages(r.stdout)  # one response, once both results were in
    assert u["output"] >= 1 and u["input"] > before["n_tokens"]
    assert after["status"] == "ready" and after["n_tokens"] > before["n_tokens"]
    assert r.stderr == ""


def test_thinking_sessions_show_reasoning_and_tools_are_declared(server, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "calculator", "description": "Arithmetic",
                                  "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}]))
    r = chat(server, "--thinking", "--tools", str(tools), "--tool-choice", "auto", "--max-output-tokens", "6",
             "--temperature", "0.8", "--seed", "7", "--top-p", "0.9", "--top-k", "50", input="Think first.\n")
    assert r.returncode == 0, r.stderr
    # The random model seldom closes its reasoning: what it wrote is marked, then the usage on a line of its own.
    body = r.stdout.split(" created\n", 1)[1]
    assert body.startswith("[reasoning] ") and "\x1b[" not in r.stdout  # plain text: stdout is not a terminal
    (u,) = usages(r.stdout)
    assert u["output"] == 6 or u["finish"] == "stop"
    # The tools are in the session's prompt: it is longer than one without them.
    plain = chat(server, "--thinking", "--max-output-tokens", "1", input="Think first.\n")
    assert usages(plain.stdout)[0]["input"] < u["input"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "not an array"}')
    r = chat(server, "--tools", str(bad))
    assert r.returncode == 2 and "must be a JSON array" in r.stderr
