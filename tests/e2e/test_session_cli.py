"""End-to-end tests of `hippo session ...` through the built binary, on databases written by the
real store (HIPPO_MAKE_SESSION_DB, a fixture built from tests/storage/make_session_db.cpp)."""
import json
import os
import sqlite3
import subprocess

import pytest

HIPPO = os.environ["HIPPO_BIN"]
MAKE_DB = os.environ["HIPPO_MAKE_SESSION_DB"]


def hippo(*args, env=None, cwd=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("HIPPO_")}
    full_env.update(env or {})
    return subprocess.run([HIPPO, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=120)


def hippo_json(*args, **kwargs):
    r = hippo(*args, "--json", **kwargs)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "hippo.db"
    subprocess.run([MAKE_DB, str(path), "agent-1", "40000", "2"], check=True, timeout=120)
    subprocess.run([MAKE_DB, str(path), "agent-2", "3000"], check=True, timeout=120)
    return path


def test_list_and_show(db):
    sessions = hippo_json("session", "list", "--db", str(db))
    assert [s["id"] for s in sessions] == ["agent-1", "agent-2"]
    assert sessions[0]["n_tokens"] == 40000
    assert 0 < sessions[0]["stored_bytes"] < sessions[0]["raw_bytes"]

    show = hippo_json("session", "show", "agent-1", "--db", str(db))
    assert show["messages"] == 2
    assert [s["n_tokens"] for s in show["snapshots"]] == [40000, 20000]
    streams = {s["name"]: s for s in show["snapshots"][0]["streams"]}
    assert streams["kv.layer20"]["n_entries"] == 40000
    assert streams["kv.layer2"]["n_entries"] == 20000
    assert streams["token_ids"]["entry_bytes"] == 4

    table = hippo("session", "list", "--db", str(db))
    assert table.returncode == 0
    assert "agent-1" in table.stdout and "40000" in table.stdout
    text = hippo("session", "show", "agent-1", "--db", str(db))
    assert "kv.layer20" in text.stdout and "byte_plane" in text.stdout


def test_db_from_environment(db, tmp_path):
    r = hippo("session", "list", "--json", env={"HIPPO_DB": str(db)}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == 2


def test_missing_database_and_session_are_clear_errors(db, tmp_path):
    r = hippo("session", "list", "--db", str(tmp_path / "nope.db"))
    assert r.returncode == 1
    assert "no session database" in r.stderr
    assert not (tmp_path / "nope.db").exists()
    r = hippo("session", "show", "ghost", "--db", str(db))
    assert r.returncode == 1
    assert "session ghost" in r.stderr


def test_verify_finds_damage_and_names_the_chunk(db):
    ok = hippo_json("session", "verify", "--db", str(db))
    assert all(s["ok"] for s in ok)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE kv_chunks SET checksum = checksum + 1 - 2 * (checksum & 1) "
                    "WHERE id = (SELECT max(id) FROM kv_chunks WHERE origin_session = 'agent-1')")
    r = hippo("session", "verify", "agent-1", "--db", str(db), "--json")
    assert r.returncode == 1
    report = json.loads(r.stdout)[0]
    assert not report["ok"]
    assert "checksum mismatch" in report["problems"][0]
    assert "session agent-1" in report["problems"][0] and "chunk" in report["problems"][0]
    assert "problem" in r.stderr


def test_export_import_round_trip_with_progress(db, tmp_path):
    out = tmp_path / "agent-1.hippo"
    r = hippo("session", "export", "agent-1", str(out), "--db", str(db), "--progress")
    assert r.returncode == 0, r.stderr
    assert "100%" in r.stderr  # the progress bar, forced on although stderr is a pipe
    assert out.exists() and not (tmp_path / "agent-1.hippo-wal").exists()
    r = hippo("session", "export", "agent-1", str(out), "--db", str(db))
    assert r.returncode == 1 and "exists" in r.stderr

    other = tmp_path / "other.db"
    imported = hippo_json("session", "import", str(out), "--db", str(other), "--fingerprint",
                          "test-model:v1:layout-a")
    assert imported["id"] == "agent-1"
    show = hippo_json("session", "show", "agent-1", "--db", str(other))
    assert [s["n_tokens"] for s in show["snapshots"]] == [40000]
    assert hippo_json("session", "verify", "agent-1", "--db", str(other))[0]["ok"]

    r = hippo("session", "import", str(out), "--db", str(other))
    assert r.returncode == 1 and "already exists" in r.stderr
    r = hippo("session", "import", str(out), "--db", str(other), "--as", "x", "--fingerprint", "another-model")
    assert r.returncode == 1 and "fingerprint" in r.stderr
    assert hippo_json("session", "import", str(out), "--db", str(other), "--as", "agent-1b")["id"] == "agent-1b"


def test_import_refuses_a_newer_format(db, tmp_path):
    out = tmp_path / "agent-2.hippo"
    assert hippo("session", "export", "agent-2", str(out), "--db", str(db)).returncode == 0
    with sqlite3.connect(out) as con:
        con.execute("UPDATE meta SET value = '42' WHERE key = 'format_version'")
    r = hippo("session", "import", str(out), "--db", str(tmp_path / "new.db"))
    assert r.returncode == 1
    assert "unknown format version 42" in r.stderr


def test_fork_shares_chunks_then_rm_and_gc(db):
    def n_chunks():
        with sqlite3.connect(db) as con:
            return con.execute("SELECT count(*) FROM kv_chunks").fetchone()[0]

    before = n_chunks()
    fork = hippo_json("session", "fork", "agent-1", "--as", "agent-1-fork", "--db", str(db))
    assert fork["forked_from"] == "agent-1"
    assert n_chunks() == before
    assert hippo_json("session", "rm", "agent-1", "--db", str(db))["removed"] == "agent-1"
    # The fork's snapshot (a copy of the latest) uses every chunk agent-1 had: nothing to collect.
    assert hippo_json("session", "gc", "--db", str(db))["chunks_removed"] == 0
    assert hippo_json("session", "verify", "agent-1-fork", "--db", str(db))[0]["ok"]
    assert hippo_json("session", "rm", "agent-1-fork", "--db", str(db))
    assert hippo_json("session", "gc", "--db", str(db))["chunks_removed"] > 0
    assert [s["id"] for s in hippo_json("session", "list", "--db", str(db))] == ["agent-2"]


def test_usable_while_another_process_holds_the_database(db):
    # A "server": holds a read transaction open and the database in WAL mode.
    server = sqlite3.connect(db)
    server.execute("BEGIN")
    server.execute("SELECT count(*) FROM sessions").fetchone()
    assert len(hippo_json("session", "list", "--db", str(db))) == 2
    assert hippo_json("session", "fork", "agent-2", "--as", "agent-2b", "--db", str(db))["id"] == "agent-2b"
    server.rollback()
    # While it holds the write lock, a writing command waits, then says the database is locked.
    server.execute("BEGIN IMMEDIATE")
    assert len(hippo_json("session", "list", "--db", str(db))) == 3  # readers still work
    r = hippo("session", "fork", "agent-2", "--as", "agent-2c", "--db", str(db), "--busy-timeout", "200")
    assert r.returncode == 1
    assert "locked" in r.stderr
    server.rollback()
    assert hippo_json("session", "fork", "agent-2", "--as", "agent-2c", "--db", str(db))["id"] == "agent-2c"
    server.close()
