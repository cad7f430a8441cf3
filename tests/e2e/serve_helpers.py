"""A real `hippo serve` process for end-to-end tests: started on a free port (--port 0, the port read
from its `listening on` line), its stdout and stderr in files, stopped with a signal. Before it
starts, `hippo key create` makes an API key in the same database (server.api_key); server.get,
server.request and server.connect send it as `Authorization: Bearer <key>`."""
import asyncio
import json
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import websockets

HIPPO = os.environ["HIPPO_BIN"]
TIMEOUT = 60


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIPPO_")}
    env.update(extra or {})
    return env


def make_checkpoint(root: pathlib.Path, seed=0) -> pathlib.Path:
    out = root / "tiny"
    r = subprocess.run([HIPPO, "model", "init", "--preset", "tiny", "--seed", str(seed), "--out", str(out),
                        "--tokenizer", os.environ["HIPPO_TOKENIZER_DIR"]],
                       capture_output=True, text=True, env=clean_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def create_key(workdir: pathlib.Path, tenant, *flags, db_args=(), env=None):
    """`hippo key create` (run where the server runs, with its --db or HIPPO_DB): the printed key."""
    r = subprocess.run([HIPPO, "key", "create", "--tenant", tenant, *db_args, *flags], capture_output=True, text=True,
                       cwd=workdir, env=clean_env(env), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "not shown again" in r.stderr
    return r.stdout.strip()


DEFAULT = object()  # "the server's own key" where a key argument is optional


class Server:
    def __init__(self, workdir: pathlib.Path, *args, env=None, name="server", tenant="test", make_key=True):
        self.workdir = workdir
        self.env = env
        self.db_args = tuple(args[args.index("--db"):args.index("--db") + 2]) if "--db" in args else ()
        self.stdout_path = workdir / f"{name}.out"
        self.stderr_path = workdir / f"{name}.err"
        self.api_key = self.new_key(tenant) if make_key else None
        self._out = open(self.stdout_path, "w")
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([HIPPO, "serve", "--port", "0", *args], stdout=self._out, stderr=self._err,
                                     cwd=workdir, env=clean_env(env))
        self.port = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m = re.search(r"listening on https?://[^:]+:(\d+)", self.stdout_path.read_text())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                raise AssertionError(f"hippo serve exited with {self.proc.returncode}: {self.log()}")
            time.sleep(0.05)
        assert self.port, f"hippo serve did not say where it listens: {self.log()}"

    @property
    def http(self):
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self):
        return f"ws://127.0.0.1:{self.port}/v1/agents"

    def log(self):
        return self.stderr_path.read_text()

    def new_key(self, tenant, *flags):
        """Another key in the server's database (a new tenant when the name is new)."""
        return create_key(self.workdir, tenant, *flags, db_args=self.db_args, env=self.env)

    def key_command(self, *args):
        """`hippo key ...` on the server's database."""
        return subprocess.run([HIPPO, "key", *args, *self.db_args], capture_output=True, text=True, cwd=self.workdir,
                              env=clean_env(self.env), timeout=60)

    def auth_headers(self, key=DEFAULT):
        key = self.api_key if key is DEFAULT else key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def get(self, path, key=DEFAULT):
        req = urllib.request.Request(self.http + path, headers=self.auth_headers(key))
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()

    def request(self, method, path, body=None, key=DEFAULT, headers=None):
        """Any request; 4xx and 5xx answers are returned, not raised: (status, headers, parsed JSON or text)."""
        all_headers = {**self.auth_headers(key), **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.http + path, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, hdrs, text = r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            status, hdrs, text = e.code, e.headers, e.read().decode()
        try:
            return status, hdrs, json.loads(text)
        except ValueError:
            return status, hdrs, text

    def connect(self, key=DEFAULT, **kwargs):
        """A WebSocket connection to /v1/agents with the key (websockets.connect's arguments pass through)."""
        return websockets.connect(self.ws, additional_headers=self.auth_headers(key), **kwargs)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        self._out.close()
        self._err.close()
        return code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        self._err.close()


class Client:
    """One WebSocket connection speaking the agents protocol."""

    def __init__(self, ws):
        self.ws = ws
        self.seqs = []

    async def send(self, **event):
        await self.ws.send(json.dumps(event))

    async def recv(self):
        event = json.loads(await asyncio.wait_for(self.ws.recv(), TIMEOUT))
        self.seqs.append(event["seq"])
        return event

    async def expect(self, type_, **event):
        await self.send(**event)
        reply = await self.recv()
        assert reply["type"] == type_, reply
        return reply

    async def create_session(self, **fields):
        return (await self.expect("session.created", type="session.create", **fields))["session_id"]

    async def append(self, sid, text):
        return await self.expect("input.appended", type="input.append", session_id=sid,
                                 items=[{"type": "message", "content": text}])

    async def fresh_answer(self, prompt, **response):
        """A new session's response to one user message: its events up to completed/failed."""
        sid = await self.create_session()
        await self.append(sid, prompt)
        await self.expect("response.created", type="response.create", session_id=sid, **response)
        return await self.until_done()

    async def until_done(self, sid=None):
        """Events up to the response's completed/failed event (of session sid, when given)."""
        events = []
        while True:
            e = await self.recv()
            events.append(e)
            if e["type"] in ("response.completed", "response.failed") and (sid is None or e["session_id"] == sid):
                return events


def output_text(events):
    """The streamed answer text of a response's events."""
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def run(coro):
    return asyncio.run(coro)


def wait_until(predicate, seconds):
    """Polls predicate every 20 ms for up to `seconds`; its last answer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def metric(server, name):
    _, _, text = server.get("/metrics")
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} missing from /metrics")
