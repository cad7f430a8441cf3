"""Backpressure against a real `hippo serve`: a client that stops reading mid-response never makes
the server queue without bound. Once more than --max-outbound-bytes wait unsent beyond the kernel's
socket buffer (--socket-send-buffer here, so that a short answer overflows both), the server closes
that connection (1008), counts it, keeps serving everyone else, and the response runs on: the client
reconnects, resumes from the last sequence number it read, and gets exactly the answer it would
have had."""
import asyncio
import base64
import json
import os
import socket
import struct
import time

from serve_helpers import Client, Server, make_checkpoint, metric, output_text, run

PROMPT = "Tell me everything about hippos."
TOKENS = 1500
OUTBOUND_LIMIT = 8192


class RawWebSocket:
    """A WebSocket client on a plain socket with a tiny receive buffer, so that not reading shows up
    at the server at once (a library client would keep reading into its own queue)."""

    def __init__(self, server):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        self.sock.settimeout(30)
        self.sock.connect(("127.0.0.1", server.port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           f"Authorization: Bearer {server.api_key}\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        self.received = 0  # payload bytes of the frames read

    def _recv(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError
        return chunk

    def send(self, **event):
        payload = json.dumps(event).encode()
        assert len(payload) < 65536
        length = bytes([0x80 | len(payload)]) if len(payload) < 126 else bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        mask = os.urandom(4)
        self.sock.sendall(b"\x81" + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _take(self, n):
        while len(self.buffer) < n:
            self.buffer += self._recv()
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def frame(self):
        """(opcode, payload) of the next frame (the server's frames are unmasked and unfragmented)."""
        b0, b1 = self._take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._take(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._take(8))[0]
        payload = self._take(n)
        self.received += n
        return b0 & 0x0F, payload

    def event(self):
        opcode, payload = self.frame()
        assert opcode == 1, (opcode, payload)
        return json.loads(payload)


def reference_answer(server):
    async def main():
        async with server.connect() as ws:
            return await Client(ws).fresh_answer(PROMPT, max_output_tokens=TOKENS)

    return run(main())


def test_a_client_that_stops_reading_is_closed_and_resumes_without_loss(tmp_path):
    checkpoint = make_checkpoint(tmp_path)
    # The uninterrupted answer (greedy), from a server with the default limits: on the small ones
    # below, a normal client that the test machine stalls for a moment could be closed too.
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(tmp_path / "reference.db"), name="reference") as server:
        expected = reference_answer(server)
        assert server.stop() == 0, server.log()
    assert expected[-1]["type"] == "response.completed", expected[-1]
    assert expected[-1]["finish_reason"] == "length", "the reference answer must outlast the slow reader's queue"

    with Server(tmp_path, "--model", str(checkpoint), "--db", str(tmp_path / "hippo.db"),
                "--max-outbound-bytes", str(OUTBOUND_LIMIT), "--socket-send-buffer", "16KiB",
                "--stream-grace", "120") as server:
        slow = RawWebSocket(server)
        slow.send(type="session.create")
        sid = slow.event()["session_id"]
        slow.send(type="input.append", session_id=sid, items=[{"type": "message", "content": PROMPT}])
        assert slow.event()["type"] == "input.appended"
        slow.send(type="response.create", session_id=sid, max_output_tokens=TOKENS)
        created = slow.event()
        assert created["type"] == "response.created", created
        # Now it reads nothing. Within the response's length the server gives up on it.
        deadline = time.monotonic() + 120
        while metric(server, "hippo_slow_client_closes_total") < 1:
            assert time.monotonic() < deadline, "the server never closed the client that stopped reading"
            time.sleep(0.1)

        # Everyone else is served meanwhile.
        async def other_client():
            async with server.connect() as ws:
                c = Client(ws)
                other = await c.create_session()
                await c.append(other, "Hello.")
                await c.expect("response.created", type="response.create", session_id=other, max_output_tokens=3)
                return (await c.until_done())[-1]

        assert run(other_client())["type"] == "response.completed"

        # What reaches the slow client is bounded: its frames in order, then the close (1008).
        events, close = [], None
        while close is None:
            opcode, payload = slow.frame()
            if opcode == 8:
                close = payload
            else:
                events.append(json.loads(payload))
        slow.sock.close()
        assert struct.unpack(">H", close[:2])[0] == 1008 and b"too slowly" in close, close
        seqs = [e["session_seq"] for e in events]
        assert seqs == list(range(created["session_seq"] + 1, created["session_seq"] + 1 + len(events)))
        assert events[-1]["type"] == "response.output_text.delta", "the close came before the response ended"
        assert slow.received < 4 << 20, slow.received

        # The response ran on; a new connection resumes after the last event read and loses nothing.
        async def resume():
            async with server.connect() as ws:
                c = Client(ws)
                await c.expect("session.resumed", type="session.resume", session_id=sid, after_seq=seqs[-1])
                return await c.until_done(sid)

        rest = run(resume())
        assert [e["session_seq"] for e in rest] == list(range(seqs[-1] + 1, seqs[-1] + 1 + len(rest)))
        assert rest[-1]["type"] == "response.completed" and rest[-1]["finish_reason"] == "length"
        assert output_text(events) + output_text(rest) == output_text(expected)
        assert "reads too slowly" in server.log()
        assert server.stop() == 0, server.log()
