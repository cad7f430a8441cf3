"""Golden data for the tokenizer tests: a generated corpus of at least 5 MB and the token ids that
Hugging Face `tokenizers` (the reference) gives for it with the real DeepSeek V4 tokenizer.json.

Nothing here is third-party text: every document is generated from a fixed seed out of word lists
and templates written for this script, random code points, and random bytes. Kinds of document:
English-like prose, Chinese/Japanese text, code, JSON, emoji sequences, runs of whitespace and
digits, random Unicode from every plane, invalid UTF-8, special-token spellings, and a few very long
runs. HF accepts only valid strings, so a document's expected ids are those of its bytes decoded
with errors="replace" (the rule hippo's tokenizer applies to invalid input, engine/tokenizer/utf8.h).

Output (binary, little-endian), one record per document:
    u32 n_bytes, bytes, u32 n_ids, i32 ids[n_ids]
Usage: .venv/bin/python scripts/gen_tokenizer_golden.py --tokenizer DIR/tokenizer.json --out FILE
"""
import argparse
import json
import random
import struct
import sys

from tokenizers import Tokenizer

MIN_CORPUS_BYTES = 5 * 1024 * 1024
SEED = 20261202

WORDS = (
    "the of and to in is it that for on with as was at by be this from or have an not are but which "
    "one all were when we there can more if will about up out so what its into than them only time "
    "could new some these two may first then do any like my now over such our man me even most made "
    "after also did many before must through back years where much your way well down should because "
    "each just those people how too little state good very make world still own see men work long get "
    "here between both life being under never day same another know while last might us great old year "
    "tokenizer session snapshot resume agent kernel tensor model stream socket latency throughput cache "
    "don't it's we'll they're I'm you've can't O'Neil naïve café résumé coöperate Zürich Ελλάδα Москва"
).split()
PUNCT = list(".,;:!?") + ["...", " -", " --", " (", ")", '"', "'", " [", "]", " {", "}"]
CJK_COMMON = [chr(c) for c in range(0x4E00, 0x9FA6)]
KANA = [chr(c) for c in range(0x3041, 0x3097)] + [chr(c) for c in range(0x30A1, 0x30FB)] + ["ー", "・"]
CJK_PUNCT = list("，。！？：；、“”‘’（）《》【】—…「」『』")
EMOJI = [chr(c) for c in list(range(0x1F600, 0x1F650)) + list(range(0x1F300, 0x1F5FF, 7)) + list(range(0x1F900, 0x1F9FF, 5))]
SKIN = [chr(c) for c in range(0x1F3FB, 0x1F400)]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", "\u00a0", "\u3000", "\u2003", "\u0085", "\u200b", "\u2028",
          "\u000b", "\u000c", "\u001c", "\u1680", "\u202f", "\u205f"]
DIGITS = "0123456789"
OTHER_DIGITS = ["１２３", "٣٤٥", "²³", "½", "Ⅻ", "〇", "१२३", "๑๒", "⑳"]
SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
            "｜DSML｜", "<｜DSML｜tool_calls>", "<｜latest_reminder｜>", "<｜image｜>", "<｜Use", "<think", "｜DSML",
            "<｜place▁holder▁no▁799｜>", "<｜fim▁hole｜>", "<|EOT|>", "<dsml:", "</dsml:", "<｜/box｜>"]
KEYWORDS = ["def", "return", "if", "else", "for", "while", "class", "import", "const", "auto", "void", "int",
            "struct", "namespace", "template", "fn", "let", "mut", "impl", "pub", "async", "await", "lambda"]


def word(rng):
    if rng.random() < 0.8:
        return rng.choice(WORDS)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 14)))


def english(rng):
    out = []
    for _ in range(rng.randint(20, 400)):
        w = word(rng)
        if rng.random() < 0.08:
            w = w.capitalize()
        if rng.random() < 0.03:
            w = w.upper()
        out.append(w)
        if rng.random() < 0.12:
            out.append(rng.choice(PUNCT))
        if rng.random() < 0.03:
            out.append(rng.choice(["\n", "\n\n", "  ", " 2026", " $3.50", " 10%", " #42", " @user", " e.g.", " U.S."]))
    return " ".join(out)


def chinese(rng):
    out = []
    for _ in range(rng.randint(10, 300)):
        r = rng.random()
        if r < 0.6:
            out.append("".join(rng.choice(CJK_COMMON) for _ in range(rng.randint(1, 8))))
        elif r < 0.75:
            out.append("".join(rng.choice(KANA) for _ in range(rng.randint(1, 6))))
        elif r < 0.9:
            out.append(rng.choice(CJK_PUNCT))
        elif r < 0.95:
            out.append(" " + word(rng) + " ")
        else:
            out.append(str(rng.randint(0, 100000)))
    return "".join(out)


def identifier(rng):
    parts = [word(rng).strip("'.") or "x" for _ in range(rng.randint(1, 3))]
    return rng.choice(["_".join(parts), parts[0] + "".join(p.capitalize() for p in parts[1:])])


def code(rng):
    lines = []
    indent = 0
    for _ in range(rng.randint(5, 120)):
        pad = rng.choice(["    ", "\t", "  "]) * indent
        kind = rng.random()
        if kind < 0.2:
            lines.append(f"{pad}{rng.choice(KEYWORDS)} {identifier(rng)}({identifier(rng)}, {rng.randint(0, 999)}) {{")
            indent = min(indent + 1, 6)
        elif kind < 0.35 and indent:
            indent -= 1
            lines.append(pad[:-1] + "}")
        elif kind < 0.6:
            lines.append(f"{pad}{identifier(rng)} = {identifier(rng)}[{rng.randint(0, 64)}] + 0x{rng.randint(0, 1 << 32):x};")
        elif kind < 0.75:
            lines.append(f"{pad}// {english(rng)[:rng.randint(10, 90)]}")
        elif kind < 0.85:
            lines.append(f'{pad}printf("%d: %s\\n", {identifier(rng)}->{identifier(rng)}, "{word(rng)}");')
        else:
            lines.append(f"{pad}if ({identifier(rng)} != nullptr && x <= {rng.random():.4f}) return -{rng.randint(1, 9)};")
    return rng.choice(["\n", "\r\n"]).join(lines) + "\n"


def json_value(rng, depth):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice([rng.randint(-10**6, 10**6), round(rng.uniform(-1000, 1000), 3), True, False, None,
                           word(rng), chinese(rng)[:12], "".join(rng.choice(EMOJI) for _ in range(2))])
    if r < 0.65:
        return {identifier(rng): json_value(rng, depth + 1) for _ in range(rng.randint(0, 6))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 6))]


def json_doc(rng):
    return json.dumps(json_value(rng, 0), ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, 2, 4]))


def emoji(rng):
    out = []
    for _ in range(rng.randint(5, 100)):
        r = rng.random()
        e = rng.choice(EMOJI)
        if r < 0.2:
            e += rng.choice(SKIN)
        elif r < 0.35:
            e = e + "\u200d" + rng.choice(EMOJI)
        elif r < 0.45:
            e = chr(0x1F1E6 + rng.randint(0, 25)) + chr(0x1F1E6 + rng.randint(0, 25))
        elif r < 0.55:
            e = rng.choice("☀☁★♥✓✔") + "\ufe0f"
        out.append(e)
        if rng.random() < 0.3:
            out.append(rng.choice([" ", word(rng), "!", "\n"]))
    return "".join(out)


def runs(rng):
    out = []
    for _ in range(rng.randint(10, 200)):
        r = rng.random()
        if r < 0.35:
            out.append("".join(rng.choice(SPACES) for _ in range(rng.randint(1, 12))))
        elif r < 0.6:
            out.append("".join(rng.choice(DIGITS) for _ in range(rng.randint(1, 40))))
        elif r < 0.7:
            out.append(rng.choice(OTHER_DIGITS))
        elif r < 0.8:
            out.append(rng.choice(["-", ".", ",", "+", "/", ":", "e", "E", "x"]))
        else:
            out.append(word(rng))
    return "".join(out)


def random_unicode(rng):
    out = []
    for _ in range(rng.randint(10, 300)):
        plane = rng.random()
        if plane < 0.5:
            cp = rng.randint(0x20, 0xFFFF)
        elif plane < 0.8:
            cp = rng.randint(0x10000, 0x3FFFF)
        else:
            cp = rng.randint(0x0, 0x10FFFF)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        out.append(chr(cp))
        if rng.random() < 0.1:
            out.append(chr(rng.choice([0x0301, 0x0308, 0x20DD, 0x093F, 0x0E31, 0xFE0F])))
        if rng.random() < 0.2:
            out.append(rng.choice([" ", "a", "1", "!", "\n"]))
    return "".join(out)


def invalid_utf8(rng):
    pieces = []
    for _ in range(rng.randint(5, 100)):
        r = rng.random()
        if r < 0.3:
            pieces.append(bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 8))))
        elif r < 0.5:
            full = rng.choice(["é", "中", "😀", "ｶ", "𝔘"]).encode()
            pieces.append(full[:rng.randint(1, len(full) - 1)] if len(full) > 1 else b"\x80")
        elif r < 0.65:
            pieces.append(rng.choice([b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
                                      b"\xff", b"\xfe", b"\xc2", b"\xef\xbd", b"\x80\x80\x80"]))
        else:
            pieces.append(english(rng)[:rng.randint(1, 60)].encode())
    return b"".join(pieces)


def specials(rng):
    out = []
    for _ in range(rng.randint(5, 80)):
        r = rng.random()
        if r < 0.4:
            out.append(rng.choice(SPECIALS))
        elif r < 0.7:
            out.append(word(rng))
        else:
            out.append(rng.choice([" ", "\n", "<", "｜", "<<", "</", chinese(rng)[:5]]))
    return "".join(out)


GENERATORS = [english, chinese, code, json_doc, emoji, runs, random_unicode, specials]


def corpus(rng):
    docs = [b"", b" ", b"\n", "Hello!".encode(), "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ".encode()]
    # Long runs: BPE over one 60 KB piece, whitespace and digit runs far beyond any cache.
    docs.append(("".join(rng.choice("abcdefghij") for _ in range(60000))).encode())
    docs.append((" " * 20000 + "x" + "\n" * 3000 + "\t \n" * 500).encode())
    docs.append(("".join(rng.choice(DIGITS) for _ in range(10000))).encode())
    docs.append(("".join(rng.choice(CJK_COMMON) for _ in range(8000))).encode())
    total = sum(len(d) for d in docs)
    while total < MIN_CORPUS_BYTES:
        if rng.random() < 0.08:
            doc = invalid_utf8(rng)
        else:
            doc = rng.choice(GENERATORS)(rng).encode()
            if rng.random() < 0.15:
                doc = doc + rng.choice(GENERATORS)(rng).encode()
        docs.append(doc)
        total += len(doc)
    return docs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, help="path of tokenizer.json")
    parser.add_argument("--out", required=True, help="output file")
    args = parser.parse_args()
    tokenizer = Tokenizer.from_file(args.tokenizer)
    docs = corpus(random.Random(SEED))
    texts = [d.decode("utf-8", errors="replace") for d in docs]
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    with open(args.out, "wb") as f:
        for doc, enc in zip(docs, encodings):
            f.write(struct.pack("<I", len(doc)))
            f.write(doc)
            f.write(struct.pack("<I", len(enc.ids)))
            f.write(struct.pack(f"<{len(enc.ids)}i", *enc.ids))
    print(f"{len(docs)} documents, {sum(len(d) for d in docs)} bytes, "
          f"{sum(len(e.ids) for e in encodings)} tokens -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
