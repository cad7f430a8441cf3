"""Chat-encoding and DSML fixtures from DeepSeek's own reference encoder (PyPI deepseek-recipe, the
Rust encoder that SGLang serves DeepSeek V4/V4.1 with; docs/tokenizer.md says why this reference).

Conversations are generated here (named cases for each rendering rule, then seeded random long
histories) and rendered by deepseek_recipe.DeepseekV4Encoding / DeepseekV41Encoding. Each fixture
records the prompt text and the reference's token ids (its prompt encoding, with the real V4
tokenizer.json), or that the reference refuses to encode it (V4.1's <｜System｜> is not in the V4
tokenizer). Each assistant message with tool calls also yields a completion fixture: the text the
model would generate for it (the reference rendering after the generation prompt, without EOS),
with the reasoning, answer, tool calls and exact block bytes a parser must recover.

Usage: .venv/bin/python scripts/gen_chat_fixtures.py --tokenizer DIR/tokenizer.json --out FILE.json
"""
import argparse
import copy
import json
import random
import struct
import zlib

import deepseek_recipe as dr

SEED = 4242
FAMILIES = {"v4": dr.DeepseekV4Encoding, "v41": dr.DeepseekV41Encoding}
EFFORTS = [None, "low", "high", "xhigh", "max"]
WORDS = ("the agent reads a file then runs the tests and reports what failed while the cache stays warm "
         "session snapshot resume kernel latency tool result weather city price order").split()

WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                                           "units": {"type": "string", "enum": ["c", "f"]}},
                          "required": ["city"]}}
SEARCH = {"name": "search", "description": "Search the web — résumé 検索",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                          "filters": {"type": "object"}, "top_k": {"type": "integer"}}}}
RUN = {"name": "run_shell", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}
BARE = {"name": "noop"}
TOOLS = [WEATHER, SEARCH, RUN, BARE]


def text(rng, n=None):
    n = n or rng.randint(1, 30)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.75:
            out.append(rng.choice(WORDS))
        elif r < 0.82:
            out.append(rng.choice(["你好世界", "東京は晴れ", "😀🚀", "naïve", "١٢٣"]))
        elif r < 0.88:
            out.append(rng.choice(["<｜User｜>", "<think>", "</think>", "｜DSML｜", "<｜end▁of▁sentence｜>",
                                   "<｜DSML｜tool_calls>", "<tool_result>"]))
        elif r < 0.94:
            out.append(rng.choice(["\n", "\n\n", "  ", "\t", "12345", "3.25", "{\"k\": [1, 2]}"]))
        else:
            out.append(rng.choice([".", ",", "?", "!", ":", "-"]))
    return " ".join(out)


def arguments(rng, tool):
    name = tool["name"]
    if name == "get_weather":
        args = {"city": rng.choice(["Paris", "Rome", "São Paulo", "東京", 'New "York"', "a\\b\nc"])}
        if rng.random() < 0.6:
            args["days"] = rng.randint(1, 14)
        if rng.random() < 0.3:
            args["units"] = rng.choice(["c", "f"])
    elif name == "search":
        args = {"query": text(rng, rng.randint(1, 12))}
        if rng.random() < 0.5:
            args["filters"] = {"site": "example.org", "after": 2024, "tags": ["a", "b"], "exact": True, "lang": None}
        if rng.random() < 0.5:
            args["top_k"] = rng.randint(1, 50)
    elif name == "run_shell":
        args = {"cmd": rng.choice(["ls -la", "grep -rn 'x' .", "echo \"$HOME\" && printf '%s\\n' 1.5", "cat <<EOF\nhi\nEOF"])}
    else:
        args = {}
    return json.dumps(args, ensure_ascii=rng.random() < 0.3, separators=rng.choice([None, (",", ":")]))


def png(width, height):
    """A small solid-colour PNG: the reference wants real image bytes behind each placeholder."""
    rows = b"".join(b"\x00" + b"\x80\x40\x20" * width for _ in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def images(msg):
    return [dr.BytesImageSource(png(64, 32)) for _ in range(msg.get("n_images", 0))]


def tool_spec(t):
    return dr.ToolDefinition(t["name"], t.get("description"), t.get("parameters"))


def to_recipe(msg):
    role = msg["role"]
    if role == "system":
        return dr.SystemMessage(msg["content"])
    if role == "user":
        return dr.UserMessage(msg["content"], images(msg))
    if role == "tool":
        return dr.ToolMessage(msg["content"], msg.get("tool_call_id"), images(msg))
    if role == "latest_reminder":
        return dr.LatestReminderMessage(msg["content"])
    calls = [dr.ToolCall(c["id"], c["name"], c["arguments"]) for c in msg.get("tool_calls", [])]
    return dr.AssistantMessage(msg["content"], msg.get("reasoning"), calls or None, msg.get("prefix", False))


def render(case, tokenizer):
    conv_kwargs = dict(thinking_mode=case["thinking"], reasoning_effort=case["effort"],
                       tools=[tool_spec(t) for t in case["tools"]] or None, tool_choice=case["tool_choice"])
    rf = case["response_format"]
    if rf["kind"] == "json_object":
        conv_kwargs["response_format"] = "json_object"
    elif rf["kind"] == "json_schema":
        conv_kwargs["response_schema"] = rf["schema"]
    conv = dr.Conversation([to_recipe(m) for m in case["messages"]], **conv_kwargs)
    encoding = FAMILIES[case["family"]]().with_tokenizer(tokenizer)
    case["prompt"] = encoding.render_conversation(conv).prompt
    try:
        case["ids"] = encoding.encode(conv)
    except RuntimeError:
        case["ids"] = None
    return case


def case(name, messages, family="v4", thinking=True, effort=None, tools=(), tool_choice="auto",
         response_format=None):
    return {"name": name, "family": family, "thinking": thinking, "effort": effort,
            "tools": list(tools), "tool_choice": tool_choice,
            "response_format": response_format or {"kind": "text"}, "messages": messages}


def U(c, n_images=0): return {"role": "user", "content": c, "n_images": n_images}
def S(c): return {"role": "system", "content": c}
def R(c): return {"role": "latest_reminder", "content": c}
def T(c, i=None, n_images=0):
    return {"role": "tool", "content": c, "n_images": n_images, **({"tool_call_id": i} if i is not None else {})}
def C(i, n, a): return {"id": i, "name": n, "arguments": a}


def A(c, reasoning=None, calls=(), prefix=False):
    m = {"role": "assistant", "content": c, "tool_calls": list(calls), "prefix": prefix}
    if reasoning is not None:
        m["reasoning"] = reasoning
    return m


def named_cases():
    cases = []
    weather_turn = [U("Weather in Paris and Rome?"),
                    A("Let me check.", "Two cities, two calls.",
                      [C("c1", "get_weather", '{"city": "Paris", "days": 3}'), C("c2", "get_weather", '{"city":"Rome"}')]),
                    T("Rome: sunny", "c2"), T("Paris: rain", "c1"),
                    A("Paris rain, Rome sun.", "Summarise."), U("Thanks <｜User｜> bye")]
    for family in FAMILIES:
        for thinking in (True, False):
            for effort in EFFORTS:
                cases.append(case(f"{family}-effort-{effort}-thinking-{thinking}", [S("You are terse."), U("hi"), A("yo", "r" if thinking else None), U("again")],
                                  family=family, thinking=thinking, effort=effort))
        cases += [
            case(f"{family}-empty", [], family=family, thinking=False),
            case(f"{family}-spec-vector", [U("Say hello and tell me what model you are.")], family=family, thinking=False),
            case(f"{family}-tools-out-of-order", weather_turn, family=family, tools=[WEATHER, SEARCH]),
            case(f"{family}-tools-chat-mode", [S("sys")] + [dict(m, **({"reasoning": None} if m["role"] == "assistant" else {})) for m in weather_turn],
                 family=family, thinking=False, tools=TOOLS),
            # Results for some of the calls only, out of order. (With unknown or repeated ids the
            # reference's order has no simple rule; docs/tokenizer.md.)
            case(f"{family}-partial-results",
                 [U("q"), A("", None, [C("c", "noop", "{}"), C("a", "noop", "{}"), C("b", "noop", "{}")]), T("rb", "b"), T("rc", "c"),
                  A("", None, [C("x9", "noop", "{}"), C("x10", "noop", "{}")]), T("r10", "x10")],
                 family=family, thinking=False, tools=[BARE]),
            case(f"{family}-tool-then-user-text", [U("q"), A("", None, [C("1", "run_shell", '{"cmd": "ls"}')]), T("a.txt\nb.txt", "1"),
                                                  U("now delete them"), U("carefully")], family=family, thinking=False, tools=[RUN]),
            case(f"{family}-user-then-tool", [U("a"), T("r", "1"), U("b")], family=family, thinking=False, tools=[RUN]),
            case(f"{family}-reminder", [U("a"), R("be brief"), A("x"), U("b"), R("again")], family=family, thinking=False),
            case(f"{family}-prefix", [U("a"), A("The answer is", "think first", prefix=True)], family=family),
            case(f"{family}-prefix-chat", [U("a"), A("The answer is", prefix=True)], family=family, thinking=False),
            case(f"{family}-drop-reasoning", [U("a"), A("x", "r1"), U("b"), A("y", "r2"), U("c")], family=family),
            case(f"{family}-json-object", [S("s"), U("a")], family=family, response_format={"kind": "json_object"}, tools=[BARE]),
            case(f"{family}-json-schema", [U("a")], family=family, thinking=False,
                 response_format={"kind": "json_schema", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
            case(f"{family}-tool-choice-none", [U("a")], family=family, tools=[WEATHER], tool_choice="none"),
            case(f"{family}-tool-choice-required", [U("a")], family=family, thinking=False, tools=[WEATHER], tool_choice="required"),
            case(f"{family}-odd-arguments",
                 [U("a"), A("", None, [C("1", "search", "[1,2]"), C("2", "search", "not json"), C("3", "search", "5"),
                                       C("4", "search", ' {"query" : "x\\u00e9\\n\\"q\\"" , "filters": {"b": [true, null, 1.5]}} ')]),
                  T("ok", "1")], family=family, thinking=False, tools=[SEARCH]),
            # Image placeholders: the first n in a message's content stand for its images.
            case(f"{family}-images",
                 [U("compare <｜image｜> with <｜image｜> and <｜image｜>", 2),
                  A("", None, [C("1", "noop", "{}")]), T("screenshot: <｜image｜>", "1", 1)],
                 family=family, thinking=False, tools=[BARE]),
            case(f"{family}-special-text-in-content",
                 [S("<｜Assistant｜> in system"), U("<｜begin▁of▁sentence｜><think>｜DSML｜"), A("</think><｜end▁of▁sentence｜>", None),
                  U("<tool_result>x</tool_result>")], family=family, thinking=False, tools=[BARE]),
        ]
    return cases


def random_history(rng, index):
    family = rng.choice(list(FAMILIES))
    thinking = rng.random() < 0.6
    tools = rng.sample(TOOLS, rng.randint(1, len(TOOLS))) if rng.random() < 0.8 else []
    messages = [S(text(rng))] if rng.random() < 0.5 and family == "v4" else []
    n_call = 0
    for _ in range(rng.randint(3, 25)):
        messages.append(U(text(rng)))
        if rng.random() < 0.2:
            messages.append(R(text(rng, 5)))
        # The model's turns: tool calls answered by results (shuffled), then a final answer.
        while tools and rng.random() < 0.5:
            calls = []
            for _ in range(rng.randint(1, 4)):
                tool = rng.choice(tools)
                n_call += 1
                calls.append(C(f"call_{n_call}", tool["name"], arguments(rng, tool)))
            messages.append(A(text(rng) if rng.random() < 0.5 else "", text(rng) if thinking else None, calls))
            results = [T(text(rng), c["id"]) for c in calls]
            rng.shuffle(results)
            messages += results
        messages.append(A(text(rng), text(rng) if thinking else None))
    return case(f"random-{index}", messages, family=family, thinking=thinking, effort=rng.choice(EFFORTS), tools=tools)


def completions(cases):
    """The model output for each assistant message with tool calls, and what a parser must find."""
    out = []
    for c in cases:
        for i, m in enumerate(c["messages"]):
            if m["role"] != "assistant" or not m["tool_calls"] or m.get("prefix"):
                continue
            conv = dr.Conversation([to_recipe(U("q")), to_recipe(m)], thinking_mode=c["thinking"],
                                   tools=[tool_spec(t) for t in (c["tools"] or [BARE])])
            prompt = FAMILIES[c["family"]]().render_conversation(conv).prompt
            start = prompt.index("<｜Assistant｜>") + len("<｜Assistant｜>")
            header = "<think>" if m.get("reasoning") is not None else "</think>"
            if c["thinking"] != (m.get("reasoning") is not None):
                continue  # the model cannot have produced this turn after its generation prompt
            block_open = "<｜DSML｜tool_calls>" if c["family"] == "v4" else "<｜DSML｜ calls>"
            if "</think>" in (m.get("reasoning") or "") or block_open in m["content"]:
                continue  # as text these spellings are the markup itself (docs/tokenizer.md)
            assert prompt[start:].startswith(header)
            body = prompt[start + len(header):prompt.rindex("<｜end▁of▁sentence｜>")]
            after_answer = (m["reasoning"] + "</think>" if c["thinking"] else "") + m["content"]
            assert body.startswith(after_answer), (c["name"], body[:200], after_answer[:200])
            expected_calls = []
            # The V4 reference writes calls sorted by id (stable), V4.1 as given.
            calls = m["tool_calls"]
            if c["family"] == "v4":
                calls = sorted(calls, key=lambda call: call["id"].encode())
            for call in calls:
                try:
                    args = json.loads(call["arguments"])
                except ValueError:
                    args = None
                if not isinstance(args, dict):
                    args = {"arguments": call["arguments"]}
                expected_calls.append({"name": call["name"], "arguments": json.dumps(args, ensure_ascii=False)})
            out.append({"name": c["name"] + f"-completion-{i}", "family": c["family"], "thinking": c["thinking"], "completion": body,
                        "reasoning": m.get("reasoning") or "", "content": m["content"],
                        "raw_tool_calls": body[len(after_answer):], "tool_calls": expected_calls})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tokenizer = dr.Tokenizer.from_file(args.tokenizer)
    rng = random.Random(SEED)
    cases = named_cases() + [random_history(rng, i) for i in range(40)]
    cases = [render(copy.deepcopy(c), tokenizer) for c in cases]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"chat": cases, "completions": completions(cases)}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
