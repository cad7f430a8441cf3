"""`hippo serve --tls-cert --tls-key`: HTTPS and wss:// on one port, with a certificate the test
creates (openssl), checked by real clients that verify it: curl, the `websockets` library and the
official `openai` client. A client speaking plain HTTP to the TLS port is refused and the server
keeps serving."""
import asyncio
import json
import ssl
import subprocess

import openai
import pytest
import websockets

from serve_helpers import HIPPO, Server, clean_env, make_checkpoint

TIMEOUT = 60


def make_certificate(where, name="server"):
    cert, key = where / f"{name}.pem", where / f"{name}.key"
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                        "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return cert, key


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    work = tmp_path_factory.mktemp("tls")
    checkpoint = make_checkpoint(work)
    cert, key = make_certificate(work)
    with Server(work, "--model", str(checkpoint), "--db", str(work / "hippo.db"),
                "--tls-cert", str(cert), "--tls-key", str(key)) as s:
        s.cert = cert
        yield s
        assert s.stop() == 0, s.log()


def auth_headers(server):
    key = getattr(server, "api_key", None)
    return {"Authorization": f"Bearer {key}"} if key else {}


def metric(server, name):
    r = subprocess.run(["curl", "-sS", "--cacert", str(server.cert), f"https://127.0.0.1:{server.port}/metrics",
                        *sum((["-H", f"{k}: {v}"] for k, v in auth_headers(server).items()), [])],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} missing from /metrics")


def test_https_and_wss_with_a_verified_certificate(tls_server):
    s = tls_server
    r = subprocess.run(["curl", "-sS", "--cacert", str(s.cert), f"https://127.0.0.1:{s.port}/healthz"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "ok"

    context = ssl.create_default_context(cafile=str(s.cert))

    async def main():
        async with websockets.connect(f"wss://127.0.0.1:{s.port}/v1/agents", ssl=context,
                                      additional_headers=auth_headers(s)) as ws:
            async def call(**event):
                await ws.send(json.dumps(event))
                return json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))

            sid = (await call(type="session.create"))["session_id"]
            await call(type="input.append", session_id=sid, items=[{"type": "message", "content": "Hello over TLS"}])
            assert (await call(type="response.create", session_id=sid, max_output_tokens=5))["type"] == "response.created"
            while True:
                e = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                if e["type"] == "response.completed":
                    assert e["usage"]["output_tokens"] >= 1
                    break
                assert e["type"] in ("response.output_text.delta", "response.reasoning.delta"), e

    asyncio.run(main())

    client = openai.OpenAI(base_url=f"https://127.0.0.1:{s.port}/v1", api_key=getattr(s, "api_key", None) or "unused",
                           http_client=openai.DefaultHttpxClient(verify=context))
    chunks = list(client.chat.completions.create(model=client.models.list().data[0].id, max_tokens=4, stream=True,
                                                 messages=[{"role": "user", "content": "Hi"}]))
    assert chunks and chunks[-1].choices[0].finish_reason in ("length", "stop")


def test_plain_http_and_untrusting_clients_are_refused_and_the_server_keeps_serving(tls_server):
    s = tls_server
    before = metric(s, "hippo_tls_handshake_failures_total")
    plain = subprocess.run(["curl", "-sS", "-m", "10", f"http://127.0.0.1:{s.port}/healthz"],
                           capture_output=True, text=True, timeout=30)
    assert plain.returncode != 0 or "ok" not in plain.stdout
    untrusting = subprocess.run(["curl", "-sS", "-m", "10", f"https://127.0.0.1:{s.port}/healthz"],
                                capture_output=True, text=True, timeout=30)
    assert untrusting.returncode != 0  # a self-signed certificate the client was not given
    assert metric(s, "hippo_tls_handshake_failures_total") >= before + 1
    ok = subprocess.run(["curl", "-sS", "--cacert", str(s.cert), f"https://127.0.0.1:{s.port}/healthz"],
                        capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and json.loads(ok.stdout)["status"] == "ok"


def test_hippo_chat_over_wss(tls_server):
    s = tls_server
    url = f"wss://127.0.0.1:{s.port}/v1/agents"
    r = subprocess.run([HIPPO, "chat", "--url", url, "--ca-file", str(s.cert), "--api-key", s.api_key,
                        "--max-output-tokens", "4"], input="Hello over TLS\n/sessions\n", capture_output=True,
                       encoding="utf-8", errors="replace", env=clean_env(), timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "[usage]" in r.stdout and "[session]" in r.stdout, r.stdout
    # The certificate is checked: without its CA the chat refuses to talk.
    r = subprocess.run([HIPPO, "chat", "--url", url, "--api-key", s.api_key], input="Hi\n",
                       capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT)
    assert r.returncode != 0, r.stdout
    assert "certificate verify failed" in r.stderr and "--ca-file" in r.stderr, r.stderr
    r = subprocess.run([HIPPO, "chat", "--url", url, "--ca-file", str(s.workdir / "missing.pem")], input="Hi\n",
                       capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT)
    assert r.returncode != 0 and "--ca-file" in r.stderr and "missing.pem" in r.stderr, r.stderr


def test_bad_tls_settings_are_clear_errors(tmp_path):
    checkpoint = make_checkpoint(tmp_path)
    cert, key = make_certificate(tmp_path)
    other_cert, _ = make_certificate(tmp_path, "other")
    cases = [
        (["--tls-cert", str(cert)], "TLS needs both --tls-cert and --tls-key"),
        (["--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(key)], "--tls-cert"),
        (["--tls-cert", str(other_cert), "--tls-key", str(key)], "private key of --tls-cert"),
    ]
    for args, message in cases:
        r = subprocess.run([HIPPO, "serve", "--port", "0", "--model", str(checkpoint), "--db", str(tmp_path / "h.db"),
                            *args], capture_output=True, text=True, env=clean_env(), timeout=120, cwd=tmp_path)
        assert r.returncode != 0, (args, r.stdout)
        assert message in r.stderr, (args, r.stderr)
