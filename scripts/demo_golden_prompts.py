#!/usr/bin/env python3
"""The two prompts of the demo model's golden data (tests/data/golden/README.md), taken from the
held-out split of the corpus the model was trained on and cut where an answer starts, so that the
reference's greedy continuation is the model's own kind of output:

  tool-call   the first session whose first answer is a tool call starting at token 556 or later
  multi-turn  the first session with an answer starting at token 1,405 or later, up to that answer

(556 and 1,405 tokens hold the DSpark golden's anchors 60, 300, 555 and 1000, 1404.)

    scripts/demo_golden_prompts.py CORPUS OUT.json    # CORPUS: gen_agent_corpus.py's output folder
"""
import argparse
import json
from pathlib import Path

TOOL_CALL_FROM = 556
MULTI_TURN_FROM = 1405


def golden_prompts(corpus: Path) -> list[dict]:
    tool_call = multi_turn = None
    with open(corpus / "heldout.jsonl") as texts, open(corpus / "heldout.tokens.jsonl") as tokens:
        for text_line, token_line in zip(texts, tokens):
            session, rendered = json.loads(text_line), json.loads(token_line)
            answers = [m for m in session["messages"] if m["role"] == "assistant"]
            starts = [begin for begin, _ in rendered["answers"]]
            assert len(answers) == len(starts), "one answer span per assistant message"
            if tool_call is None and starts[0] >= TOOL_CALL_FROM and answers[0].get("tool_calls"):
                tool_call = {"name": "tool-call", "ids": rendered["ids"][: starts[0]]}
            late = [s for s in starts if s >= MULTI_TURN_FROM]
            if multi_turn is None and late:
                multi_turn = {"name": "multi-turn", "ids": rendered["ids"][: late[0]]}
            if tool_call and multi_turn:
                return [tool_call, multi_turn]
    raise SystemExit(f"{corpus}: no held-out session for {'tool-call' if tool_call is None else 'multi-turn'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    prompts = golden_prompts(args.corpus)
    args.out.write_text(json.dumps(prompts) + "\n")
    print(", ".join(f"{p['name']}: {len(p['ids'])} tokens" for p in prompts))


if __name__ == "__main__":
    main()
