"""Bad clients at the TCP level against a real `hippo serve`: half-sent requests, binary garbage,
a flood of idle connections. Each gets a clear answer or a closed socket, and the server keeps
serving everyone else, promptly, without leaking connections."""
import errno
import os
import socket
import time

import pytest

from serve_helpers import Server, make_checkpoint, metric


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("abuse")
    checkpoint = make_checkpoint(work)
    with Server(work, "--model", str(checkpoint), "--db", str(work / "hippo.db")) as s:
        yield s
        assert s.stop() == 0, s.log()


def raw(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def healthy(server, within=5.0):
    started = time.monotonic()
    status, _, _ = server.get("/healthz")
    return status == 200 and time.monotonic() - started < within


def wait_for_open_connections(server, at_most, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if metric(server, "hippo_connections_open") <= at_most:
            return True
        time.sleep(0.05)
    return False


def test_a_half_sent_request_blocks_nobody(server):
    half = raw(server)
    half.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\":")
    headers_only = raw(server)
    headers_only.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    try:
        assert healthy(server)
        assert healthy(server)
    finally:
        half.close()
        headers_only.close()


def test_binary_garbage_gets_400_or_a_closed_socket(server):
    for garbage in (os.urandom(4096), b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64),  # a TLS hello
                    b"GET / HTTP/9.9\r\n\r\n", b"\x00" * 100 + b"\r\n\r\n", b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n"):
        s = raw(server)
        answer = b""
        try:
            s.sendall(garbage)
            s.shutdown(socket.SHUT_WR)
            while chunk := s.recv(65536):
                answer += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass  # closed before all of it was sent or read
        except OSError as e:
            if e.errno != errno.ENOTCONN:  # the server had already closed it when we shut down our side
                raise
        finally:
            s.close()
        assert answer == b"" or answer.startswith(b"HTTP/1.1 4"), answer[:200]
        assert healthy(server)


def test_a_flood_of_idle_connections_is_served_and_released(server):
    baseline = metric(server, "hippo_connections_open")
    flood = [raw(server) for _ in range(300)]
    try:
        assert healthy(server, within=2.0)
        assert metric(server, "hippo_connections_open") >= baseline + 300
    finally:
        for s in flood:
            s.close()
    assert wait_for_open_connections(server, baseline + 1), metric(server, "hippo_connections_open")
    assert healthy(server)


def test_a_close_frame_with_an_undefined_code_is_answered_with_1002(server):
    """RFC 6455 §7.4: codes of 5000 and above are undefined; a defined one (4000, private use) is echoed."""
    def close_with(code):
        s = raw(server)
        try:
            s.sendall(("GET /v1/agents HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                       f"Authorization: Bearer {server.api_key}\r\n\r\n").encode())
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += s.recv(4096)
            assert answer.startswith(b"HTTP/1.1 101"), answer
            frames = answer.split(b"\r\n\r\n", 1)[1]
            mask = os.urandom(4)
            payload = code.to_bytes(2, "big") + b"bye"
            s.sendall(bytes([0x88, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
            while len(frames) < 4:
                chunk = s.recv(4096)
                if not chunk:
                    break
                frames += chunk
            assert frames[0] == 0x88, frames  # a close frame
            return int.from_bytes(frames[2:4], "big")
        finally:
            s.close()

    assert close_with(5000) == 1002
    assert close_with(4000) == 4000
    assert healthy(server)
