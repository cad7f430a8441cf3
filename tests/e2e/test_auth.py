"""End-to-end tests of `hippo serve`'s API keys, tenants and limits, and of the session
administration endpoints, with real clients (urllib, `websockets`, the official `openai` client)
and `hippo key` on the same database. docs/protocol.md ("Authentication", "Limits", "Sessions") is
the contract."""
import json
import re
import socket
import subprocess
import time

import openai
import pytest
import websockets

from serve_helpers import HIPPO, TIMEOUT, Client, Server, clean_env, make_checkpoint, metric, run

# Endpoints behind the key, with a body where they need one.
PROTECTED = [("GET", "/metrics", None), ("GET", "/v1/models", None), ("GET", "/v1/sessions", None),
             ("GET", "/v1/sessions/s_x", None), ("POST", "/v1/sessions/s_x/fork", None), ("GET", "/nowhere", None),
             ("POST", "/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]})]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("auth-model"))


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    # Tenants get at most 3 open sessions unless their own limit says otherwise.
    work = tmp_path_factory.mktemp("auth")
    with Server(work, "--model", str(checkpoint), "--db", str(work / "hippo.db"), "--tenant-max-sessions", "3") as s:
        yield s
        assert s.stop() == 0, s.log()


def assert_unauthorized(status, headers, body):
    assert status == 401, body
    assert headers["WWW-Authenticate"] == "Bearer"
    assert body["error"]["code"] == "unauthorized" and body["error"]["message"], body


async def upgrade_status(server, key):
    """The HTTP status that refuses a WebSocket upgrade (None: accepted)."""
    try:
        async with server.connect(key=key) as ws:
            c = Client(ws)
            await c.create_session()
            return None
    except websockets.InvalidStatus as e:
        return e.response.status_code


def session_with_a_turn(server, key, text="Tell me about rivers.", tokens=4):
    async def main():
        async with server.connect(key=key) as ws:
            c = Client(ws)
            sid = await c.create_session(instructions="You are a hippo.")
            await c.append(sid, text)
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=tokens)
            assert (await c.until_done())[-1]["type"] == "response.completed"
            return sid
    return run(main())


def test_every_endpoint_but_healthz_needs_a_valid_key(server):
    failures = metric(server, "hippo_auth_failures_total")
    for method, path, body in PROTECTED:
        for key in (None, "hk_" + "x" * 43, "short"):
            assert_unauthorized(*server.request(method, path, body, key=key))
        status, headers, answer = server.request(method, path, body,
                                                 headers={"Authorization": f"Basic {server.api_key}"}, key=None)
        assert_unauthorized(status, headers, answer)
        assert server.request(method, path, body)[0] != 401  # the right key passes
    assert server.request("GET", "/healthz", key=None)[:1] == (200,)
    # The upgrade is refused before any event; with the key it is accepted.
    assert run(upgrade_status(server, None)) == 401
    assert run(upgrade_status(server, "hk_" + "y" * 43)) == 401
    assert run(upgrade_status(server, server.api_key)) is None
    # The official client sees a 401 as AuthenticationError.
    bad = openai.OpenAI(base_url=server.http + "/v1", api_key="hk_" + "z" * 43, max_retries=0, timeout=TIMEOUT)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    assert metric(server, "hippo_auth_failures_total") >= failures + len(PROTECTED) * 4 + 3


def test_key_commands_never_show_a_key_again_and_revocation_takes_effect(server):
    key = server.new_key("revocable", "--label", "laptop")
    assert re.fullmatch(r"hk_[A-Za-z0-9_-]{43}", key)
    assert server.request("GET", "/v1/models", key=key)[0] == 200  # new keys work at once

    listed = server.key_command("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert key not in listed.stdout and server.api_key not in listed.stdout
    row = next(k for k in json.loads(listed.stdout) if k["tenant"] == "revocable")
    assert row["label"] == "laptop" and row["revoked_at"] is None and row["created_at"] > 0
    table = server.key_command("list")
    assert table.returncode == 0 and "revocable" in table.stdout and key not in table.stdout

    revoked = server.key_command("revoke", str(row["id"]))
    assert revoked.returncode == 0, revoked.stderr
    again = server.key_command("revoke", str(row["id"]))
    assert again.returncode == 1 and "revoked already" in again.stderr
    assert next(k for k in json.loads(server.key_command("list", "--json").stdout)
                if k["id"] == row["id"])["revoked_at"] is not None
    # Refused within the server's auth cache time (5 s), for HTTP and for the upgrade.
    deadline = time.monotonic() + 15
    while server.request("GET", "/v1/models", key=key)[0] != 401:
        assert time.monotonic() < deadline, "a revoked key still works"
        time.sleep(0.25)
    assert_unauthorized(*server.request("GET", "/v1/models", key=key))
    assert run(upgrade_status(server, key)) == 401
    assert server.request("GET", "/v1/models")[0] == 200  # other keys are unaffected


def test_a_tenant_never_sees_another_tenants_sessions(server):
    other = server.new_key("intruder")
    sid = session_with_a_turn(server, server.api_key)

    async def main():
        async with server.connect(key=other) as ws:
            c = Client(ws)
            missing = await c.expect("error", type="session.resume", session_id="s_does_not_exist")
            assert missing["code"] == "not_found"
            expected = missing["message"].replace("s_does_not_exist", sid)
            for event in ({"type": "session.resume"}, {"type": "session.snapshot"}, {"type": "session.close"},
                          {"type": "session.fork"}, {"type": "response.cancel"},
                          {"type": "input.append", "items": [{"type": "message", "content": "Whose is this?"}]},
                          {"type": "response.create", "max_output_tokens": 2}):
                err = await c.expect("error", session_id=sid, **event)
                assert err["code"] == "not_found" and err["message"] == expected, (event, err)
            # Its own sessions work as ever.
            own = await c.create_session()
            await c.expect("session.resumed", type="session.resume", session_id=own)

    run(main())
    # Over HTTP too: not listed, and every call answers exactly as for a session that does not exist.
    _, _, listing = server.request("GET", "/v1/sessions", key=other)
    assert sid not in [s["id"] for s in listing["data"]] and len(listing["data"]) == 1
    for method, suffix in (("GET", ""), ("DELETE", ""), ("POST", "/snapshot"), ("POST", "/fork")):
        status, _, body = server.request(method, f"/v1/sessions/{sid}{suffix}", key=other)
        missing_status, _, missing = server.request(method, f"/v1/sessions/s_does_not_exist{suffix}", key=other)
        assert status == missing_status == 404, body
        assert body["error"]["code"] == "not_found"
        assert json.dumps(body).replace(sid, "ID") == json.dumps(missing).replace("s_does_not_exist", "ID")

    # The owner still has it, untouched; once closed, it is still not_found (not "closed") for the other.
    status, _, mine = server.request("GET", f"/v1/sessions/{sid}")
    assert status == 200 and mine["status"] != "closed" and mine["n_tokens"] > 0
    assert sid in [s["id"] for s in server.request("GET", "/v1/sessions")[2]["data"]]
    assert server.request("DELETE", f"/v1/sessions/{sid}")[0] == 200
    assert server.request("GET", f"/v1/sessions/{sid}", key=other)[0] == 404
    assert server.request("GET", f"/v1/sessions/{sid}")[2]["status"] == "closed"


def test_session_administration_over_http(server):
    key = server.new_key("admin")
    sid = session_with_a_turn(server, key, tokens=3)

    status, _, listing = server.request("GET", "/v1/sessions", key=key)
    assert status == 200 and listing["object"] == "list"
    assert [s["id"] for s in listing["data"]] == [sid]
    entry = listing["data"][0]
    assert entry["object"] == "session" and entry["forked_from"] is None and entry["created_at"] > 0

    status, _, one = server.request("GET", f"/v1/sessions/{sid}", key=key)
    assert status == 200 and one["id"] == sid and one["status"] in ("ready", "swapped")
    assert one["n_tokens"] > 0 and one["awaiting_call_ids"] == [] and "pending_tokens" in one

    status, _, snap = server.request("POST", f"/v1/sessions/{sid}/snapshot", key=key)
    assert status == 200 and snap["id"] == sid and snap["n_tokens"] > 0

    status, _, fork = server.request("POST", f"/v1/sessions/{sid}/fork", key=key)
    assert status == 201, fork
    fid = fork["id"]
    assert fid != sid and fork["forked_from"] == sid and fork["n_tokens"] == snap["n_tokens"]
    assert sorted(s["id"] for s in server.request("GET", "/v1/sessions", key=key)[2]["data"]) == sorted([sid, fid])

    async def continue_both():
        async with server.connect(key=key) as ws:
            c = Client(ws)
            # The WebSocket event forks too.
            forked = await c.expect("session.forked", type="session.fork", session_id=sid, event_id="f1")
            assert forked["forked_from"] == sid and forked["event_id"] == "f1"
            outputs = {}
            for s in (sid, fid, forked["session_id"]):
                await c.append(s, "And what about lakes?")
                await c.expect("response.created", type="response.create", session_id=s, max_output_tokens=8,
                               temperature=1.0, top_p=0.95, seed=11)
                events = await c.until_done(s)
                done = events[-1]
                assert done["type"] == "response.completed", done
                text = "".join(e.get("delta", "") for e in events if e["type"] == "response.output_text.delta")
                outputs[s] = (text, done["usage"]["input_tokens"], done["usage"]["cached_tokens"],
                              done["usage"]["output_tokens"])
            # A fork continues exactly like its source: same text, same context, nothing prefilled again.
            assert outputs[fid] == outputs[sid] == outputs[forked["session_id"]]
            return forked["session_id"]

    ws_fork = run(continue_both())

    status, _, closed = server.request("DELETE", f"/v1/sessions/{fid}", key=key)
    assert status == 200 and closed["status"] == "closed" and closed["id"] == fid
    assert server.request("GET", f"/v1/sessions/{fid}", key=key)[2]["status"] == "closed"
    status, _, again = server.request("DELETE", f"/v1/sessions/{fid}", key=key)
    assert status == 409 and again["error"]["code"] == "failed_precondition"
    assert server.request("DELETE", f"/v1/sessions/{ws_fork}", key=key)[0] == 200

    status, _, wrong = server.request("PUT", f"/v1/sessions/{sid}", key=key)
    assert status == 405 and wrong["error"]["code"] == "method_not_allowed"
    assert server.request("GET", f"/v1/sessions/{sid}/fork", key=key)[0] == 405
    assert server.request("POST", "/v1/sessions", key=key)[0] == 405
    assert server.request("POST", f"/v1/sessions/{sid}/explode", key=key)[0] == 404


def test_max_sessions_per_tenant(server):
    few = server.new_key("few", "--max-sessions", "2")   # its own limit
    many = server.new_key("many", "--max-sessions", "0")  # no limit
    default = server.new_key("defaulted")                  # the server's --tenant-max-sessions 3
    quota = metric(server, "hippo_quota_exceeded_total")

    async def open_until_refused(key, n):
        async with server.connect(key=key) as ws:
            c = Client(ws)
            ids = []
            for _ in range(n):
                await c.send(type="session.create", event_id="c")
                e = await c.recv()
                if e["type"] == "error":
                    return ids, e
                ids.append(e["session_id"])
            return ids, None

    ids, refused = run(open_until_refused(few, 5))
    assert len(ids) == 2 and refused["code"] == "quota_exceeded" and refused["event_id"] == "c"
    assert "2 open sessions" in refused["message"]
    # Forks and chat completions open sessions too: refused the same way, as HTTP 429.
    status, headers, body = server.request("POST", f"/v1/sessions/{ids[0]}/fork", key=few)
    assert status == 429 and body["error"]["code"] == "quota_exceeded"
    status, _, body = server.request("POST", "/v1/chat/completions",
                                     {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
                                     key=few)
    assert status == 429 and body["error"]["code"] == "quota_exceeded"
    # Closing one makes room.
    assert server.request("DELETE", f"/v1/sessions/{ids[0]}", key=few)[0] == 200
    more, refused = run(open_until_refused(few, 2))
    assert len(more) == 1 and refused["code"] == "quota_exceeded"

    ids, refused = run(open_until_refused(default, 5))
    assert len(ids) == 3 and refused["code"] == "quota_exceeded"
    ids, refused = run(open_until_refused(many, 6))
    assert len(ids) == 6 and refused is None
    assert metric(server, "hippo_quota_exceeded_total") >= quota + 5


def test_tokens_per_minute_per_tenant(server):
    slow = server.new_key("slow", "--tokens-per-minute", "60", "--max-sessions", "0")
    limited = metric(server, "hippo_rate_limited_total")

    async def respond_until_refused(key):
        async with server.connect(key=key) as ws:
            c = Client(ws)
            sid = await c.create_session()
            used = 0
            for _ in range(10):
                await c.append(sid, "Hello there, hippo.")
                await c.send(type="response.create", session_id=sid, max_output_tokens=8, event_id="r")
                e = await c.recv()
                if e["type"] == "error":
                    return used, e
                assert e["type"] == "response.created"
                done = (await c.until_done())[-1]
                used += done["usage"]["input_tokens"] + done["usage"]["output_tokens"]
            return used, None

    used, refused = run(respond_until_refused(slow))
    assert refused is not None, "the tenant was never limited"
    assert refused["code"] == "rate_limited" and refused["event_id"] == "r"
    assert used >= 60 and 1 <= refused["retry_after"] <= 60
    # Over HTTP: 429 with Retry-After; the official client raises RateLimitError.
    status, headers, body = server.request("POST", "/v1/chat/completions",
                                           {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]}, key=slow)
    assert status == 429 and body["error"]["code"] == "rate_limited"
    assert 1 <= int(headers["Retry-After"]) <= 60
    client = openai.OpenAI(base_url=server.http + "/v1", api_key=slow, max_retries=0, timeout=TIMEOUT)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    # Other tenants are not affected.
    fine = openai.OpenAI(base_url=server.http + "/v1", api_key=server.api_key, max_retries=0, timeout=TIMEOUT)
    r = fine.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert r.choices[0].finish_reason in ("length", "stop")
    assert metric(server, "hippo_rate_limited_total") >= limited + 3

    limits = server.key_command("limits", "--tenant", "slow", "--json")
    assert limits.returncode == 0, limits.stderr
    assert json.loads(limits.stdout) == {"tenant": "slow", "tenant_id": json.loads(limits.stdout)["tenant_id"],
                                         "max_sessions": 0, "tokens_per_minute": 60,
                                         "max_prompt_tokens": None}


def test_first_start_on_an_empty_database_prints_a_usable_key(checkpoint, tmp_path):
    db = tmp_path / "fresh.db"
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), make_key=False, name="first") as s:
        log = s.log()
        keys = re.findall(r"hk_[A-Za-z0-9_-]{43}", log)
        assert len(keys) == 1, log
        assert "will not be shown again" in log and 'tenant "default"' in log
        assert s.request("GET", "/v1/models", key=None)[0] == 401
        assert s.request("GET", "/v1/models", key=keys[0])[0] == 200
        assert run(upgrade_status(s, keys[0])) is None
        assert s.stop() == 0, s.log()
    listed = json.loads(subprocess.run([HIPPO, "key", "list", "--json", "--db", str(db)], capture_output=True,
                                       text=True, env=clean_env(), timeout=60).stdout)
    assert [(k["tenant"], k["revoked_at"]) for k in listed] == [("default", None)]
    # Later starts make no key: the database has one.
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), make_key=False, name="second") as s:
        assert "hk_" not in s.log()
        assert s.stop() == 0


def test_a_first_start_that_fails_makes_no_key_and_the_next_start_prints_one(checkpoint, tmp_path):
    db = tmp_path / "retry.db"
    # The port is taken: the start fails, and no key is made that the user would never see working.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([HIPPO, "serve", "--model", str(checkpoint), "--db", str(db), "--port", str(port)],
                           capture_output=True, text=True, env=clean_env(), timeout=120, cwd=tmp_path)
    assert r.returncode != 0 and "hk_" not in r.stderr, r.stderr
    # A missing tokenizer (for the embedded default model) fails too, before any key.
    r = subprocess.run([HIPPO, "serve", "--db", str(db), "--port", "0", "--tokenizer", str(tmp_path / "missing")],
                       capture_output=True, text=True, env=clean_env(), timeout=120, cwd=tmp_path)
    assert r.returncode != 0 and "hk_" not in r.stderr, r.stderr
    listed = subprocess.run([HIPPO, "key", "list", "--json", "--db", str(db)], capture_output=True, text=True,
                            env=clean_env(), timeout=60)
    assert json.loads(listed.stdout) == [], listed.stdout
    # The retry that works prints the key, and it works.
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), make_key=False, name="retry") as s:
        keys = re.findall(r"hk_[A-Za-z0-9_-]{43}", s.log())
        assert len(keys) == 1, s.log()
        assert s.request("GET", "/v1/models", key=keys[0])[0] == 200
        assert s.stop() == 0, s.log()


def test_auth_off_acts_as_tenant_default_on_loopback_only(checkpoint, tmp_path):
    db = tmp_path / "open.db"
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), "--auth", "off", make_key=False) as s:
        assert s.request("GET", "/v1/models", key=None)[0] == 200
        assert run(upgrade_status(s, None)) is None
        status, _, listing = s.request("GET", "/v1/sessions", key=None)
        assert status == 200 and len(listing["data"]) == 1
        assert "hk_" not in s.log()
        assert s.stop() == 0
    # Its sessions are tenant default's: a key of tenant default made later sees them.
    key = subprocess.run([HIPPO, "key", "create", "--tenant", "default", "--db", str(db)], capture_output=True,
                         text=True, env=clean_env(), timeout=60).stdout.strip()
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), make_key=False, name="keyed") as s:
        assert len(s.request("GET", "/v1/sessions", key=key)[2]["data"]) == 1
        assert s.request("GET", "/v1/sessions", key=None)[0] == 401
        assert s.stop() == 0
    r = subprocess.run([HIPPO, "serve", "--auth", "off", "--bind", "0.0.0.0", "--port", "0", "--db", str(db)],
                       capture_output=True, text=True, env=clean_env(), timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "loopback" in r.stderr
