"""Tokenizer benchmark against its peer, in one run: Hugging Face `tokenizers` (Rust, one thread)
and `hippo bench tokenizer` encode the same generated corpus (scripts/gen_tokenizer_golden.py), and
hippo checks each of its encodings against the ids HF produced. Prints one table; results belong in
docs/benchmarks/tokenizer.md.

Usage: .venv/bin/python scripts/bench_tokenizer.py --hippo build/release/hippo [--repetitions 5]
"""
import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import cpu_model  # noqa: E402

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread, before tokenizers is imported
os.environ["RAYON_NUM_THREADS"] = "1"

from tokenizers import Tokenizer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_tokenizer_golden as golden  # noqa: E402


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hippo", required=True, help="the hippo binary (a release build)")
    parser.add_argument("--tokenizer", default=os.path.join(root, ".cache/deepseek-v4-tokenizer/tokenizer.json"))
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()

    tokenizer = Tokenizer.from_file(args.tokenizer)
    docs = golden.corpus(random.Random(golden.SEED))
    # Two measurements: the whole corpus, and the corpus without its four pathological documents
    # (single pieces of 8K-60K characters), where HF's BPE cost dominates.
    corpora = {"whole corpus": docs, "without the 4 longest pieces": [d for d in docs if len(d) < 20000]}
    print(f"machine   {cpu_model()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    print(f"{'corpus':30} {'encoder':24} {'MB/s (median)':>14} {'s median':>9} {'s min':>7} {'s max':>7}")
    for name, part in corpora.items():
        hf, hippo = measure(args, tokenizer, part)
        mb = sum(len(d) for d in part) / 1e6
        print(f"{name:30} {'HF tokenizers, 1 thread':24} {mb / hf[0]:14.1f} {hf[0]:9.3f} {hf[1]:7.3f} {hf[2]:7.3f}")
        print(f"{'':30} {'hippo, 1 thread':24} {hippo['encode_mb_per_second']:14.1f} "
              f"{hippo['encode_seconds_median']:9.3f} {hippo['encode_seconds_min']:7.3f} {hippo['encode_seconds_max']:7.3f}")
        print(f"{'':30} hippo / HF: {hippo['encode_mb_per_second'] / (mb / hf[0]):.2f}x; {len(part)} documents, "
              f"{mb:.2f} MB, {hippo['tokens']} tokens")
        print(f"{'':30} streaming detokenisation + DSML parsing: {hippo['stream_ns_per_token']:.1f} ns/token over the "
              f"corpus, {hippo['tool_call_stream_ns_per_token']:.1f} ns/token over "
              f"{hippo['tool_call_stream_tokens']} tokens of tool-call completions")


def measure(args, tokenizer, docs):
    """(median, min, max) seconds of HF over `docs`, and hippo's JSON report on the same documents."""
    texts = [d.decode("utf-8", errors="replace") for d in docs]

    def encode_all():
        return [tokenizer.encode(t, add_special_tokens=False).ids for t in texts]

    ids = encode_all()  # warm-up, and the expected ids for hippo
    seconds = []
    for _ in range(args.repetitions):
        start = time.perf_counter()
        encode_all()
        seconds.append(time.perf_counter() - start)
    with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
        for doc, doc_ids in zip(docs, ids):
            f.write(len(doc).to_bytes(4, "little") + doc + len(doc_ids).to_bytes(4, "little"))
            f.write(b"".join(i.to_bytes(4, "little", signed=True) for i in doc_ids))
        corpus_path = f.name
    try:
        out = subprocess.run([args.hippo, "bench", "tokenizer", "--tokenizer", args.tokenizer, "--corpus", corpus_path,
                              "--repetitions", str(args.repetitions), "--json"],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(corpus_path)
    return (statistics.median(seconds), min(seconds), max(seconds)), json.loads(out)


if __name__ == "__main__":
    main()
