"""Model benchmark against its peer, in one run: `hippo bench model --json` and the Hugging Face
reference (transformers' DeepseekV41ForCausalLM, eager attention, fp32, the same thread count) on
the same checkpoint and the same token ids, context by context, interleaved. Prints one table with
hippo, the reference and their ratio; results belong in docs/benchmarks/model.md.

Usage (the reference virtualenv runs this script; scripts/reference/README.md):
    REFPY scripts/bench_model.py --hippo build/release/hippo --reference .cache/deepseek-v41-reference \\
        --model /tmp/tiny-plain [--contexts 512,4096,32768] [--decode-steps 32] [--repetitions 3] [--threads 1]

For each context L: hippo prefills L tokens through its encoder/decoder plan and decodes N tokens one
at a time (median of --repetitions after a warm-up; --long-repetitions above --long-from tokens). The
reference runs in a child process of its own (so that running out of memory cannot end the run): it
loads the same checkpoint (scripts/gen_model_golden.py's explicit loader, dequantised to fp32), runs
one forward with a DynamicCache over the L tokens (the prefill; only the last position goes through
the head, as in hippo) and then N single-token forwards on that cache (the decode), after a 64-token
warm-up; as many runs as hippo up to 1,024 tokens, one above (a 4K prefill takes minutes). Its eager
attention holds H x L x (L + compressed entries) logits per layer, so its memory and prefill time grow
with L^2: before each context the script extrapolates both from the contexts it has measured
(quadratic; decode linear) and does not run the reference where it would need more memory than is
available or longer than --reference-max-seconds; the table says so, with the estimate.

Token ids: the LCG of api/cli/bench_model.cpp; hippo reports their FNV-1a digest and the script
checks it against its own.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import cpu_model  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench_token_ids(n, vocab):
    """The ids of api/cli/bench_model.cpp: prompt first, then the decode tokens."""
    ids, state, span = [], 12345, min(vocab, 128000) - 3
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        ids.append(3 + (state >> 33) % span)
    return ids


def fnv1a64(ids):
    h = 1469598103934665603
    for i in ids:
        for b in (i & 0xFFFFFFFF).to_bytes(4, "little"):
            h = ((h ^ b) * 1099511628211) % (1 << 64)
    return f"{h:016x}"


def parse_context(text):
    text = text.strip()
    return int(text[:-1]) * 1024 if text[-1] in "kK" else int(text)


def proc_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


# --------------------------------------------------------------------------------------------
# the reference, in a child process: python bench_model.py --reference-worker ...
# --------------------------------------------------------------------------------------------

def reference_worker(args):
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["MKL_NUM_THREADS"] = str(args.threads)
    import torch

    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import gen_model_golden as golden
    from pathlib import Path
    from transformers import DynamicCache

    torch.set_num_threads(args.threads)
    golden.assemble_reference.activate(args.reference, quiet=True)
    t0 = time.perf_counter()
    model, tokenizer, _ = golden.build_reference(Path(args.model))
    load_s = time.perf_counter() - t0
    n, steps = args.worker_context, args.decode_steps
    ids = bench_token_ids(n + steps, model.config.vocab_size)

    def run(n_prompt, n_steps):
        model.model.bind_tokenizer(tokenizer)  # a fresh Engram n-gram history per sequence
        cache = DynamicCache(config=model.config)
        with torch.no_grad():
            start = time.perf_counter()
            hidden = model.model(input_ids=torch.tensor([ids[:n_prompt]]), past_key_values=cache,
                                 use_cache=True).last_hidden_state
            logits = model.lm_head(hidden[:, -1:]).float()
            prefill = time.perf_counter() - start
            start = time.perf_counter()
            for i in range(n_steps):
                logits = model(input_ids=torch.tensor([[ids[n_prompt + i]]]), position_ids=torch.tensor([[n_prompt + i]]),
                               past_key_values=cache, use_cache=True).logits[:, -1].float()
            decode = time.perf_counter() - start
        if not bool(torch.isfinite(logits).all()):
            raise SystemExit("reference: non-finite logits")
        return prefill, decode

    run(min(64, n), min(2, steps))  # warm-up
    rss_before = proc_status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM from here
    prefill_s, decode_s = [], []
    for _ in range(args.worker_repetitions):
        p, d = run(n, steps)
        prefill_s.append(p)
        decode_s.append(d)
    print(json.dumps({"n_tokens": n, "load_s": load_s, "prefill_s": prefill_s, "decode_s": decode_s,
                      "rss_before_bytes": rss_before, "peak_rss_bytes": proc_status("VmHWM"),
                      "token_ids_fnv1a64": fnv1a64(ids), "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))


# --------------------------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------------------------

def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]  # the upper median for an even count, as hippo's spread_of


def run_hippo(args, context, repetitions, plan_off_at):
    """hippo's JSON report for one context; its stderr (progress) is passed on. With --hippo-timeout,
    a run that takes longer is stopped and reported as {"timed_out": seconds, "progress": last line}."""
    cmd = [args.hippo, "bench", "model", "--model", args.model, "--contexts", str(context),
           "--decode-steps", str(args.decode_steps), "--repetitions", str(repetitions), "--threads", str(args.threads),
           "--chunk", str(args.chunk), "--plan-off-at", str(plan_off_at), "--json"]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress = []

    def echo():
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            if "prefill" in line and "warm-up" not in line:
                progress.append(line.strip())

    stdout = []
    threads = [threading.Thread(target=echo, daemon=True),
               threading.Thread(target=lambda: stdout.append(proc.stdout.read()), daemon=True)]
    for t in threads:
        t.start()
    try:
        proc.wait(timeout=args.hippo_timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return {"timed_out": time.perf_counter() - start, "progress": progress[-1] if progress else None}
    finally:
        for t in threads:
            t.join(timeout=5)
    if proc.returncode != 0:
        raise SystemExit(f"hippo bench model failed (exit {proc.returncode})")
    return json.loads(stdout[0])


def run_reference(args, context, repetitions):
    cmd = [sys.executable, os.path.abspath(__file__), "--reference-worker", "--model", args.model,
           "--reference", args.reference, "--threads", str(args.threads), "--decode-steps", str(args.decode_steps),
           "--worker-context", str(context), "--worker-repetitions", str(repetitions)]
    print(f"$ reference: {context} tokens, {repetitions} repetition(s)", file=sys.stderr, flush=True)
    start = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return {"n_tokens": context, "error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}",
                "wall_s": time.perf_counter() - start}
    return json.loads(r.stdout.strip().splitlines()[-1])


def quadratic(points, n):
    """Extrapolates y = a + b n^2 through the two largest measured (n, y), or y n^2 / n0^2 from one."""
    points = sorted(points)
    if not points:
        return None
    if len(points) == 1:
        n0, y0 = points[0]
        return y0 * (n / n0) ** 2
    (n0, y0), (n1, y1) = points[-2], points[-1]
    b = max(0.0, (y1 - y0) / (n1 * n1 - n0 * n0))
    return y1 + b * (n * n - n1 * n1)


def linear(points, n):
    """y proportional to n, from the largest measured (n, y)."""
    n0, y0 = max(points)
    return y0 * n / n0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hippo", help="the hippo binary (a release build)")
    parser.add_argument("--model", required=True, help="checkpoint directory (hippo model init)")
    parser.add_argument("--reference", default=os.path.join(REPO, ".cache/deepseek-v41-reference"),
                        help="the reference overlay (scripts/reference/README.md)")
    parser.add_argument("--contexts", default="512,4096,32768")
    parser.add_argument("--decode-steps", type=int, default=32)
    parser.add_argument("--repetitions", type=int, default=3, help="timed runs per context up to --long-from tokens")
    parser.add_argument("--long-repetitions", type=int, default=1, help="timed runs per context above --long-from")
    parser.add_argument("--long-from", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=1, help="threads for hippo and the reference alike")
    parser.add_argument("--chunk", type=int, default=2048, help="hippo's prefill chunk")
    parser.add_argument("--plan-off-at", type=int, default=4096,
                        help="the context at which hippo also prefills without the encoder/decoder plan (0: none)")
    parser.add_argument("--reference-max-seconds", type=float, default=1800,
                        help="skip the reference where its prefill + decode would take longer (extrapolated)")
    parser.add_argument("--no-reference", action="store_true", help="hippo only")
    parser.add_argument("--json-out", help="also write every measurement to this JSON file")
    parser.add_argument("--hippo-timeout", type=float, help="stop a hippo run after this many seconds and report "
                        "its last progress line instead")
    parser.add_argument("--reference-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker-context", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker-repetitions", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference_worker:
        return reference_worker(args)
    if not args.hippo:
        parser.error("--hippo is required")

    contexts = [parse_context(c) for c in args.contexts.split(",")]
    print(f"machine   {cpu_model()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.2f} at start, {time.strftime('%Y-%m-%d %H:%M %Z')}", flush=True)
    rows, plan, first = [], None, None
    # (n, seconds per prefill), (n, seconds per decode), (n, peak RSS above the loaded model's)
    ref_prefill, ref_decode, ref_mem = [], [], []
    ref_base = 0
    for n in sorted(contexts):
        reps = args.repetitions if n <= args.long_from else args.long_repetitions
        h = run_hippo(args, n, reps, args.plan_off_at if n == args.plan_off_at else 0)
        hc = h["contexts"][0] if "contexts" in h else None
        first = first or (h if hc else None)
        if "plan_off" in h:
            plan = h["plan_off"]
        ref = None
        if not args.no_reference:
            ref_reps = reps if n <= 1024 else 1
            need_s = quadratic(ref_prefill, n)
            if need_s is not None:
                need_s += linear(ref_decode, n)
            need_b = quadratic(ref_mem, n)
            if need_b is not None:
                need_b += ref_base
            available = mem_available()
            if need_b is not None and need_b > 0.85 * available:
                ref = {"skipped": f"not run: would need ~{need_b / 1e9:.0f} GB "
                                  f"({available / 1e9:.0f} GB available; quadratic from the measured contexts)"}
            elif need_s is not None and need_s * ref_reps > args.reference_max_seconds:
                ref = {"skipped": f"not run: would take ~{need_s / 60:.0f} min per run "
                                  f"(quadratic from the measured contexts; limit {args.reference_max_seconds:.0f} s)"}
            elif hc is None:
                ref = {"skipped": "not run: hippo did not finish"}
            else:
                ref = run_reference(args, n, ref_reps)
                if "error" not in ref:
                    if ref["token_ids_fnv1a64"] != hc["token_ids_fnv1a64"]:
                        raise SystemExit(f"token ids differ at {n}: hippo {hc['token_ids_fnv1a64']}, "
                                         f"reference {ref['token_ids_fnv1a64']}")
                    ref_prefill.append((n, median(ref["prefill_s"])))
                    ref_decode.append((n, median(ref["decode_s"])))
                    ref_mem.append((n, ref["peak_rss_bytes"] - ref["rss_before_bytes"]))
                    ref_base = ref["rss_before_bytes"]
        rows.append((n, reps, h, hc, ref))
        print_row(args, n, reps, hc, ref)
    print()
    print_table(args, rows, plan, first)
    print(f"load average {os.getloadavg()[0]:.2f} at the end, {time.strftime('%H:%M %Z')}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"args": vars(args), "rows": [{"n_tokens": n, "hippo": h, "reference": ref}
                                                    for n, _, h, _, ref in rows]}, f, indent=1)


def print_row(args, n, reps, hc, ref):
    if hc is None:
        print(f"context {n}: hippo did not finish", file=sys.stderr, flush=True)
        return
    msg = (f"context {n}: hippo prefill {hc['prefill_tokens_per_s']['median']:.1f} tokens/s, decode "
           f"{hc['decode_tokens_per_s']['median']:.1f} tokens/s")
    if ref and "prefill_s" in ref:
        msg += (f"; reference prefill {n / median(ref['prefill_s']):.1f} tokens/s, decode "
                f"{args.decode_steps / median(ref['decode_s']):.1f} tokens/s")
    elif ref:
        msg += f"; reference {ref.get('skipped') or ref.get('error')}"
    print(msg, file=sys.stderr, flush=True)


def print_table(args, rows, plan, first):
    print(f"model     {args.model} ({'quantised' if first['quantised'] else 'plain'}, {first['layers']} layers, "
          f"hidden {first['hidden_size']}); {args.threads} thread(s) each; hippo prefill chunk {args.chunk}, "
          f"encoder/decoder plan on; {args.decode_steps} decode steps after each prefill")
    print("runs: timed runs of hippo / of the reference; RSS: hippo's process after the runs / its peak during them, "
          "the reference's child process at its peak; load: 1-minute load average when hippo started the context")
    print(f"{'context':>8} {'runs':>5} | {'prefill tok/s: hippo':>20} {'(min..max)':>17} {'reference':>10} {'ratio':>7} | "
          f"{'decode tok/s: hippo':>19} {'(min..max)':>17} {'reference':>10} {'ratio':>7} | "
          f"{'hippo state':>11} {'hippo RSS':>15} {'ref peak RSS':>12} {'load':>5}")
    notes = []
    for n, reps, h, hc, ref in rows:
        if hc is None:
            notes.append(f"hippo at {n} tokens: stopped after {h['timed_out']:.0f} s (--hippo-timeout); last progress: "
                         f"{h['progress']}")
            if ref:
                notes.append(f"reference at {n} tokens: {ref.get('skipped') or ref.get('error')}")
            continue
        hp, hd = hc["prefill_tokens_per_s"], hc["decode_tokens_per_s"]
        if ref and "prefill_s" in ref:
            rp, rd = n / median(ref["prefill_s"]), args.decode_steps / median(ref["decode_s"])
            rcols = f"{rp:>10.1f} {hp['median'] / rp:>6.1f}x"
            dcols = f"{rd:>10.1f} {hd['median'] / rd:>6.1f}x"
            rmem = f"{ref['peak_rss_bytes'] / 1e9:>9.2f} GB"
        else:
            rcols = f"{'-':>10} {'-':>7}"
            dcols = f"{'-':>10} {'-':>7}"
            rmem = f"{'-':>12}"
            if ref:
                notes.append(f"reference at {n} tokens: {ref.get('skipped') or ref.get('error')}")
        runs = f"{reps}/{len(ref['prefill_s'])}" if ref and "prefill_s" in ref else f"{reps}/0"
        rss = f"{hc['rss_bytes'] / 1e6:.0f}/{hc['peak_rss_bytes'] / 1e6:.0f} MB"
        print(f"{n:>8} {runs:>5} | {hp['median']:>20.1f} {'(%.1f..%.1f)' % (hp['min'], hp['max']):>17} {rcols} | "
              f"{hd['median']:>19.1f} {'(%.1f..%.1f)' % (hd['min'], hd['max']):>17} {dcols} | "
              f"{hc['state_bytes'] / 1e6:>8.2f} MB {rss:>15} {rmem} {hc['load_average']:>5.2f}")
    for note in notes:
        print(note)
    if plan:
        print(f"plan off at {plan['n_tokens']} tokens: {plan['plan_off_tokens_per_s']:.1f} tokens/s against "
              f"{plan['plan_on_tokens_per_s']:.1f} with the plan ({plan['speedup']:.2f}x), same session state: "
              f"{plan['same_state']}")
    print(f"memory    checkpoint {first['checkpoint_mapped_bytes'] / 1e6:.1f} MB mapped, "
          f"{first['checkpoint_resident_bytes'] / 1e6:.1f} MB resident; hippo process RSS after loading "
          f"{first['rss_bytes_after_load'] / 1e6:.1f} MB (the mapped weights count once they are touched)")


if __name__ == "__main__":
    main()
