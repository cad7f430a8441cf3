#!/usr/bin/env python3
"""hippo's CPU linear against ggml's, in interleaved rounds (issue 14's peer comparison).

A virtual machine's memory bandwidth can move by half within minutes, so a hippo run and a ggml run
taken a few minutes apart do not compare. Each round here runs `hippo bench kernels` and then
scripts/bench_ggml_peer.sh at the same shape, m and thread count, and the ratio is taken within the
round; the table gives each (format, m)'s median ratio over the rounds with its range.

    scripts/bench_ggml_peer.sh /work/peers/ggml --m 1 --types f32     # builds the peer once
    .venv/bin/python scripts/compare_ggml.py --ggml-src /work/peers/ggml --rounds 3 --m 1,2,4,8
    # hippo's AVX2 path against ggml's AVX2 build (built by bench_ggml_peer.sh --isa avx2 first):
    .venv/bin/python scripts/compare_ggml.py --ggml-src /work/peers/ggml --isa avx2 \\
        --ggml-build-dir /tmp/ggml-avx2 --ggml-isa avx2

"×" is ggml's time over hippo's (above 1: hippo is faster): against ggml's plain buffer (what
`test-backend-ops perf` uses) and against the best of plain and repacked (llama.cpp's default on a
CPU; its MXFP4 multiplies x quantised to 8 bits in integers). Nothing is written but stdout and,
with --json, the raw rounds.
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def hippo_round(args):
    cmd = [args.hippo, "bench", "kernels", "--json", "--format", args.formats, "--m", args.m,
           "--threads", str(args.threads), "--rows", str(args.rows), "--cols", str(args.cols)]
    if args.isa:
        cmd += ["--isa", args.isa]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return {(r["ggml_peer_type"], r["m"]): r["ms_per_call"] for r in doc["results"]}, doc["limits"]


def ggml_round(args, types):
    cmd = [str(ROOT / "scripts/bench_ggml_peer.sh"), args.ggml_src, "--no-build", "--build-dir", args.ggml_build_dir,
           "--isa", args.ggml_isa, "--m", args.m, "--threads", str(args.threads), "--rows", str(args.rows),
           "--cols", str(args.cols), "--types", ",".join(types), "--buffer", "both"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    times = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            times.setdefault((r["type"], r["m"]), {})[r["buffer"]] = r["ms_per_call"]
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ggml-src", required=True, help="ggml's source tree (fetched by you, outside the repository)")
    p.add_argument("--ggml-build-dir", default="/tmp/ggml-peer-build", help="where bench_ggml_peer.sh built it")
    p.add_argument("--ggml-isa", default="native", choices=["native", "avx2"], help="the ISA that build was made for")
    p.add_argument("--hippo", default=str(ROOT / "build/release/hippo"))
    p.add_argument("--isa", default="", help="hippo's linear ISA (avx512vbmi, avx512, avx2, generic); default: its dispatch")
    p.add_argument("--formats", default="all", help="hippo formats: f32,bf16,fp8,fp4 or all")
    p.add_argument("--m", default="1,2,4,8", help="rows of x, comma-separated")
    p.add_argument("--rows", type=int, default=14336)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="write every round's times here")
    args = p.parse_args()

    rounds = []
    for k in range(args.rounds):
        hippo, limits = hippo_round(args)
        ggml = ggml_round(args, sorted({t for t, _ in hippo}))
        rounds.append({"hippo": hippo, "ggml": ggml, "read_gb_per_s": limits["read_bytes_per_second"] / 1e9})
        print(f"round {k + 1}/{args.rounds} done", file=sys.stderr)

    print(f"hippo {args.isa or 'dispatch'} vs ggml {args.ggml_isa}, W [{args.rows}, {args.cols}], "
          f"{args.threads} threads, {args.rounds} rounds; × = ggml ms / hippo ms, median (min..max)\n")
    reads = [r["read_gb_per_s"] for r in rounds]
    print(f"hippo's read probe per round: {', '.join(f'{x:.1f}' for x in reads)} GB/s\n")
    print("| ggml type | m | hippo ms (median) | ggml plain ms | × plain | ggml best ms | × best |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key in sorted(rounds[0]["hippo"], key=lambda key: (key[0], key[1])):
        h = [r["hippo"][key] for r in rounds]
        plain = [r["ggml"][key]["plain"] for r in rounds]
        best = [min(r["ggml"][key].values()) for r in rounds]
        x_plain = [g / t for g, t in zip(plain, h)]
        x_best = [g / t for g, t in zip(best, h)]
        fmt = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}..{max(xs):.2f})"
        print(f"| {key[0]} | {key[1]} | {statistics.median(h):.3f} | {statistics.median(plain):.3f} | {fmt(x_plain)} "
              f"| {statistics.median(best):.3f} | {fmt(x_best)} |")
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"hippo": {f"{t}/{m}": v for (t, m), v in r["hippo"].items()},
              "ggml": {f"{t}/{m}": v for (t, m), v in r["ggml"].items()},
              "read_gb_per_s": r["read_gb_per_s"]} for r in rounds], indent=1))


if __name__ == "__main__":
    main()
