#!/usr/bin/env python3
"""Time to first token of short chat completions while another request prefills a long prompt.

Starts `hippo serve` (HIPPO_BIN) on a fresh tiny checkpoint, as the end-to-end tests do
(tests/e2e/serve_helpers.py), sends one prompt of --words words (about two tokens each) with
max_tokens 1 on a raw socket, and 2 s into its prefill sends --small streamed requests of about 200
tokens one after another, printing each one's time to its first content chunk; then waits for the
long one. docs/BENCHMARKS.md records a run.

    HIPPO_BIN=$PWD/build/release/hippo HIPPO_TOKENIZER_DIR=$PWD/.cache/deepseek-v4-tokenizer \\
        .venv/bin/python scripts/bench_prefill_fairness.py --words 64000
"""
import argparse
import json
import pathlib
import socket
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "e2e"))
import openai  # noqa: E402
from serve_helpers import Server, make_checkpoint, metric, wait_until  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=64000, help="words of the long prompt (~2 tokens each)")
    parser.add_argument("--small", type=int, default=3, help="short requests, one after another")
    args = parser.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hippo-fairness-"))
    checkpoint = make_checkpoint(tmp)
    with Server(tmp, "--model", str(checkpoint), "--db", str(tmp / "hippo.db")) as s:
        big = " ".join(f"w{i % 1000}" for i in range(args.words))
        body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": big}], "max_tokens": 1}).encode()
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=3600)
        sock.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {s.api_key}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
        started = time.monotonic()
        if not wait_until(lambda: metric(s, "hippo_running_responses") == 1, 30):
            sys.exit("the long request never started")
        time.sleep(2)
        client = openai.OpenAI(base_url=s.http + "/v1", api_key=s.api_key, max_retries=0, timeout=60)
        words = " ".join(f"word{i}" for i in range(100))
        for i in range(args.small):
            t = time.monotonic()
            first = None
            for chunk in client.chat.completions.create(
                    model="tiny", messages=[{"role": "user", "content": f"{i} {words}"}], max_tokens=4, stream=True,
                    stream_options={"include_usage": True}):
                if first is None and chunk.choices and chunk.choices[0].delta.content:
                    first = time.monotonic() - t
                if chunk.usage:
                    first = first if first is not None else time.monotonic() - t
                    print(f"short request {i + 1}: {chunk.usage.prompt_tokens} prompt tokens, first token "
                          f"{first:.3f} s (long prefill still running: {metric(s, 'hippo_running_responses') >= 1})")
        answer = b""
        while b'"usage"' not in answer:
            piece = sock.recv(65536)
            if not piece:
                break
            answer += piece
        sock.close()
        usage = json.loads(answer.split(b"\r\n\r\n", 1)[1])["usage"]
        print(f"long request: {usage['prompt_tokens']} prompt tokens, answered {time.monotonic() - started:.1f} s "
              f"after it was sent")
        s.stop()


if __name__ == "__main__":
    main()
