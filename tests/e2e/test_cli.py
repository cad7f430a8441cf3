"""Black-box tests of the built `hippo` binary: exit codes, streams and the config layers as a
user meets them. HIPPO_BIN names the binary (set by CTest)."""
import json
import os
import subprocess

HIPPO = os.environ["HIPPO_BIN"]


def hippo(*args, env=None, cwd=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("HIPPO_")}
    full_env.update(env or {})
    return subprocess.run([HIPPO, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=120)


def test_version():
    r = hippo("--version")
    assert r.returncode == 0
    assert r.stdout.startswith("hippo 0.")


def test_bench_server_needs_a_model():
    r = hippo("bench", "server")
    assert r.returncode == 2
    assert "--model" in r.stderr
    assert r.stdout == ""


def test_unknown_subcommand_is_usage_error():
    r = hippo("frobnicate")
    assert r.returncode == 2
    assert "frobnicate" in r.stderr


def test_bench_machine_json():
    r = hippo("bench", "machine", "--json", "--bytes", "8MiB", "--repetitions", "1")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["logical_cpus"] == os.cpu_count()
    assert doc["read_bytes_per_second"] > 1e8
    assert doc["fma_flops_per_second"] > 1e8


def test_cpu_isa_caps_the_kernels_instruction_set():
    # generic runs on every CPU; the flag and HIPPO_CPU_ISA both reach the kernels' dispatch.
    bench = ["bench", "kernels", "--rows", "64", "--cols", "64", "--m", "1,4", "--format", "f32,fp4", "--threads", "1",
             "--repetitions", "1", "--min-time", "0", "--copies", "1", "--bandwidth-bytes", "8MiB", "--json"]
    for args, env in ((["--cpu-isa", "generic", *bench], None), (bench, {"HIPPO_CPU_ISA": "generic"})):
        r = hippo(*args, env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["linear_isa"] == "generic"
    r = hippo("--cpu-isa", "generic", *bench[:-1], "--isa", "avx2")  # above the cap: not runnable
    assert r.returncode == 2
    assert "avx2" in r.stderr
    r = hippo(*bench, env={"HIPPO_CPU_ISA": "sse9"})
    assert r.returncode == 2
    assert "--cpu-isa: instruction set 'sse9' is not one of" in r.stderr
    assert r.stdout == ""


def test_settings_precedence_through_the_binary(tmp_path):
    # --threads for `bench machine` from each layer in turn; the JSON output shows which one won.
    config = tmp_path / "hippo.toml"
    config.write_text("[bench.machine]\nthreads = 1\nbytes = \"8MiB\"\nrepetitions = 1\n")
    base = ["--config", str(config), "bench", "machine", "--json"]
    assert json.loads(hippo(*base).stdout)["threads"] == 1
    assert json.loads(hippo(*base, env={"HIPPO_THREADS": "2"}).stdout)["threads"] == 2
    r = hippo(*base, "--threads", "3", env={"HIPPO_THREADS": "2"})
    assert json.loads(r.stdout)["threads"] == 3
    r = hippo("bench", "machine", "--json", env={"HIPPO_CONFIG": str(config)})
    assert json.loads(r.stdout)["threads"] == 1


def test_bad_config_key_is_a_clear_error(tmp_path):
    config = tmp_path / "hippo.toml"
    config.write_text("treads = 1\n")
    r = hippo("--config", str(config), "bench", "machine")
    assert r.returncode == 2
    assert f"config file {config}: unknown setting 'treads'" in r.stderr


def test_json_logs_on_stderr_only(tmp_path):
    r = hippo("--log-format", "json", "--log-level", "debug", "bench", "machine", "--json",
              "--bytes", "8MiB", "--repetitions", "1", "--threads", "1")
    assert r.returncode == 0
    json.loads(r.stdout)  # stdout holds the result alone


def test_model_render_marks_what_the_model_generates(tmp_path):
    """`hippo model render` on a finished tool-calling conversation (the training corpus's form),
    decoded by Hugging Face's own tokenizer: the marked spans are exactly the assistant's turns."""
    from tokenizers import Tokenizer

    tokenizer_dir = os.environ["HIPPO_TOKENIZER_DIR"]
    tools = [{"type": "function", "function": {
        "name": "calculator", "description": "Evaluates an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]
    conversation = {"tools": tools, "messages": [
        {"role": "system", "content": "You are a careful assistant with tools."},
        {"role": "user", "content": "What is 17 * 23?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "calculator", "arguments": "{\"expression\": \"17 * 23\"}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "391"},
        {"role": "assistant", "content": "17 * 23 = 391."}]}
    lines = tmp_path / "conversations.jsonl"
    lines.write_text(json.dumps(conversation) + "\n\n" + json.dumps(conversation) + "\n")
    r = hippo("model", "render", "--tokenizer", tokenizer_dir, "--in", str(lines))
    assert r.returncode == 0, r.stderr
    rendered = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rendered) == 2 and rendered[0] == rendered[1]
    ids, answers = rendered[0]["ids"], rendered[0]["answers"]
    hf = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    text = [hf.decode(ids[b:e], skip_special_tokens=False) for b, e in answers]
    assert text == ['\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="calculator">\n'
                    '<｜DSML｜parameter name="expression" string="true">17 * 23</｜DSML｜parameter>\n'
                    '</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>',
                    "17 * 23 = 391.<｜end▁of▁sentence｜>"]
    assert answers[-1][1] == len(ids)
    assert hf.decode(ids[:answers[0][0]], skip_special_tokens=False).endswith("What is 17 * 23?<｜Assistant｜></think>")

    # A conversation that does not end with the answer is refused with its line number.
    conversation["messages"].pop()
    lines.write_text(json.dumps(conversation) + "\n")
    r = hippo("model", "render", "--tokenizer", tokenizer_dir, "--in", str(lines))
    assert r.returncode != 0
    assert "line 1" in r.stderr and "must end with the assistant's answer" in r.stderr
