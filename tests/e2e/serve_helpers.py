"""A real `hippo serve` process for end-to-end tests: started on a free port (--port 0, the port read
from its `listening on` line), its stdout and stderr in files, stopped with a signal."""
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.request

HIPPO = os.environ["HIPPO_BIN"]


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


class Server:
    def __init__(self, workdir: pathlib.Path, *args, env=None, name="server"):
        self.workdir = workdir
        self.stdout_path = workdir / f"{name}.out"
        self.stderr_path = workdir / f"{name}.err"
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

    def get(self, path):
        with urllib.request.urlopen(self.http + path, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()

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
