"""Black-box tests of `hippo model init` and `hippo model inspect`: the checkpoints are read by the
Python `safetensors` library (not our reader), the FP8/FP4 formats are decoded by an independent
NumPy implementation, and the released DeepSeek-V4.1-Flash config gives the published numbers.
HIPPO_BIN names the binary (set by CTest)."""
import hashlib
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest
from safetensors import safe_open

HIPPO = os.environ["HIPPO_BIN"]
DATA = pathlib.Path(__file__).resolve().parent.parent / "data"


def hippo(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIPPO_")}
    return subprocess.run([HIPPO, *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def tokenizer_dir():
    # The real DeepSeek V4 tokenizer that scripts/setup puts in .cache/ (tests/CMakeLists.txt).
    d = pathlib.Path(os.environ["HIPPO_TOKENIZER_DIR"])
    assert (d / "tokenizer.json").is_file(), f"{d}/tokenizer.json missing: run scripts/setup"
    return d


def init(out, tokenizer_dir, *extra, preset="tiny", seed=1):
    r = hippo("model", "init", "--preset", preset, "--seed", str(seed), "--out", str(out),
              "--tokenizer", str(tokenizer_dir), *extra)
    assert r.returncode == 0, r.stderr
    return out


def digest(directory):
    h = hashlib.sha256()
    for p in sorted(directory.iterdir()):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def raw_tensors(directory):
    """name -> (dtype, shape, raw bytes), parsed independently of hippo's reader."""
    out = {}
    for shard in sorted(directory.glob("*.safetensors")):
        blob = shard.read_bytes()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        for name, e in header.items():
            if name == "__metadata__":
                continue
            b, end = e["data_offsets"]
            out[name] = (e["dtype"], tuple(e["shape"]), blob[8 + n + b:8 + n + end])
    return out


def e4m3(codes):
    codes = codes.astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = codes & 0x7
    mag = np.where(exp == 0, man * 2.0 ** -9, (1 + man / 8) * 2.0 ** (exp - 7))
    return sign * mag


def e8m0(codes):
    return 2.0 ** (codes.astype(np.float64) - 127)


def e2m1(nibbles):
    mag = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])[nibbles & 7]
    return np.where(nibbles & 8, -mag, mag)


def bf16(raw, shape):
    return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)


def test_init_is_deterministic_and_readable_by_safetensors(tmp_path, tokenizer_dir):
    a = init(tmp_path / "a", tokenizer_dir)
    b = init(tmp_path / "b", tokenizer_dir)
    c = init(tmp_path / "c", tokenizer_dir, seed=2)
    assert digest(a) == digest(b)
    assert digest(a) != digest(c)
    index = json.loads((a / "model.safetensors.index.json").read_text())
    seen = {}
    for shard in sorted(a.glob("*.safetensors")):
        with safe_open(str(shard), framework="numpy") as f:
            assert f.metadata() == {"format": "pt"}
            for name in f.keys():
                seen[name] = shard.name
                s = f.get_slice(name)
                assert s.get_dtype() in {"F32", "BF16", "F8_E4M3", "F8_E8M0", "I8"}
                if s.get_dtype() == "F32":
                    assert np.isfinite(f.get_tensor(name)).all()
    assert seen == index["weight_map"]
    assert len(list(a.glob("*.safetensors"))) > 1
    config = json.loads((a / "config.json").read_text())
    assert config["model_type"] == "deepseek_v41"
    assert config["quantization_config"]["weight_block_size"] == [32, 32]
    assert (a / "tokenizer.json").read_bytes() == (tokenizer_dir / "tokenizer.json").read_bytes()


def test_plain_is_the_dequantised_quantised_checkpoint(tmp_path, tokenizer_dir):
    q = raw_tensors(init(tmp_path / "q", tokenizer_dir))
    p = raw_tensors(init(tmp_path / "p", tokenizer_dir, "--format", "plain"))
    assert "quantization_config" not in json.loads((tmp_path / "p" / "config.json").read_text())
    checked = {"F8_E4M3": 0, "I8": 0}
    for name, (dtype, shape, raw) in q.items():
        if dtype == "F8_E8M0":
            assert name.endswith(".scale") and name[:-6] + ".weight" in q
            continue
        if dtype not in checked:
            assert p[name] == (dtype, shape, raw), name
            continue
        scale_dtype, scale_shape, scale_raw = q[name[:-7] + ".scale"]
        scales = e8m0(np.frombuffer(scale_raw, dtype=np.uint8).reshape(scale_shape))
        codes = np.frombuffer(raw, dtype=np.uint8).reshape(shape)
        if dtype == "F8_E4M3":
            rows, cols = shape
            block_rows = 1 if ".engram.embed." in name else 32
            values = e4m3(codes) * np.repeat(np.repeat(scales, block_rows, 0), 32, 1)[:rows, :cols]
        else:  # packed FP4: even element in the low nibble, a scale per 32
            nibbles = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(shape[0], shape[1] * 2)
            values = e2m1(nibbles) * np.repeat(scales, 32, 1)
        plain_dtype, plain_shape, plain_raw = p[name]
        assert plain_dtype == "BF16" and plain_shape == values.shape, name
        assert np.array_equal(bf16(plain_raw, plain_shape), values.astype(np.float32)), name
        checked[dtype] += 1
    assert checked["F8_E4M3"] > 50 and checked["I8"] > 100
    assert set(p) == {n for n, (d, _, _) in q.items() if d != "F8_E8M0"}


def test_inspect_the_released_config():
    r = hippo("model", "inspect", str(DATA / "deepseek-v41-flash.config.json"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    params = doc["parameters"]
    assert abs(params["backbone"] / 552e9 - 1) < 0.005
    assert params["engram"] == (384006168 + 384016682) * 256
    assert abs(params["active_decode"] / 16e9 - 1) < 0.02
    assert abs(params["active_prefill"] / 8e9 - 1) < 0.02
    assert doc["kv"]["bytes_per_token"] == 890
    assert [l["layer"] for l in doc["layers"] if l["writes_kv"]] == [2, 8, 14, 20]
    text = hippo("model", "inspect", str(DATA / "deepseek-v41-flash.config.json")).stdout
    assert "backbone 551.9B" in text and "engram 196.6B" in text and "890 B/token" in text


def test_inspect_a_checkpoint(tmp_path, tokenizer_dir):
    d = init(tmp_path / "m", tokenizer_dir, preset="small-fullkv")
    r = hippo("model", "inspect", str(d), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kv"]["bytes_per_token"] == 890
    assert doc["checkpoint"]["shards"] == len(list(d.glob("*.safetensors")))
    assert doc["checkpoint"]["mapped_bytes"] == sum(p.stat().st_size for p in d.glob("*.safetensors"))
    assert doc["config"]["text_config"]["head_dim"] == 512
    r = hippo("model", "inspect", str(d), "--tensors")
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.split()[:1] == ["layers.20.attn.compressor.wkv.weight"])
    assert line.split()[1:3] == ["BF16", "[512,"] and line.endswith(".safetensors")
    listed = json.loads(hippo("model", "inspect", str(d), "--json", "--tensors").stdout)["tensor_list"]
    index = json.loads((d / "model.safetensors.index.json").read_text())["weight_map"]
    assert {t["name"]: t["shard"] for t in listed} == index


def test_bad_input_is_a_clear_error(tmp_path, tokenizer_dir):
    r = hippo("model", "init", "--preset", "tiny", "--seed", "1", "--out", str(tmp_path / "x"),
              "--tokenizer", str(tmp_path / "none"))
    assert r.returncode == 1
    assert "tokenizer.json not found in" in r.stderr and "--tokenizer" in r.stderr
    assert not (tmp_path / "x").exists()
    r = hippo("model", "init", "--preset", "huge", "--seed", "1", "--out", str(tmp_path / "y"))
    assert r.returncode == 2
    d = init(tmp_path / "m", tokenizer_dir)
    shard = sorted(d.glob("*.safetensors"))[-1]
    shard.write_bytes(shard.read_bytes()[:-10])
    r = hippo("model", "inspect", str(d))
    assert r.returncode == 1
    assert f"{shard.name}: tensor " in r.stderr and "the shard is truncated" in r.stderr
    config = tmp_path / "v4.json"
    config.write_text(json.dumps({"model_type": "deepseek_v4"}))
    r = hippo("model", "inspect", str(config))
    assert r.returncode == 1
    assert "model_type 'deepseek_v4' is not supported" in r.stderr
