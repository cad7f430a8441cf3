#!/usr/bin/env python3
"""Sessions outlive the server: start `hippo serve`, talk in a session, snapshot it, stop the server
with SIGTERM (it snapshots every resident session on the way out), start it again on the same
database, resume the session and go on. The context survives (the same n_tokens), and the first
response after the restart reports it all as cached_tokens: restored from the snapshot, not
prefilled again.

    .venv/bin/python examples/snapshot_resume.py --hippo build/release/hippo

It starts and stops the server itself, on a free port and its own database (in a temporary folder
unless --db is given), and makes its own API key in that database with `hippo key create` (unless
--api-key is given): $HIPPO_API_KEY, a key of another server's database, plays no part. Without
--model the server serves the embedded default model (models/default in the working folder, which
it writes if missing). Exit status 0 when everything above held, 1 when not.
"""
import argparse
import asyncio
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import websockets

from hippo_agents import CLIENT_ERRORS, AgentsClient, format_usage

HERE = pathlib.Path(__file__).resolve().parent


def default_hippo():
    for candidate in (os.environ.get("HIPPO_BIN"), shutil.which("hippo"), HERE.parent / "build" / "release" / "hippo"):
        if candidate and pathlib.Path(candidate).is_file():
            return str(candidate)
    return "hippo"


class HippoServer:
    """`hippo serve --port 0` as a child process; the port from its `listening on` line."""

    def __init__(self, hippo, db, model=None, extra_args=(), log_path=None):
        args = [hippo, "serve", "--port", "0", "--db", str(db), *(["--model", str(model)] if model else []),
                *extra_args]
        self.log = open(log_path, "w") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()  # the first stdout line, once the port is bound
        m = re.search(r"listening on https?://(\S+)", line)
        if not m:
            self.proc.wait(timeout=60)
            tail = ""
            if log_path:
                self.log.close()
                tail = "; its log ends:\n" + "".join(open(log_path).readlines()[-5:])
            raise RuntimeError(f"{hippo} serve exited with {self.proc.returncode} before listening{tail}")
        self.url = f"ws://{m.group(1)}/v1/agents"

    def stop(self, timeout=60):
        """SIGTERM: the server snapshots every resident session and exits 0."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        if self.log is not subprocess.DEVNULL:
            self.log.close()
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


async def first_life(url, api_key, out):
    async with AgentsClient.connect(url, api_key) as client:
        sid = await client.create_session(instructions="You are a hippo with a long memory.")
        out(f"[session] {sid} created")
        await client.say(sid, "Remember this: my boat is called Nile Runner and it is painted green. " * 4)
        first = await client.respond(sid, max_output_tokens=16)
        out(f"[turn 1] {first.text.strip()!r}; {format_usage(first.usage)}")
        view = await client.snapshot(sid)
        out(f"[snapshot] status {view['status']}, n_tokens {view['n_tokens']}, pending_tokens {view['pending_tokens']}")
        return sid, view


async def second_life(url, api_key, sid, out):
    async with AgentsClient.connect(url, api_key) as client:
        view = await client.resume(sid)
        out(f"[resumed] status {view['status']}, n_tokens {view['n_tokens']}, pending_tokens {view['pending_tokens']}")
        await client.say(sid, "What is my boat called?")
        answer = await client.respond(sid, max_output_tokens=16)
        out(f"[turn 2] {answer.text.strip()!r}; {format_usage(answer.usage)}")
        after = await client.snapshot(sid)
        out(f"[snapshot] status {after['status']}, n_tokens {after['n_tokens']}")
        return view, answer, after


def create_key(hippo, db, tenant="walkthrough"):
    """`hippo key create`: the key is printed once (stdout); the database keeps only its hash."""
    env = {k: v for k, v in os.environ.items() if k != "HIPPO_JSON"}  # the bare key on stdout
    r = subprocess.run([hippo, "key", "create", "--tenant", tenant, "--label", "snapshot_resume", "--db", str(db)],
                       capture_output=True, text=True, timeout=60, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"hippo key create failed: {r.stderr.strip()}")
    return r.stdout.strip()


def run(hippo, model, db, api_key=None, serve_args=(), log_dir=None, out=print):
    """The walkthrough; returns (ok, facts)."""
    log_dir = pathlib.Path(log_dir or pathlib.Path(db).parent)
    if api_key is None:
        api_key = create_key(hippo, db)
        out(f"[key] created an API key for tenant walkthrough in {db}")
    server = HippoServer(hippo, db, model, serve_args, log_dir / "serve-1.log")
    try:
        out(f"[server] listening at {server.url} (database {db})")
        sid, snap = asyncio.run(first_life(server.url, api_key, out))
        started = time.monotonic()
        code = server.stop()
        out(f"[server] stopped by SIGTERM: exit code {code} after {time.monotonic() - started:.2f} s")
    finally:
        server.kill()
    server = HippoServer(hippo, db, model, serve_args, log_dir / "serve-2.log")
    try:
        out(f"[server] restarted at {server.url} on the same database")
        resumed, answer, after = asyncio.run(second_life(server.url, api_key, sid, out))
        code2 = server.stop()
    finally:
        server.kill()
    facts = {"session_id": sid, "stop_code": code, "snapshot_n_tokens": snap["n_tokens"],
             "resumed_n_tokens": resumed["n_tokens"], "resumed_status": resumed["status"],
             "cached_tokens": answer.usage["cached_tokens"], "input_tokens": answer.usage["input_tokens"],
             "n_tokens_after": after["n_tokens"], "second_stop_code": code2}
    checks = [
        (code == 0 and code2 == 0, "the server exits 0 on SIGTERM"),
        (resumed["n_tokens"] == snap["n_tokens"] > 0,
         f"the context survived the restart: n_tokens {resumed['n_tokens']} == {snap['n_tokens']}"),
        (answer.usage["cached_tokens"] >= resumed["n_tokens"],
         f"no re-prefill: cached_tokens {answer.usage['cached_tokens']} >= the resumed {resumed['n_tokens']} tokens"),
        (after["n_tokens"] > resumed["n_tokens"], f"the session grew on: n_tokens {after['n_tokens']}"),
    ]
    for ok, what in checks:
        out(f"[{'ok' if ok else 'FAILED'}] {what}")
    return all(ok for ok, _ in checks), facts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hippo", default=default_hippo(), help="the hippo binary (default: $HIPPO_BIN, PATH, "
                                                                "build/release/hippo)")
    parser.add_argument("--model", help="checkpoint folder (default: the server's embedded default model)")
    parser.add_argument("--db", help="session database (default: one in a temporary folder)")
    # Not $HIPPO_API_KEY: that is a key of the user's own server's database, not of this one's.
    parser.add_argument("--api-key", help="API key for the client, a key of the walkthrough's --db (default: the "
                                          "walkthrough makes one with `hippo key create` in its database)")
    parser.add_argument("--serve-arg", action="append", default=[], help="an extra argument for `hippo serve`")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hippo-snapshot-resume-") as tmp:
        db = args.db or str(pathlib.Path(tmp) / "sessions.db")
        try:
            ok, _ = run(args.hippo, args.model, db, args.api_key, args.serve_arg, log_dir=tmp)
        except (RuntimeError, *CLIENT_ERRORS) as e:
            if args.api_key and isinstance(e, websockets.InvalidStatus) and e.response.status_code == 401:
                print(f"snapshot_resume: the walkthrough's server refused --api-key (HTTP 401): it must be a key of "
                      f"its database {db}; leave --api-key out and the walkthrough makes one there", file=sys.stderr)
            else:
                print(f"snapshot_resume: {e}", file=sys.stderr)
            return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
