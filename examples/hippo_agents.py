"""A small asyncio client of `hippo serve`'s agents protocol (docs/protocol.md), shared by the
examples. One `AgentsClient` is one WebSocket connection; any number of sessions and concurrent
responses may share it: a reader task hands each server event to the request it answers (by
`event_id`), so `await client.respond(a)` and `await client.respond(b)` can run side by side.

    async with AgentsClient.connect("ws://127.0.0.1:8080/v1/agents", api_key=None) as client:
        sid = await client.create_session(instructions="You are terse.")
        await client.say(sid, "Hello!")
        response = await client.respond(sid, max_output_tokens=32)
        print(response.text, response.usage)

Only the `websockets` library (scripts/requirements.txt) is needed.
"""
import argparse
import asyncio
import contextlib
import itertools
import json
import os
from dataclasses import dataclass, field

import websockets

DEFAULT_URL = "ws://127.0.0.1:8080/v1/agents"


class ProtocolError(Exception):
    """The server answered with an `error` event or a `response.failed`."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# What a client may meet: no server, a refused upgrade (e.g. HTTP 401 without a valid API key), a
# lost connection, an error event.
CLIENT_ERRORS = (OSError, ConnectionError, websockets.WebSocketException, ProtocolError)

# What a user runs, from the folder `hippo serve` runs in (the repository root after README.md's run
# command), to start a server and to give the examples a key (examples/README.md has both).
START_COMMAND = "build/release/hippo serve"
KEY_COMMAND = "export HIPPO_API_KEY=$(build/release/hippo key create --tenant default --label examples)"


def _server_message(response) -> str:
    """The `error.message` of a refused upgrade's JSON body, or its status line."""
    try:
        return json.loads(bytes(response.body))["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return response.reason_phrase or ""


def explain(error: Exception, url: str, api_key=None) -> str:
    """What went wrong talking to the server at url, and what to do about it."""
    if isinstance(error, websockets.InvalidStatus):
        status = error.response.status_code
        said = _server_message(error.response)
        if status == 401 and not api_key:
            return (f"{url}: the server wants an API key (HTTP 401: {said}).\n"
                    f"Make one, from the folder the server runs in (where its hippo.db is), and export it:\n"
                    f"    {KEY_COMMAND}\n"
                    f"(add --db FILE to `key create` if the server runs with --db FILE), or export the key "
                    f"`hippo serve` printed on its first start as HIPPO_API_KEY, or pass --api-key KEY.")
        if status == 401:
            return (f"{url}: the server refused the API key (HTTP 401: {said}). A key works only on the server "
                    f"whose database made it. Make one there, from the folder the server runs in:\n"
                    f"    {KEY_COMMAND}")
        return f"{url}: the server refused the connection: HTTP {status}" + (f": {said}" if said else "")
    if isinstance(error, ConnectionRefusedError):
        return (f"{url}: no server is listening there (connection refused).\n"
                f"Start one, in another terminal from the repository root (README.md):\n"
                f"    {START_COMMAND}\n"
                f"or point --url (or $HIPPO_URL) at your server.")
    if isinstance(error, OSError):
        return f"{url}: cannot connect: {error.strerror or error}"
    return f"{url}: {error}"


@dataclass
class ToolCall:
    call_id: str
    name: str
    arguments: str  # the arguments as JSON text, as the model wrote them


@dataclass
class Response:
    response_id: str = ""
    text: str = ""
    reasoning: str = ""
    calls: list = field(default_factory=list)  # ToolCall
    finish_reason: str = ""
    usage: dict = field(default_factory=dict)


def add_connection_arguments(parser: argparse.ArgumentParser):
    """--url and --api-key, defaulting to HIPPO_URL / HIPPO_API_KEY."""
    parser.add_argument("--url", default=os.environ.get("HIPPO_URL", DEFAULT_URL),
                        help=f"the server's agents endpoint (default: $HIPPO_URL or {DEFAULT_URL})")
    parser.add_argument("--api-key", default=os.environ.get("HIPPO_API_KEY"),
                        help="API key, sent as `Authorization: Bearer KEY` (default: $HIPPO_API_KEY; make one where "
                             "the server runs: build/release/hippo key create --tenant default)")


def format_usage(usage: dict) -> str:
    return (f"input_tokens {usage.get('input_tokens')} (cached {usage.get('cached_tokens')}), "
            f"output_tokens {usage.get('output_tokens')}, first token {usage.get('first_token_ms', 0):.1f} ms")


class AgentsClient:
    def __init__(self, ws):
        self.ws = ws
        self._ids = itertools.count(1)
        self._waiting = {}  # event_id -> asyncio.Queue of its server events
        self._last_seq = 0
        self._closed = None  # the exception that ended the connection
        self._reader = asyncio.create_task(self._read())

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, url=DEFAULT_URL, api_key=None):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
            client = cls(ws)
            try:
                yield client
            finally:
                client._reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await client._reader

    async def _read(self):
        try:
            async for frame in self.ws:
                event = json.loads(frame)
                seq = event.get("seq")
                if seq != self._last_seq + 1:  # the protocol numbers every server event, with no gaps
                    raise ProtocolError("seq_gap", f"event seq {seq} after {self._last_seq}")
                self._last_seq = seq
                queue = self._waiting.get(event.get("event_id"))
                if queue is not None:
                    queue.put_nowait(event)
                elif event.get("type") == "error":  # an error that answers no request of ours
                    print(f"[server error] {event.get('code')}: {event.get('message')}")
        except Exception as e:  # noqa: BLE001 - handed to every waiting request below
            self._closed = e
        else:
            self._closed = ConnectionError("the server closed the connection")
        for queue in self._waiting.values():
            queue.put_nowait(None)

    async def _start(self, event):
        """Sends an event with a fresh event_id; returns the queue its answers arrive in."""
        if self._closed:
            raise self._closed
        event_id = f"e{next(self._ids)}"
        queue = asyncio.Queue()
        self._waiting[event_id] = queue
        await self.ws.send(json.dumps({**event, "event_id": event_id}))
        return event_id, queue

    async def _next(self, queue):
        event = await queue.get()
        if event is None:
            raise self._closed
        return event

    async def request(self, event, expect):
        """Sends one event and returns the server event of type `expect` that answers it."""
        event_id, queue = await self._start(event)
        try:
            reply = await self._next(queue)
        finally:
            del self._waiting[event_id]
        if reply["type"] == "error":
            raise ProtocolError(reply["code"], reply["message"])
        assert reply["type"] == expect, reply
        return reply

    async def create_session(self, **settings):
        """settings: instructions, tools, tool_choice, thinking, reasoning_effort."""
        reply = await self.request({"type": "session.create", **settings}, "session.created")
        return reply["session_id"]

    async def resume(self, session_id):
        return await self.request({"type": "session.resume", "session_id": session_id}, "session.resumed")

    async def snapshot(self, session_id):
        return await self.request({"type": "session.snapshot", "session_id": session_id}, "session.snapshotted")

    async def close_session(self, session_id):
        return await self.request({"type": "session.close", "session_id": session_id}, "session.closed")

    async def append(self, session_id, items):
        return await self.request({"type": "input.append", "session_id": session_id, "items": items},
                                  "input.appended")

    async def say(self, session_id, text):
        return await self.append(session_id, [{"type": "message", "content": text}])

    async def respond(self, session_id, on_text=None, **options):
        """Runs one response to its end. options: max_output_tokens, temperature, top_p, top_k, min_p,
        seed, stop. on_text(delta) sees the answer as it streams."""
        event_id, queue = await self._start({"type": "response.create", "session_id": session_id, **options})
        response = Response()
        try:
            while True:
                e = await self._next(queue)
                kind = e["type"]
                if kind == "error":
                    raise ProtocolError(e["code"], e["message"])
                if kind == "response.created":
                    response.response_id = e["response_id"]
                elif kind == "response.output_text.delta":
                    response.text += e["delta"]
                    if on_text:
                        on_text(e["delta"])
                elif kind == "response.reasoning.delta":
                    response.reasoning += e["delta"]
                elif kind == "response.function_call.done":
                    response.calls.append(ToolCall(e["call_id"], e["name"], e["arguments"]))
                elif kind == "response.completed":
                    response.finish_reason = e["finish_reason"]
                    response.usage = e["usage"]
                    return response
                elif kind == "response.failed":
                    raise ProtocolError(e["error"]["code"], e["error"]["message"])
        finally:
            del self._waiting[event_id]
