"""End-to-end tests of `hippo serve` on a tiny checkpoint, with real clients: urllib and curl for
the HTTP endpoints, the `websockets` library for the agents protocol on /v1/agents, and the
official `openai` client for /v1/chat/completions. docs/protocol.md is the contract."""
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import time

import openai
import pytest
import websockets

from serve_helpers import HIPPO, TIMEOUT, Client, Server, make_checkpoint, metric, output_text, run

STREAM_GRACE = 2  # seconds a dropped client's response waits for it (--stream-grace)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("serve-model"))


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    work = tmp_path_factory.mktemp("serve")
    with Server(work, "--model", str(checkpoint), "--db", str(work / "hippo.db"), "--stream-grace", str(STREAM_GRACE)) as s:
        yield s
        assert s.stop() == 0, s.log()


def test_health_models_and_metrics(server):
    r = subprocess.run(["curl", "-sS", "-i", server.http + "/healthz"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("HTTP/1.1 200")
    assert json.loads(r.stdout.split("\n\n", 1)[1])["status"] == "ok"

    status, _, body = server.get("/v1/models")
    models = json.loads(body)
    assert status == 200 and models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["tiny"]

    status, content_type, text = server.get("/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    for name in ("hippo_sessions", "hippo_resident_sessions", "hippo_resident_bytes", "hippo_swap_outs_total",
                 "hippo_resumes_total", "hippo_rebuilds_total", "hippo_snapshots_total", "hippo_queued_responses",
                 "hippo_running_responses", "hippo_connections_total", "hippo_http_requests_total",
                 "hippo_output_tokens_total", "hippo_auth_failures_total", "hippo_rate_limited_total",
                 "hippo_quota_exceeded_total"):
        assert f"\n# TYPE {name} " in "\n" + text, name
        assert any(line.startswith(name + " ") for line in text.splitlines()), name

    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                        f"Authorization: Bearer {server.api_key}", server.http + "/nowhere"],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout == "404"


def test_websocket_session_streams_a_response(server):
    tokens_before = metric(server, "hippo_output_tokens_total")
    frames_before = metric(server, "hippo_stream_event_delay_seconds_count")

    async def main():
        async with server.connect() as ws:
            c = Client(ws)
            created = await c.expect("session.created", type="session.create", event_id="c1",
                                     instructions="You are a hippo.")
            assert created["event_id"] == "c1"
            sid = created["session_id"]
            appended = await c.append(sid, "Tell me about rivers.")
            assert appended["items"] == 1
            await c.send(type="response.create", session_id=sid, max_output_tokens=12, event_id="r1")
            created = await c.recv()
            assert created["type"] == "response.created" and created["event_id"] == "r1"
            events = await c.until_done()
            deltas = [e for e in events if e["type"] == "response.output_text.delta"]
            done = events[-1]
            assert done["type"] == "response.completed", done
            assert done["finish_reason"] in ("length", "stop")
            u = done["usage"]
            assert u["output_tokens"] == 12 if done["finish_reason"] == "length" else u["output_tokens"] >= 1
            assert u["input_tokens"] > 0 and u["cached_tokens"] == 0
            for key in ("prefill_ms", "decode_ms", "first_token_ms"):
                assert u[key] >= 0
            assert deltas and "".join(d["delta"] for d in deltas)
            assert all(e["response_id"] == created["response_id"] and e["event_id"] == "r1" for e in events)
            assert not any("t_emit_ns" in e for e in events)  # the server's timing field stays inside
            # A second turn builds on the first: its whole context so far is cached.
            await c.append(sid, "And lakes?")
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=4)
            second = (await c.until_done())[-1]
            assert second["usage"]["cached_tokens"] >= u["input_tokens"]
            view = await c.expect("session.snapshotted", type="session.snapshot", session_id=sid)
            assert view["n_tokens"] > 0
            await c.expect("session.closed", type="session.close", session_id=sid)
            err = await c.expect("error", type="session.resume", session_id=sid)
            assert err["code"] == "failed_precondition"
            assert c.seqs == list(range(1, len(c.seqs) + 1))  # per connection, no gaps

    run(main())
    assert metric(server, "hippo_output_tokens_total") >= tokens_before + 16
    assert metric(server, "hippo_stream_event_delay_seconds_count") >= frames_before + 16  # every streamed frame


def test_two_sessions_on_one_connection(server):
    async def main():
        async with server.connect() as ws:
            c = Client(ws)
            a = await c.create_session(instructions="Session A")
            b = await c.create_session(instructions="Session B")
            assert a != b
            await c.append(a, "First question")
            await c.append(b, "Second question")
            await c.send(type="response.create", session_id=a, max_output_tokens=20)
            await c.send(type="response.create", session_id=b, max_output_tokens=20)
            completed, text = {}, {a: "", b: ""}
            while len(completed) < 2:
                e = await c.recv()
                if e["type"] == "response.output_text.delta":
                    text[e["session_id"]] += e["delta"]
                elif e["type"] == "response.completed":
                    completed[e["session_id"]] = e
                else:
                    assert e["type"] == "response.created", e
            assert set(completed) == {a, b}
            assert all(completed[s]["usage"]["output_tokens"] == 20 for s in (a, b))
            assert text[a] and text[b]

    run(main())


def test_cancel_ends_a_response_as_cancelled(server):
    async def main():
        async with server.connect() as ws:
            c = Client(ws)
            sid = await c.create_session()
            await c.append(sid, "Write a very long story.")
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=20000)
            first = await c.recv()
            assert first["type"] == "response.output_text.delta", first
            await c.send(type="response.cancel", session_id=sid, event_id="x")
            done = (await c.until_done())[-1]
            assert done["type"] == "response.completed" and done["finish_reason"] == "cancelled"
            assert 0 < done["usage"]["output_tokens"] < 20000
            # The session takes the next turn.
            await c.append(sid, "Shorter, please.")
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=3)
            assert (await c.until_done())[-1]["usage"]["output_tokens"] == 3

    run(main())


def test_a_reconnecting_client_resumes_the_stream_where_it_left(server):
    prompt = "Tell me everything about hippos."

    async def main():
        # The uninterrupted answer (greedy, so the interrupted one must equal it); long enough to be still
        # running, or within the grace period, when the client is back, on a loaded machine too.
        async with server.connect() as ws:
            ref_events = await Client(ws).fresh_answer(prompt, max_output_tokens=1500)
            expected = output_text(ref_events)
        async with server.connect() as ws:
            c = Client(ws)
            sid = await c.create_session()
            await c.append(sid, prompt)
            created = await c.expect("response.created", type="response.create", session_id=sid,
                                     max_output_tokens=1500, event_id="r")
            last_seen = created["session_seq"]
            text = ""
            for _ in range(3):
                e = await c.recv()
                assert e["type"] == "response.output_text.delta" and e["session_seq"] == last_seen + 1, e
                last_seen = e["session_seq"]
                text += e["delta"]
        # The connection dropped mid-response; the response runs on and a new connection picks it up.
        async with server.connect() as ws:
            c = Client(ws)
            view = await c.expect("session.resumed", type="session.resume", session_id=sid, after_seq=last_seen)
            assert view["session_seq"] >= last_seen
            events = await c.until_done(sid)
            assert [e["session_seq"] for e in events] == list(range(last_seen + 1, last_seen + 1 + len(events)))
            assert all(e["event_id"] == "r" and e["response_id"] == created["response_id"] for e in events)
            text += output_text(events)
            assert events[-1]["type"] == "response.completed"
            assert events[-1]["finish_reason"] == ref_events[-1]["finish_reason"] != "cancelled"
            assert text == expected
            end_seq = events[-1]["session_seq"]
            # A finished response stays replayable while its reader is attached (however long it took to
            # read it) and for the grace period after it leaves; a seq past the stream is refused.
            await asyncio.sleep(STREAM_GRACE * 1.5)
            again = await c.expect("session.resumed", type="session.resume", session_id=sid, after_seq=end_seq - 2)
            assert again["session_seq"] == end_seq
            assert [(await c.recv())["session_seq"] for _ in range(2)] == [end_seq - 1, end_seq]
            err = await c.expect("error", type="session.resume", session_id=sid, after_seq=end_seq + 5)
            assert err["code"] == "stream_gap"
        await asyncio.sleep(STREAM_GRACE * 1.5)
        async with server.connect() as ws:
            err = await Client(ws).expect("error", type="session.resume", session_id=sid, after_seq=end_seq - 2)
            assert err["code"] == "stream_gap"

    run(main())


def test_a_response_nobody_comes_back_for_is_cancelled_after_the_grace_period(server):
    async def main():
        async with server.connect() as ws:
            c = Client(ws)
            sid = await c.create_session()
            await c.append(sid, "Talk for a long time.")
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=20000)
            last_seen = (await c.recv())["session_seq"]
        left = asyncio.get_running_loop().time()
        await asyncio.sleep(STREAM_GRACE / 4)
        assert metric(server, "hippo_running_responses") == 1  # still waiting for its client
        for _ in range(400):
            if metric(server, "hippo_running_responses") == 0:
                break
            await asyncio.sleep(0.05)
        assert metric(server, "hippo_running_responses") == 0
        assert asyncio.get_running_loop().time() - left >= STREAM_GRACE * 0.9
        # The session is not gone: its stream tells how the response ended, and it takes the next turn.
        async with server.connect() as ws:
            c = Client(ws)
            view = await c.expect("session.resumed", type="session.resume", session_id=sid, after_seq=last_seen)
            assert view["status"] in ("ready", "swapped") and view["n_tokens"] > 0
            done = (await c.until_done(sid))[-1]
            assert done["type"] == "response.completed" and done["finish_reason"] == "cancelled"
            await c.append(sid, "Go on.")
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=2)
            assert (await c.until_done())[-1]["type"] == "response.completed"

    run(main())


def test_bad_events_are_errors_and_the_server_keeps_serving(server):
    async def main():
        async with server.connect() as ws:
            c = Client(ws)
            await ws.send("{not json")
            assert (await c.recv())["code"] == "invalid_json"
            await ws.send("[1, 2]")
            assert (await c.recv())["code"] == "invalid_json"
            err = await c.expect("error", type="session.explode", event_id="u1")
            assert err["code"] == "unknown_type" and err["event_id"] == "u1"
            await ws.send(json.dumps({"session_id": "s"}))
            assert (await c.recv())["code"] == "invalid_event"
            err = await c.expect("error", type="response.create", session_id=42, event_id="w1")
            assert err["code"] == "invalid_field" and "session_id" in err["message"] and err["event_id"] == "w1"
            err = await c.expect("error", type="response.create", session_id="s_x", max_output_tokens="many")
            assert err["code"] == "invalid_field" and "max_output_tokens" in err["message"]
            err = await c.expect("error", type="input.append", session_id="s_x", items=[{"type": "picture"}])
            assert err["code"] == "invalid_field"
            await ws.send(b"\x00\x01binary")
            assert (await c.recv())["code"] == "binary_frame"
            err = await c.expect("error", type="session.resume", session_id="s_does_not_exist")
            assert err["code"] == "not_found"
            sid = await c.create_session()
            err = await c.expect("error", type="input.append", session_id=sid,
                                 items=[{"type": "tool_result", "call_id": "nope", "content": "{}"}])
            assert err["code"] == "invalid_argument"
            # Still serving on the same connection.
            await c.append(sid, "Still there?")
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=2)
            assert (await c.until_done())[-1]["type"] == "response.completed"

        # A frame over the 4 MiB limit closes that connection with 1009; others are unaffected.
        async with server.connect(max_size=None) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.send("x" * (5 << 20))  # may fail already: the server closes while it arrives
                await asyncio.wait_for(ws.recv(), TIMEOUT)
            assert closed.value.rcvd.code == 1009
        async with server.connect() as ws:
            c = Client(ws)
            assert (await c.create_session()).startswith("s_")

    run(main())
    status, _, _ = server.get("/healthz")
    assert status == 200


def test_openai_client_chat_completions(server):
    client = openai.OpenAI(base_url=server.http + "/v1", api_key=server.api_key, max_retries=0, timeout=TIMEOUT)
    assert [m.id for m in client.models.list()] == ["tiny"]

    r = client.chat.completions.create(
        model="tiny", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello!"}],
        max_tokens=8, temperature=0)
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content
    assert r.choices[0].finish_reason in ("length", "stop")
    assert r.usage.completion_tokens == 8 or r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 0 and r.usage.prompt_tokens_details.cached_tokens == 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens

    chunks = list(client.chat.completions.create(
        model="tiny", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello!"}],
        max_completion_tokens=8, temperature=0, stream=True, stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == r.choices[0].message.content  # greedy: the same answer streamed
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [r.choices[0].finish_reason]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage.completion_tokens == r.usage.completion_tokens
    assert usage.prompt_tokens == r.usage.prompt_tokens and usage.prompt_tokens_details.cached_tokens == 0

    seeded = [client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
                                             temperature=1.0, top_p=0.9, seed=s, stop=["\n\n"])
              for s in (5, 5)]
    assert seeded[0].choices[0].message.content == seeded[1].choices[0].message.content

    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], temperature=7)
    assert "temperature" in str(bad.value)
    # The next turn re-sends the conversation: the session holding it is continued, not prefilled anew.
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello!"},
               {"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "Again"}]
    again = client.chat.completions.create(model="tiny", messages=history, max_tokens=4, temperature=0)
    assert 0 < again.usage.prompt_tokens_details.cached_tokens < again.usage.prompt_tokens
    assert metric(server, "hippo_running_responses") == 0


def test_polling_io_threads_stream_the_same_answer_sleep_when_idle_and_shut_down(server, checkpoint, tmp_path):
    prompt = "Tell me about the Nile."

    async def answer(s):
        async with s.connect() as ws:
            events = await Client(ws).fresh_answer(prompt, max_output_tokens=40)
            assert events[-1]["type"] == "response.completed", events[-1]
            return output_text(events)

    def cpu_seconds(proc):
        fields = pathlib.Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    expected = run(answer(server))
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(tmp_path / "spin.db"), "--io-threads", "1",
                "--io-spin-us", "20000", name="spin") as s:
        assert run(answer(s)) == expected  # greedy: polling changes when frames go out, not what
        assert metric(s, "hippo_stream_event_delay_seconds_count") >= 40
        # Idle, the I/O thread sleeps again after its 20 ms of polling: far below a core over 2 s.
        time.sleep(0.5)
        before = cpu_seconds(s.proc)
        time.sleep(2)
        assert cpu_seconds(s.proc) - before < 0.5
        assert s.stop() == 0, s.log()


def test_sigterm_snapshots_and_a_restarted_server_resumes(checkpoint, tmp_path):
    db = tmp_path / "resume.db"

    async def first_life(s):
        async with s.connect() as ws:
            c = Client(ws)
            sid = await c.create_session(instructions="Remember the river.")
            await c.append(sid, "The river is called Nile. " * 20)
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=6)
            done = (await c.until_done())[-1]
            assert done["type"] == "response.completed"
            s.proc.send_signal(signal.SIGTERM)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), TIMEOUT)
            assert closed.value.rcvd.code == 1001
            return sid, done["usage"]

    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), name="first") as s:
        sid, usage = run(first_life(s))
        assert s.stop() == 0, s.log()
        assert "every session is snapshotted" in s.log()

    async def second_life(s):
        async with s.connect() as ws:
            c = Client(ws)
            resumed = await c.expect("session.resumed", type="session.resume", session_id=sid)
            assert resumed["status"] == "swapped" and resumed["n_tokens"] > 0
            await c.append(sid, "What is the river called?")
            await c.expect("response.created", type="response.create", session_id=sid, max_output_tokens=4)
            done = (await c.until_done())[-1]
            assert done["type"] == "response.completed", done
            return resumed, done["usage"]

    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), name="second") as s:
        resumed, usage2 = run(second_life(s))
        # Restored from the snapshot, not prefilled again.
        assert usage2["cached_tokens"] == resumed["n_tokens"] > 0
        assert usage2["cached_tokens"] >= usage["input_tokens"]
        assert metric(s, "hippo_resumes_total") >= 1
        assert metric(s, "hippo_rebuilds_total") == 0
        assert s.stop(signal.SIGINT) == 0, s.log()


def test_embedded_default_model_and_env_settings(tmp_path):
    import os
    env = {"HIPPO_TOKENIZER": os.environ["HIPPO_TOKENIZER_DIR"], "HIPPO_DB": str(tmp_path / "env.db")}
    # An older default (the random `tiny` checkpoint that earlier versions wrote there) is replaced.
    (tmp_path / "models").mkdir()
    make_checkpoint(tmp_path / "models").rename(tmp_path / "models" / "default")
    demo = pathlib.Path(__file__).resolve().parents[2] / "models" / "demo"
    with Server(tmp_path, env=env) as s:
        default = tmp_path / "models" / "default"
        assert (default / "provenance.json").read_bytes() == (demo / "provenance.json").read_bytes()
        assert (default / "config.json").read_bytes() == (demo / "config.json").read_bytes()
        assert (default / "tokenizer.json").exists()
        assert "copying the embedded default model" in s.log()
        _, _, body = s.get("/v1/models")
        assert [m["id"] for m in json.loads(body)["data"]] == ["default"]
        assert s.stop() == 0, s.log()
    assert (tmp_path / "env.db").exists()
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["default"]
    with Server(tmp_path, env=env, name="again") as s:  # copied once
        assert "copying the embedded default model" not in s.log()
        assert s.stop() == 0


def test_bad_settings_are_clear_errors(tmp_path):
    r = subprocess.run([HIPPO, "serve", "--model", str(tmp_path / "missing"),
                        "--port", "0"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 1 and "missing" in r.stderr
    r = subprocess.run([HIPPO, "serve", "--port", "70000"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2
