"""What the official `openai` client met on `hippo serve` (issue 19, items 6 and 7), through the real
binary: answers vary without a seed and report the seed drawn, which repeats them; special tokens
never reach `content`; `logprobs` are returned, plain and streamed; unsupported fields get 400
(which the client does not retry), never a silent null or a 501; `GET /v1/models/{id}`; the embedded default model's id."""
import json
import pathlib
import sqlite3
import subprocess
import time

import openai
import pytest

from serve_helpers import HIPPO, Server, clean_env, make_checkpoint, metric, wait_until

TIMEOUT = 120


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("compat-model"))


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    work = tmp_path_factory.mktemp("compat")
    with Server(work, "--model", str(checkpoint), "--db", str(work / "hippo.db")) as s:
        yield s
        assert s.stop() == 0, s.log()


@pytest.fixture
def client(server):
    # max_retries stays at the client's default (2): a 400 must fail at once, a 5xx would be retried.
    return openai.OpenAI(base_url=server.http + "/v1", api_key=server.api_key, timeout=TIMEOUT)


def ask(client, **kw):
    return client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Tell me a story"}],
                                          **kw)


def test_without_a_seed_answers_vary_and_the_reported_seed_repeats_one(client):
    answers = [ask(client, temperature=1.0, max_tokens=12) for _ in range(5)]
    texts = [a.choices[0].message.content for a in answers]
    seeds = [a.model_extra["seed"] for a in answers]
    assert len(set(texts)) > 1, texts
    assert len(set(seeds)) == 5, seeds
    again = ask(client, temperature=1.0, max_tokens=12, seed=seeds[2])
    assert again.choices[0].message.content == texts[2]
    assert again.model_extra["seed"] == seeds[2]
    # With a seed: deterministic, as before.
    assert ask(client, temperature=1.0, max_tokens=12, seed=7).choices[0].message.content == \
        ask(client, temperature=1.0, max_tokens=12, seed=7).choices[0].message.content
    # Streaming reports it on the last choice chunk.
    stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}],
                                            max_tokens=4, temperature=1.0, seed=11, stream=True)
    finals = [c for c in stream if c.choices and c.choices[0].finish_reason]
    assert [c.model_extra["seed"] for c in finals] == [11]


def special_ids(checkpoint):
    tok = json.loads((pathlib.Path(checkpoint) / "tokenizer.json").read_text())
    return {t["id"]: t["content"] for t in tok["added_tokens"] if t["special"]}


def test_special_tokens_never_reach_content(client, server, checkpoint):
    specials = special_ids(checkpoint)
    # A flat distribution over the random model's vocabulary samples some of its 1,230 special tokens.
    answer = ask(client, temperature=2.0, max_tokens=400, seed=3)
    content = answer.choices[0].message.content or ""
    db = sqlite3.connect(f"file:{server.workdir / 'hippo.db'}?mode=ro", uri=True)
    rows = db.execute("SELECT token_ids FROM messages WHERE role = 'assistant'").fetchall()
    sampled = [int.from_bytes(blob[i:i + 4], "little", signed=True) for (blob,) in rows for i in range(0, len(blob), 4)]
    drawn = [specials[t] for t in sampled if t in specials and specials[t] != "<｜end▁of▁sentence｜>"]
    assert drawn, "the test needs an answer that sampled a special token; try another seed"
    for text in set(drawn):
        assert text not in content, text
    assert "place▁holder" not in content


def test_unsupported_fields_are_400_and_not_retried(client, server):
    prefix = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel", "prefix": True}]
    for kw, word in [({"response_format": {"type": "json_object"}}, "response_format"),
                     ({"extra_body": {"messages": prefix}}, "prefix")]:
        before = metric(server, "hippo_http_requests_total")
        with pytest.raises(openai.BadRequestError) as refused:
            ask(client, max_tokens=2, **kw)
        # Sent once (the metrics request counts itself): a 501 was retried twice by the client.
        assert metric(server, "hippo_http_requests_total") == before + 2
        assert refused.value.status_code == 400
        assert refused.value.body["type"] == "invalid_request_error" and refused.value.body["code"] == "unsupported"
        assert word in refused.value.body["message"]
    assert ask(client, max_tokens=2, logprobs=False).choices[0].logprobs is None  # false is no request
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        ask(client, max_tokens=2, top_logprobs=2)  # without logprobs: true
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        ask(client, max_tokens=2, logprobs=True, top_logprobs=21)


def test_logprobs_plain_and_streamed(client):
    r = ask(client, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3)
    entries = r.choices[0].logprobs.content
    assert 1 <= len(entries) <= 6
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token
        # Greedy: the sampled token is the most likely one.
        assert e.top_logprobs[0].logprob == pytest.approx(e.logprob)
        assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob
    assert b"".join(bytes(e.bytes) for e in entries).decode("utf-8", "replace") == r.choices[0].message.content
    stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Tell me a story"}],
                                            max_tokens=6, temperature=0, logprobs=True, top_logprobs=3, stream=True)
    streamed = [e for c in stream if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in entries]


def test_models_by_id(client):
    assert [m.id for m in client.models.list()] == ["tiny"]
    model = client.models.retrieve("tiny")
    assert model.id == "tiny" and model.object == "model" and model.owned_by == "hippo"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-4o")
    assert missing.value.body["code"] == "model_not_found" and "tiny" in missing.value.body["message"]


def test_the_embedded_default_model_is_called_default(tmp_path):
    with Server(tmp_path, "--db", str(tmp_path / "hippo.db")) as s:
        c = openai.OpenAI(base_url=s.http + "/v1", api_key=s.api_key, max_retries=0, timeout=TIMEOUT)
        assert [m.id for m in c.models.list()] == ["default"]
        r = c.chat.completions.create(model="default", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        assert r.model == "default"
        assert s.stop() == 0, s.log()


def test_chat_completion_sessions_stay_out_of_listings_and_go_under_the_retention_rule(checkpoint, tmp_path):
    db = tmp_path / "hippo.db"

    def session_list(*flags):
        r = subprocess.run([HIPPO, "session", "list", "--json", "--db", str(db), *flags], capture_output=True,
                           text=True, env=clean_env(), timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    # No prefix sessions kept: each request's session is closed when it ends.
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), "--max-prefix-sessions", "0") as s:
        c = openai.OpenAI(base_url=s.http + "/v1", api_key=s.api_key, max_retries=0, timeout=TIMEOUT)
        for i in range(3):
            c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": f"Hi {i}"}], max_tokens=2)
        listed = s.request("GET", "/v1/sessions")[2]["data"]
        assert listed == [], listed
        everything = s.request("GET", "/v1/sessions?kind=all")[2]["data"]
        assert [x["kind"] for x in everything] == ["completion"] * 3
        assert all(x["status"] == "closed" for x in everything)
        assert s.request("GET", "/v1/sessions?kind=nonsense")[0] == 400
        assert s.stop() == 0, s.log()
    assert session_list() == []
    assert [x["kind"] for x in session_list("--all")] == ["completion"] * 3

    # `hippo session gc` applies the rule: keep at most 1 byte of them, i.e. none.
    r = subprocess.run([HIPPO, "session", "gc", "--json", "--db", str(db), "--completion-max-bytes", "1"],
                       capture_output=True, text=True, env=clean_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["completion_sessions_removed"] == 3
    assert session_list("--all") == []

    # A server applies it at start (then every minute).
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), name="again") as s:
        c = openai.OpenAI(base_url=s.http + "/v1", api_key=s.api_key, max_retries=0, timeout=TIMEOUT)
        c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        assert s.stop() == 0, s.log()
    kept = session_list("--all")
    assert len(kept) == 1 and kept[0]["status"] != "closed"  # kept open for the conversation's next turn
    # The store keeps whole seconds and the bound truncates to 1 s: "older than 1 s" needs two clock
    # ticks between the last use and the server's first retention pass, whatever the start-up time.
    time.sleep(2.5)
    # Unused for longer than the age bound (about 1 s here): closed, then removed under the bytes bound.
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(db), "--completion-max-age-hours", "0.0003",
                "--completion-max-bytes", "1", name="third") as s:
        assert wait_until(lambda: s.request("GET", "/v1/sessions?kind=completion")[2]["data"] == [], 10)
        assert "completion sessions removed" in s.log()
        assert s.stop() == 0, s.log()

