#!/usr/bin/env python3
"""Two builds of hippo's CPU linear layer against each other, in alternating runs.

A virtual machine's bandwidth and core speed move within minutes (docs/BENCHMARKS.md), so two builds
timed minutes apart do not compare. This runs `hippo bench kernels ARGS --json` of build A, then of
build B, N times, and prints each build's median and least ms per call for every (format, m).

    .venv/bin/python scripts/ab_kernels.py /tmp/hippo-before build/release/hippo --runs 6 -- \\
        --isa avx2 --format fp8 --m 1,2,4,8 --threads 2 --repetitions 3
"""
import argparse
import json
import statistics
import subprocess
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="the first hippo binary")
    p.add_argument("b", help="the second hippo binary")
    p.add_argument("--runs", type=int, default=6, help="alternations")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:split])
    bench_args = argv[split + 1:]  # after --: the arguments of `hippo bench kernels`
    times = {args.a: {}, args.b: {}}
    for _ in range(args.runs):
        for binary in (args.a, args.b):
            out = subprocess.run([binary, "bench", "kernels", *bench_args, "--json"], check=True,
                                 capture_output=True, text=True).stdout
            for r in json.loads(out)["results"]:
                times[binary].setdefault((r["format"], r["m"]), []).append(r["ms_per_call"])
    print(f"{args.runs} alternations of `hippo bench kernels {' '.join(bench_args)}`; ms per call, median (least)")
    print("| format | m | A | B | B / A |")
    print("|---|---:|---:|---:|---:|")
    for key in times[args.a]:
        a, b = times[args.a][key], times[args.b][key]
        ratio = statistics.median(b) / statistics.median(a)
        print(f"| {key[0]} | {key[1]} | {statistics.median(a):.3f} ({min(a):.3f}) | {statistics.median(b):.3f} ({min(b):.3f}) | {ratio:.2f} |")


if __name__ == "__main__":
    main()
