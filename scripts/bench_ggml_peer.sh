#!/usr/bin/env bash
# ggml's CPU matrix product as a benchmark peer for `hippo bench kernels` (issue 14, item 3).
#
# ggml (github.com/ggml-org/ggml, the kernels under llama.cpp) is a benchmark peer only: this script
# builds it from a source tree that you fetch yourself, outside this repository, into a build folder
# outside it too. It is never vendored into hippo and hippo never links it.
#
# Usage:
#   scripts/bench_ggml_peer.sh [GGML_SRC] [--rows 14336] [--cols 4096] [--m 1,512]
#       [--types f32,bf16,q8_0,mxfp4] [--threads 2] [--buffer plain|repack|both] [--repetitions 3]
#       [--backend-ops | --backend-ops-only] [--build-dir /tmp/ggml-peer-build] [--no-build]
#       [--isa native|avx2]
#   GGML_SRC may also come from the environment. Example, next to hippo's own run:
#     git clone https://github.com/ggml-org/ggml /work/peers/ggml
#     scripts/bench_ggml_peer.sh /work/peers/ggml --m 1,512 --threads 2 > /tmp/ggml_peer.jsonl
#     build/release/hippo bench kernels --m 1,512 --threads 2 --json > /tmp/hippo_kernels.json
#
# Build: CMake, Release, CPU backend only, -DGGML_NATIVE=ON (the build machine's own ISA, as hippo
# dispatches at run time; --isa avx2 builds ggml's AVX2 + FMA + F16C kernels and no AVX-512 instead,
# the peer of `hippo bench kernels --isa avx2` on an AVX-512 machine: give it its own --build-dir),
# ggml's tests on, only the targets test-backend-ops and ggml-peer-bench
# (scripts/ggml_peer/, a wrapper project that adds GGML_SRC as a subproject).
#
# Measurement: scripts/ggml_peer/ggml_peer_bench.cpp times one ggml_mul_mat per call, W [rows, cols]
# of each ggml type against x [m, cols] f32, at --threads threads, rotating through enough copies
# of W to touch more than 4x the L3 per pass, best of --repetitions runs of >= 0.2 s each, as
# `hippo bench kernels` does. It prints one JSON object per line and (type, m): ms_per_call,
# weight_gb_per_s (bytes of W, scales included, / time) and gflop_per_s (2·m·rows·cols / time).
# Formats of the same size: hippo f32 ↔ ggml f32, bf16 ↔ bf16, fp8 (E4M3, 32×32 UE8M0 blocks,
# 1.001 bytes/weight) ↔ q8_0 (1.0625), fp4 (E2M1, UE8M0 per 32, 0.53125) ↔ mxfp4 (0.53125).
# --buffer plain keeps W in ggml's ordinary CPU buffer, as `test-backend-ops perf` does; repack uses
# ggml's CPU_REPACK buffer (what llama.cpp uses by default on a CPU: mxfp4 is repacked 8×8 on AVX2;
# q8_0 has no x86 repack). both: every type plain, then the types that ggml repacks here, repacked.
#
# --backend-ops also runs ggml's own `test-backend-ops perf -o MUL_MAT -b CPU` on its built-in cases
# that match (it cannot take arbitrary shapes or a thread count: its perf cases are fixed, W is
# 4096 × 14336 (the transpose of hippo's default 14336 × 4096, the same bytes), n = 1..512, and it
# uses every logical CPU, and it reuses a single W, which for mxfp4 (31 MB) may partly sit in a
# 32 MiB L3). Its lines are converted to JSON lines with "peer":"ggml test-backend-ops".
# --backend-ops-only runs that alone.
#
# Raw results are not committed: record figures in docs/BENCHMARKS.md with machine, ISA, date,
# command and the ggml commit (printed in every line as ggml_commit).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=${GGML_SRC:-}
build=/tmp/ggml-peer-build
rows=14336 cols=4096 ms=1,512 types=f32,bf16,q8_0,mxfp4 threads=2 buffer=plain repetitions=3
backend_ops=0 do_build=1 peer_bench=1 isa=native

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --rows) rows=$2; shift 2 ;;
    --cols) cols=$2; shift 2 ;;
    --m) ms=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --buffer) buffer=$2; shift 2 ;;
    --repetitions) repetitions=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --backend-ops) backend_ops=1; shift ;;
    --backend-ops-only) backend_ops=1 peer_bench=0; shift ;;
    --no-build) do_build=0; shift ;;
    --isa) isa=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "bench_ggml_peer.sh: unknown option $1" >&2; exit 2 ;;
    *) src=$1; shift ;;
  esac
done

if [[ -z $src || ! -f $src/include/ggml.h ]]; then
  echo "bench_ggml_peer.sh: give a ggml source tree (argument or GGML_SRC); '$src' is not one" >&2
  exit 2
fi
src=$(cd "$src" && pwd)
repo_root=$(cd "$here/.." && pwd)
case $build/ in
  "$repo_root"/*) echo "bench_ggml_peer.sh: the build folder must be outside the repository" >&2; exit 2 ;;
esac
case $buffer in plain|repack) buffers=$buffer ;; both) buffers="plain repack" ;;
  *) echo "bench_ggml_peer.sh: --buffer is plain, repack or both" >&2; exit 2 ;;
esac

# The commit: from git when the tree is a checkout, else a GGML_COMMIT file at its top (write one
# when you unpack an archive), else the GGML_COMMIT_SHA environment variable.
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || true)
[[ -z $commit && -f $src/GGML_COMMIT ]] && commit=$(tr -d '[:space:]' < "$src/GGML_COMMIT")
[[ -z $commit ]] && commit=${GGML_COMMIT_SHA:-unknown}

case $isa in
  native) isa_flags=(-DGGML_NATIVE=ON) ;;
  avx2) isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
                   -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
                   -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
  *) echo "bench_ggml_peer.sh: --isa is native or avx2" >&2; exit 2 ;;
esac

if [[ $do_build == 1 ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$here/ggml_peer" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_SRC="$src" \
    "${isa_flags[@]}" -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF -DGGML_CUDA=OFF -DGGML_HIP=OFF \
    -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENCL=OFF -DGGML_SYCL=OFF -DGGML_BACKEND_DL=OFF >&2
  cmake --build "$build" --target test-backend-ops ggml-peer-bench -j "$(nproc)" >&2
fi

for b in $buffers; do
  [[ $peer_bench == 1 ]] || break
  extra=()
  [[ $buffer == both && $b == repack ]] && extra=(--skip-unrepacked)  # the plain pass already ran those
  "$build/bin/ggml-peer-bench" --rows "$rows" --cols "$cols" --m "$ms" --types "$types" --threads "$threads" \
    --repetitions "$repetitions" --buffer "$b" --ggml-commit "$commit" "${extra[@]}"
done

if [[ $backend_ops == 1 ]]; then
  if [[ $threads != "$(nproc)" ]]; then
    echo "bench_ggml_peer.sh: test-backend-ops uses all $(nproc) CPUs, not --threads $threads" >&2
  fi
  type_re=$(tr ',' '|' <<< "$types")
  m_re=$(tr ',' '|' <<< "$ms")
  "$build/bin/test-backend-ops" perf -o MUL_MAT -b CPU \
      -p "^type_a=($type_re),type_b=f32,m=4096,n=($m_re),k=14336,bs=\\[1,1\\],nr=\\[1,1\\]" |
    python3 -c '
import json, re, sys
commit, threads = sys.argv[1], int(sys.argv[2])
bytes_per_weight = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "mxfp4": 17 / 32, "q4_0": 18 / 32}
for line in sys.stdin:
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    hit = re.search(r"MUL_MAT\((type_a=(\w+),type_b=\w+,m=(\d+),n=(\d+),k=(\d+)[^)]*)\):\s+(\d+) runs - +([\d.]+) us/run", line)
    if not hit:
        continue
    params, t, rows, n, k, runs, us = hit.groups()
    rows, n, k, us = int(rows), int(n), int(k), float(us)
    wbytes = bytes_per_weight.get(t, 0) * rows * k
    print(json.dumps({"peer": "ggml test-backend-ops", "ggml_commit": commit, "type": t, "rows": rows, "cols": k,
                      "m": n, "threads": threads, "runs": int(runs), "ms_per_call": us / 1e3,
                      "weight_gb_per_s": wbytes / (us * 1e-6) / 1e9 if wbytes else None,
                      "gflop_per_s": 2.0 * rows * n * k / (us * 1e-6) / 1e9, "params": params}))
' "$commit" "$(nproc)"
fi
