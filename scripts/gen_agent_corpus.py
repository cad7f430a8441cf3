#!/usr/bin/env python3
"""Synthetic agent conversations for hippo's demo model (scripts/train_demo.py), seeded and
reproducible, rendered to token ids by the `hippo` binary itself.

    .venv/bin/python scripts/gen_agent_corpus.py --seed 1 --sessions 20000 --out DIR \\
        [--spaced-copies [--repo-names]] [--team-share S] [--fixed-team-answers] [--extra-words N]
        [--hippo build/release/hippo] [--tokenizer .cache/deepseek-v4-tokenizer]

writes, for each split (train, heldout):
  DIR/{split}.jsonl         one session per line, a chat completions request whose messages end
                            with the assistant's answer (`hippo model render`'s input), plus
                            "task": what the session tests (its kinds and expected answers, for
                            scripts/eval_demo.py)
  DIR/{split}.tokens.jsonl  `hippo model render`'s output for it: {"ids", "answers": [[b, e], ...]}
  DIR/manifest.json         seed, counts, token totals, the sha256 of every file

What the sessions hold (a session is one to four tasks, each a user turn and the assistant's answer,
with tool rounds between):
  calc     arithmetic: the assistant calls `calculator` with the expression taken from the question
           (operators written as symbols or words) and quotes the result
  search   "which files mention X": `search_files` with X, the answer lists the paths it returned
  both     a calculation and a search in one question: two calls in one block (the README's demo)
  memory   remember / recall through the memory tools, within one session or from a fresh one
  fact     a fact stated early and asked for later, answered from the conversation (no tool)
  copy     repeat a passage exactly
  chat     greetings, thanks, who are you
  plan     examples/multi_agent.py's coordinator: split a task (a trip, an event, a report) into n
           numbered parts; later combine the workers' answers (quoting them) into one
  part     one of its workers: answer a part briefly
Tool results are what examples/tool_agent.py returns for such calls (its TOOLS and INSTRUCTIONS are
imported, so the trained model meets the example's exact prompt). A tenth of the sessions run in
thinking mode with a short reasoning span. Call ids are numbered per session from call_0, as the
runtime numbers the calls it parses.

With --spaced-copies, copies keep their spelling. The tokenizer writes a word after a space in other
ids than a bare one (` thunder` is one id, `thunder` after `>` two), and the demo model learnt to
copy ids but not, in 4,000 steps, to respell (docs/BENCHMARKS.md). So where the assistant copies the
user's words or a tool's result, the copy goes where it gets the same ids as its source: a tool-call
argument taken from the question starts with the space it had there (the example's tools strip
what they look up; `recall` returns a value as `remember` stored it), a listing of files puts each
on its own line as the search result does, and a passage to repeat or the team's answers to combine
start on a line of their own. It also adds DEMO_WORDS, which the README's examples ask about.
models/demo was trained on it; without it the corpus is the one of the models before.

With --repo-names (after --spaced-copies), three in ten file listings are of a repository's own
files (REPO_FILES: this repository's docs, as the README's task searches them, and names every
repository has), in both splits: the model can only write ids its training had. A single file
"mentions". --team-share sets the share of examples/multi_agent.py's sessions (0.08).
--fixed-team-answers gives each team part one answer made of the task's own words (FIXED_TEAM_ANSWERS)
and a plan of n parts the first n: an answer with a word drawn from many has no likely next id, so
greedy decoding wrote none of them (0 of 15 held-out parts; slots left out or filled with `the`, 3 looping).

Held-out split: the names and words a task asks about or answers with, fact keys, file names,
arithmetic questions and team tasks are partitioned by a hash of their text, so a held-out task
asks nothing that a training task asked. The tokens themselves are shared: copy passages in both
splits draw on every name, word, key and number, so the model learns to read and write each token
it will meet. The corpus checks this: every token of a held-out answer also occurs in a training
answer (a token that never does has an untrained head row and cannot be written).

With --extra-words N, the training split's tasks also search for, and remember and copy, N more words
and N / 4 more names (vocabulary_words), which the held-out split never uses: with a few hundred
words in these slots the model learnt the training split's words and wrote one of them for a
held-out word it should have copied; among thousands no guess pays, only the copy (what that did:
docs/BENCHMARKS.md). The held-out split is unchanged (byte for byte), so held-out figures stay
comparable; without the option the corpus is the same as before it existed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import subprocess
import sys
import zlib
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import multi_agent  # noqa: E402  (the team example's coordinator and worker instructions)
import tool_agent  # noqa: E402  (the example's tools, schemas and instructions)

SPLITS = ("train", "heldout")

NAMES = """Ana Ben Carla Dmitri Elena Farid Greta Hugo Ines Jonas Kira Luca Mara Nils Olga Pavel Quinn Rosa
Sami Tara Umar Vera Wim Xenia Yara Zoe Amir Bruno Celia Dario Emil Fiona Goran Hana Ivan Jana Karl Lena
Milo Nora Oskar Petra Rafael Sofia Teo Uma Viktor Wanda Yusuf Zara Arne Bianca Cyril Dana Erik Flora Gil
Heidi Igor Julia Kai Lotte Marco Nina Otto Pia Raul Selma Tomas Ulla Vince Willa Alba Boris Clara Dina
Enzo Freya Gus Hilde Ilse Joel Kasia Leon Mila Noah Ola Pablo Rita Sven Tilda""".split()

WORDS = """snapshot river garden budget invoice meeting planet engine kernel window cache token printer
battery ticket harbor forest castle market bridge tunnel island desert rocket shadow lantern compass
orchard violin marble canvas pepper walnut falcon badger otter heron beacon anchor saddle velvet copper
silver timber quartz lemon cedar maple thistle meadow canyon glacier summit valley delta prairie tundra
monsoon breeze thunder ember cinder crystal prism signal circuit module plugin socket router server
ledger report draft outline chapter recipe menu schedule roster payroll receipt contract license patent
survey census poll ballot agenda memo notice permit visa passport luggage cargo freight parcel courier
helmet jacket glove boot scarf mitten blanket pillow mattress curtain carpet ladder bucket hammer chisel
wrench pliers drill shovel rake hose sprinkler fence gate hinge latch bolt rivet gear pulley lever valve
piston turbine boiler furnace chimney attic cellar pantry porch balcony terrace courtyard fountain statue
tower dome arch column beam rafter shingle gutter drain pipe faucet sink kettle teapot saucer ladle whisk
skillet oven toaster blender freezer""".split()

EXTENSIONS = ["md", "txt", "rst", "log", "csv", "json", "py", "cpp", "toml", "yaml"]
FOLDERS = ["", "", "", "notes/", "docs/", "src/", "reports/", "archive/", "drafts/", "data/"]

FACT_KEYS = """locker code|favourite colour|dog's name|cat's name|meeting room|flight number|train platform|
gate number|hotel room|parking spot|bike lock code|wifi password|project name|team name|lucky number|
birthday|home town|car plate|desk number|badge id|order number|table number|seat number|account id|
booking code|shoe size|favourite fruit|favourite song|sister's name|brother's name|manager's name|
dentist's name|neighbour's name|street name|boat's name|horse's name|garage code|safe code|pin hint|
backup day""".replace("\n", "").split("|")
# --spaced-copies: words the README's and the examples' questions use ("which docs mention snapshots?").
DEMO_WORDS = "snapshots sessions agents".split()
# --repo-names: file names of a real repository, this one's docs among them (both splits).
REPO_FILES = ["ARCHITECTURE.md", "BENCHMARKS.md", "agents.md", "benchmarks/model.md", "benchmarks/storage.md",
              "benchmarks/tokenizer.md", "engine.md", "engram.md", "model-checkpoint.md", "protocol.md",
              "reference-model.md", "storage-format.md", "tokenizer.md", "README.md", "CHANGELOG.md",
              "CONTRIBUTING.md", "LICENSE", "SECURITY.md", "CMakeLists.txt", "Makefile", "pyproject.toml",
              "requirements.txt", "docs/README.md", "examples/README.md", "tests/README.md"]
COLOURS = "red blue green yellow purple orange teal indigo crimson amber olive navy maroon ivory".split()

CHAT = [
    (["Hi!", "Hello!", "Hey there.", "Good morning!", "Hi, how are you?"],
     ["Hello! How can I help you today?", "Hi! What can I do for you?", "Hello! I am ready when you are."]),
    (["Thanks!", "Thank you.", "Great, thanks.", "Perfect, thank you!"],
     ["You are welcome!", "Glad to help.", "Any time."]),
    (["Who are you?", "What are you?", "What can you do?"],
     ["I am a small demo assistant running on hippo. I can do arithmetic with a calculator, search files "
      "and remember things for you.", "A small demo model served by hippo: I use tools to calculate, search "
      "files and remember facts."]),
    (["Bye!", "Goodbye.", "See you later."], ["Goodbye!", "See you!", "Bye! Come back any time."]),
]

# Team tasks (examples/multi_agent.py): what a coordinator splits, into which parts, and how a worker
# answers each part (its fields drawn per answer).
CITIES = "Lisbon Porto Madrid Paris Berlin Vienna Prague Rome Oslo Dublin Athens Krakow Seville Lyon Munich Zurich".split()
EVENTS = "party dinner picnic workshop meeting wedding concert".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
FOODS = "soup bread cheese salad fish cake rice pasta olives pie".split()
ADJECTIVES = "old new small large busy quiet clean noisy cheap modern".split()
TEAM_TASKS = [
    (["Plan a trip to {city}", "Plan a three-day trip to {city}", "Plan a weekend in {city}"],
     [("Travel to {city} and back", "Take the {a} train on {day} morning and come back on {day2} evening."),
      ("Where to stay in {city}", "Stay in a {a} hotel near the {w} in the centre of {city}."),
      ("What to see in {city}", "In {city}, see the {w} and the {w2}, then walk by the {w3}."),
      ("Where to eat in {city}", "Eat at the {w} market in {city} and try the {food} and the {food2}."),
      ("What to pack for {city}", "Pack a {w}, a {w2} and good shoes for the {a} streets of {city}.")]),
    (["Organise a {event} for {name}", "Plan {name}'s {event}", "Prepare a {event} for {name}"],
     [("Choose a date and a place for the {event}", "Hold the {event} on {day} at the {w}."),
      ("Invite the guests for {name}'s {event}", "Invite {name2}, {name3} and {name4}."),
      ("Plan the food for the {event}", "Serve {food}, {food2} and a {food3}."),
      ("Plan the music for the {event}", "Ask {name2} to play the violin at the {event}."),
      ("Plan the budget for the {event}", "Keep the {event} under {n} euros, food first.")]),
    (["Write a short report about the {word}", "Review the {word}", "Assess the state of the {word}"],
     [("Describe the {word}", "The {word} is {a} and {a2}."),
      ("List the problems with the {word}", "The {word} has a broken {w} and a {a} {w2}."),
      ("Suggest improvements to the {word}", "Replace the {w} and clean the {w2} of the {word}."),
      ("Estimate the cost of the {word}", "The {word} costs about {n} euros a year."),
      ("Name who looks after the {word}", "{name2} looks after the {word}, with {name3} on {day}.")]),
]

# --fixed-team-answers: one answer per part of TEAM_TASKS (same order), with only the task's own
# fields, which the worker's prompt holds: a worker's answer is a function of its part, so greedy
# decoding can give it (a word drawn from many has no likely continuation).
FIXED_TEAM_ANSWERS = [
    ["Take the early train to {city} on Saturday and come back on Sunday evening.",
     "Stay in a quiet hotel in the centre of {city}.",
     "In {city}, see the old town and the main square, then walk by the river.",
     "Eat at the market in {city} and try the local bread and cheese.",
     "Pack light clothes, a rain jacket and good shoes for the streets of {city}."],
    ["Hold the {event} on Saturday evening at home.",
     "Invite {name}'s family and closest friends.",
     "Serve soup, bread, cheese and a cake.",
     "Ask a friend of {name} to play the guitar at the {event}.",
     "Keep the {event} under 500 euros, food first."],
    ["The {word} is old but still works.",
     "The {word} is worn and needs repairs.",
     "Repair the {word} and check it every month.",
     "The {word} costs about 200 euros a year.",
     "The caretaker looks after the {word}."],
]
TEAM_KINDS = ("plan", "part", "combine")  # single_task's kinds of team sessions

CALC_QUESTIONS = ["What is {q}?", "Compute {q}.", "Calculate {q}, please.", "How much is {q}?", "what's {q}",
                  "Please work out {q}.", "Can you tell me {q}?", "{q} = ?"]
CALC_ANSWERS = ["{e} = {r}.", "The answer is {r}.", "{e} is {r}.", "It is {r}.", "{r}"]
WORD_OPS = {"+": ["plus"], "-": ["minus"], "*": ["times", "multiplied by"], "/": ["divided by"]}
SEARCH_QUESTIONS = ["Which docs mention {w}?", "Which of my files mention {w}?", "Search my files for '{w}'.",
                    "Find the files that talk about {w}.", "Where is {w} mentioned?", "Which notes mention {w}?"]
GLOB_QUESTIONS = [("Which markdown files mention {w}?", "*.md"), ("Which text files mention {w}?", "*.txt"),
                  ("Which Python files mention {w}?", "*.py")]
BOTH_QUESTIONS = ["What is {q}, and which docs mention {w}?", "Compute {q}. Also, which files mention {w}?",
                  "Which docs mention {w}? And what is {q}?"]


def heldout(text: str) -> bool:
    """The split a name, word, key or question belongs to: a stable hash, one in eight held out."""
    return zlib.crc32(text.encode()) % 8 == 0


def pool(items, split):
    chosen = [x for x in items if heldout(x) == (split == "heldout")]
    assert chosen, "an empty pool"
    return chosen


# What copy passages are made of, in both splits: every atom a task of either split may need to write
# (and, below, numbers, file names and codes made the way tasks make them).
PASSAGE_ATOMS = NAMES + WORDS + FACT_KEYS + COLOURS
CODE_LETTERS = "ABCDEFGHKMNPRSTXZ"


DICTIONARY = Path("/usr/share/dict/words")  # Debian's wamerican (scripts/setup installs it)


def vocabulary_words(tokenizer_dir: str, n_words: int, n_names: int) -> tuple[list[str], list[str]]:
    """--extra-words: n_words lowercase words and n_names capitalised ones for the training split
    alone: dictionary words (DICTIONARY) that the tokenizer holds as one id after a space and writes
    bare in at most three ids, five to nine letters, no atom of either split, in the tokenizer's
    order (about its merge order) past the 300 commonest such words (which, their, about ...)."""
    from tokenizers import Tokenizer

    if not DICTIONARY.is_file():
        raise SystemExit(f"gen_agent_corpus: --extra-words needs {DICTIONARY} (apt-get install wamerican)")
    dictionary = set(DICTIONARY.read_text().split())
    tokenizer = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
    vocab = tokenizer.get_vocab()
    taken = {w.lower() for atom in PASSAGE_ATOMS for w in atom.replace("'", " ").split()}
    words, names = [], []
    for token, _ in sorted(vocab.items(), key=lambda item: item[1]):
        w = token[1:]
        if not (token.startswith("\u0120") and w.isascii() and w.isalpha() and 5 <= len(w) <= 9):
            continue
        if w.lower() in taken or w not in dictionary or len(tokenizer.encode(w, add_special_tokens=False).ids) > 3:
            continue
        if w.islower():
            words.append(w)
        elif w[0].isupper() and w[1:].islower():
            names.append(w)
    words, names = words[300: 300 + n_words], names[:n_names]
    if len(words) < n_words or len(names) < n_names:
        raise SystemExit(f"gen_agent_corpus: only {len(words)} words and {len(names)} names qualify")
    return words, names


def file_name(rng, words=WORDS):
    a, b = rng.choice(words), rng.choice(words)
    return f"{rng.choice(FOLDERS)}{a}{rng.choice(['-', '_'])}{b}.{rng.choice(EXTENSIONS)}"


def code(rng):
    return f"{rng.choice(CODE_LETTERS)}{rng.choice(CODE_LETTERS)}-{rng.randint(10, 9999)}"


def join_names(names):
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def passage_atoms(spaced_copies: bool):
    """What copy passages are made of (PASSAGE_ATOMS), with DEMO_WORDS where --spaced-copies adds them."""
    return NAMES + WORDS + (DEMO_WORDS if spaced_copies else []) + FACT_KEYS + COLOURS


class Session:
    """One conversation in the chat completions form, and what it asks (for evaluation)."""

    def __init__(self, tools, instructions, thinking: bool):
        self.tools = tools
        self.messages = [{"role": "system", "content": instructions}] if instructions else []
        self.thinking = thinking
        self.n_calls = 0
        self.tasks = []

    def user(self, text):
        self.messages.append({"role": "user", "content": text})

    def answer(self, text, reasoning=None):
        m = {"role": "assistant", "content": text}
        if self.thinking:
            m["reasoning_content"] = reasoning or ""
        self.messages.append(m)

    def calls(self, calls, reasoning=None):
        """Calls (name, arguments dict, result) in one block, then their results."""
        block = []
        ids = []
        for name, arguments, _ in calls:
            ids.append(f"call_{self.n_calls}")
            self.n_calls += 1
            block.append({"id": ids[-1], "type": "function",
                          "function": {"name": name, "arguments": json.dumps(arguments)}})
        m = {"role": "assistant", "content": "", "tool_calls": block}
        if self.thinking:
            m["reasoning_content"] = reasoning or ""
        self.messages.append(m)
        for call_id, (_, _, result) in zip(ids, calls):
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": result})

    def request(self):
        r = {"messages": self.messages, "task": self.tasks}
        if self.tools:
            r["tools"] = [{"type": "function", "function": t} for t in self.tools]
        if self.thinking:
            r["reasoning_effort"] = "medium"
        return r


class TeamTask(NamedTuple):
    """A team task (Generator.team_task): the task, its n parts and their answers, each answer's
    template (TEAM_TASKS' or FIXED_TEAM_ANSWERS'), every part of the task's kind, and the task's fields
    (city, event, name, word), which the templates share."""
    task: str
    parts: list[str]
    answers: list[str]
    templates: list[str]
    every_part: list[str]
    fields: dict


class Generator:
    def __init__(self, seed: int, split: str, extra: tuple[list[str], list[str]] = ([], []), spaced_copies=False,
                 repo_names=False, team_share=0.08, fixed_team_answers=False):
        """extra: vocabulary_words' words and names, added to the training split's; spaced_copies,
        repo_names, team_share, fixed_team_answers: --spaced-copies, --repo-names, --team-share,
        --fixed-team-answers."""
        self.rng = random.Random(f"{seed}/{split}")
        self.split = split
        self.spaced_copies = spaced_copies
        self.repo_names = repo_names
        self.team_share = team_share
        self.fixed_team_answers = fixed_team_answers
        self.atoms = passage_atoms(spaced_copies)
        extra_words, extra_names = extra if split == "train" else ([], [])
        self.names = pool(NAMES, split) + extra_names
        self.all_words = WORDS + (DEMO_WORDS if spaced_copies else [])  # of both splits
        self.words = pool(self.all_words, split) + extra_words
        self.extra_atoms = extra_words + extra_names
        self.keys = pool(FACT_KEYS, split)
        self.files = self._file_names()

    def _file_names(self):
        rng = random.Random(f"files/{self.split}")
        names = set()
        while len(names) < 400:
            name = file_name(rng, self.all_words)
            if heldout(name) == (self.split == "heldout"):
                names.add(name)
        return sorted(names)

    # ---- values ----

    def spaced(self, text):
        """A tool-call argument that copies the user's words: with --spaced-copies, with the space
        it had there."""
        return " " + text if self.spaced_copies else text

    def expression(self):
        """(question text, expression the calculator gets, result text), in this split only."""
        rng = self.rng
        while True:
            kind = rng.random()
            small = lambda: rng.randint(2, 99)  # noqa: E731
            big = lambda: rng.randint(2, 9999)  # noqa: E731
            if kind < 0.55:
                op = rng.choice(["+", "-", "*", "*", "/"])
                a, b = (big(), big()) if op in "+-" else (small() if rng.random() < 0.5 else big(), small())
                if op == "/" and rng.random() < 0.7:
                    a = a * b  # mostly exact divisions
                expr = f"{a} {op} {b}"
                words = rng.random() < 0.3
                question = f"{a} {rng.choice(WORD_OPS[op])} {b}" if words else expr
            elif kind < 0.75:
                a, b, c = small(), small(), small()
                o1, o2 = rng.choice("+-*"), rng.choice("+-*")
                expr = f"({a} {o1} {b}) {o2} {c}" if rng.random() < 0.5 else f"{a} {o1} {b} {o2} {c}"
                question = expr
            elif kind < 0.85:
                a, b = rng.randint(2, 12), rng.randint(2, 10)
                expr = f"{a}**{b}"
                question = expr if rng.random() < 0.5 else f"{a} to the power of {b}"
            elif kind < 0.93:
                n = rng.randint(2, 99) ** 2 if rng.random() < 0.7 else rng.randint(2, 999)
                expr = f"sqrt({n})"
                question = expr if rng.random() < 0.5 else f"the square root of {n}"
            else:
                a, b = big(), small()
                op = rng.choice(["%", "//"])
                expr = f"{a} {op} {b}"
                question = expr
            if heldout(expr) != (self.split == "heldout"):
                continue
            try:
                result = str(tool_agent.calculate(expr))
            except tool_agent.CalculatorError as e:
                result = f"error: {e}"
            return question, expr, result

    def listing(self, word):
        """What search_files returns for a word: some files with counts, or none."""
        rng = self.rng
        n = rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5, 6])
        files = sorted(rng.sample(REPO_FILES if self.repo_names and rng.random() < 0.3 else self.files, n))
        if not files:
            folder = rng.choice(["docs", "notes", "files", "project", "work"])
            return files, f"no file under {folder} contains {word!r}"
        lines = []
        for f in files:
            k = rng.choice([1, 1, 2, 3, 4, 7, 12])
            lines.append(f"{f}: {k} line{'s' if k > 1 else ''}")
        return files, "\n".join(lines)

    def fact_value(self, key):
        rng = self.rng
        if "name" in key:
            return rng.choice(self.names)
        if "colour" in key:
            return rng.choice(COLOURS)
        if "fruit" in key or "song" in key or "town" in key or "street" in key or "day" in key or "hint" in key:
            return rng.choice(self.words)
        if "password" in key or "code" in key or "plate" in key or "id" in key:
            return code(rng)
        return str(rng.randint(1, 999))

    # ---- tasks (each appends one user turn and the rounds that answer it) ----

    def task_calc(self, s: Session):
        question, expr, result = self.expression()
        s.user(self.rng.choice(CALC_QUESTIONS).format(q=question))
        s.calls([("calculator", {"expression": expr}, result)],
                reasoning=f"The user wants {question}; the calculator computes it exactly.")
        if result.startswith("error: "):
            s.answer(f"The calculator could not compute {expr}: {result[7:]}.")
        else:
            s.answer(self.rng.choice(CALC_ANSWERS).format(e=expr, r=result), reasoning=f"The result is {result}.")
        facts = [result[7:]] if result.startswith("error: ") else [result]
        s.tasks.append({"kind": "calc", "call": ["calculator", {"expression": expr}], "expect": facts})

    def search_call(self, word):
        glob = None
        if self.rng.random() < 0.15:
            template, glob = self.rng.choice(GLOB_QUESTIONS)
            question = template.format(w=word)
        else:
            questions = SEARCH_QUESTIONS  # (with --spaced-copies, a word in quotes would be spelt bare)
            if self.spaced_copies:
                questions = [q.replace("'{w}'", "{w}") for q in SEARCH_QUESTIONS]
            question = self.rng.choice(questions).format(w=word)
        files, result = self.listing(word)
        if glob:
            suffix = glob[1:]
            files = [f for f in files if f.endswith(suffix)]
            result = "\n".join(line for line in result.splitlines() if line.split(":")[0].endswith(suffix)) or \
                f"no file under docs contains {word!r}"
        arguments = {"text": self.spaced(word)} if glob is None else {"text": self.spaced(word), "glob": glob}
        return question, arguments, files, result

    def search_answer(self, word, files):
        if not files:
            return self.rng.choice([f"No file mentions {word}.", f"I found no file that mentions {word}."])
        if self.spaced_copies:  # one per line, each after a line break as in the tool's result
            names = "\n".join(files)
            counted = (f"{len(files)} file{'s' if len(files) > 1 else ''} "
                       f"{'mentions' if len(files) == 1 and self.repo_names else 'mention'} {word}:\n{names}")
            return self.rng.choice([f"The files that mention {word}:\n{names}", f"These files mention {word}:\n{names}",
                                    counted])
        names = join_names(files)
        return self.rng.choice([f"{word} is mentioned in {names}.", f"The files that mention {word}: {names}.",
                                f"These files mention {word}: {names}."])

    def task_search(self, s: Session):
        word = self.rng.choice(self.words)
        question, arguments, files, result = self.search_call(word)
        s.user(question)
        s.calls([("search_files", arguments, result)], reasoning=f"I will search the files for {word}.")
        s.answer(self.search_answer(word, files))
        s.tasks.append({"kind": "search", "call": ["search_files", arguments], "expect": files or [word]})

    def task_both(self, s: Session):
        question, expr, result = self.expression()
        word = self.rng.choice(self.words)
        files, listing = self.listing(word)
        s.user(self.rng.choice(BOTH_QUESTIONS).format(q=question, w=word))
        s.calls([("calculator", {"expression": expr}, result), ("search_files", {"text": self.spaced(word)}, listing)],
                reasoning="Two tools: the calculator and the file search.")
        calc = f"{expr} = {result}." if not result.startswith("error: ") else f"{expr} cannot be computed."
        s.answer(f"{calc} {self.search_answer(word, files)}")
        facts = [expr] if result.startswith("error: ") else [result]
        s.tasks.append({"kind": "both", "call": ["calculator", {"expression": expr}], "expect": facts + (files or [word])})

    def task_memory(self, s: Session):
        key = self.rng.choice(self.keys)
        value = self.fact_value(key)
        s.user(self.rng.choice([f"Remember that my {key} is {value}.", f"Please remember: my {key} is {value}.",
                                f"Note down my {key}: {value}."]))
        s.calls([("remember", {"key": self.spaced(key), "value": self.spaced(value)}, f"remembered {key!r}")])
        s.answer(self.rng.choice([f"Noted: your {key} is {value}.", f"I will remember that your {key} is {value}.",
                                  "Done, I remembered it."]))
        self.fillers(s, self.rng.randint(0, 2))
        s.user(self.rng.choice([f"What is my {key}?", f"Can you recall my {key}?", f"Remind me of my {key}."]))
        s.calls([("recall", {"key": self.spaced(key)}, self.spaced(value))])
        s.answer(f"Your {key} is {value}.")
        s.tasks.append({"kind": "memory", "call": ["recall", {"key": self.spaced(key)}], "expect": [value]})

    def task_recall_missing(self, s: Session):
        key = self.rng.choice(self.keys)
        s.user(self.rng.choice([f"What is my {key}?", f"Can you recall my {key}?"]))
        s.calls([("recall", {"key": self.spaced(key)}, f"nothing is remembered under {key!r}")])
        s.answer(f"I have nothing remembered about your {key}.")
        s.tasks.append({"kind": "memory_missing", "call": ["recall", {"key": self.spaced(key)}], "expect": [key]})

    def task_fact(self, s: Session):
        key = self.rng.choice(self.keys)
        value = self.fact_value(key)
        s.user(self.rng.choice([f"My {key} is {value}.", f"For later: my {key} is {value}.",
                                f"Just so you know, my {key} is {value}."]))
        s.answer(self.rng.choice(["Got it.", "Okay, noted.", "Thanks, I will keep that in mind."]))
        self.fillers(s, self.rng.randint(1, 4))
        s.user(self.rng.choice([f"What is my {key}?", f"What did I say my {key} was?", f"Remind me: my {key}?"]))
        s.answer(f"Your {key} is {value}.")
        s.tasks.append({"kind": "fact", "expect": [value]})

    def number(self):
        """A number of one to twelve digits (the tokenizer splits digits in threes), a tenth of them decimals."""
        rng = self.rng
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 12))).lstrip("0") or "0"
        return f"{digits}.{rng.randint(0, 10**rng.randint(1, 12))}" if rng.random() < 0.1 else digits

    def passage(self, n):
        rng = self.rng
        # The extra atoms take a third of the words, so that every atom of both splits still starts
        # many a training passage (where the held-out words' bare spelling is learnt).
        atoms = [lambda: rng.choice(self.atoms)] * (4 if self.extra_atoms else 6)
        extras = [lambda: rng.choice(self.extra_atoms)] * (2 if self.extra_atoms else 0)
        makers = atoms + extras + [self.number, lambda: file_name(rng, self.all_words), lambda: code(rng)]
        return " ".join(rng.choice(makers)() for _ in range(n))

    def task_copy(self, s: Session):
        text = self.passage(self.rng.randint(3, 30))
        sep = "\n" if self.spaced_copies else " "
        s.user(self.rng.choice([f"Repeat this exactly:{sep}{text}", f"Say back to me:{sep}{text}",
                                f"Copy:{sep}{text}"]))
        s.answer(text)
        s.tasks.append({"kind": "copy", "expect": [text]})

    def task_chat(self, s: Session):
        asks, replies = self.rng.choice(CHAT)
        s.user(self.rng.choice(asks))
        s.answer(self.rng.choice(replies))
        s.tasks.append({"kind": "chat"})

    def team_task(self) -> TeamTask:
        """A team task in this split: n parts for n workers."""
        rng = self.rng
        while True:
            tasks, parts = rng.choice(TEAM_TASKS)
            fields = {"city": rng.choice(CITIES), "event": rng.choice(EVENTS), "name": rng.choice(NAMES),
                      "word": rng.choice(self.all_words)}
            task = rng.choice(tasks).format(**fields)
            if heldout(task) == (self.split == "heldout"):
                break
        templates = [answer for _, answer in parts]
        if self.fixed_team_answers:  # the first n parts, each with its one answer
            templates = FIXED_TEAM_ANSWERS[next(k for k, (_, p) in enumerate(TEAM_TASKS) if p is parts)]
            chosen = list(range(rng.randint(2, 4)))
            answers = [templates[i].format(**fields) for i in chosen]
        else:
            chosen = sorted(rng.sample(range(len(parts)), rng.randint(2, 4)))
            names = rng.sample(NAMES, 3)
            answers = [templates[i].format(
                **fields, name2=names[0], name3=names[1], name4=names[2], day=rng.choice(DAYS), day2=rng.choice(DAYS),
                a=rng.choice(ADJECTIVES), a2=rng.choice(ADJECTIVES), w=rng.choice(self.all_words),
                w2=rng.choice(self.all_words), w3=rng.choice(self.all_words), food=rng.choice(FOODS),
                food2=rng.choice(FOODS), food3=rng.choice(FOODS), n=rng.randint(2, 99) * 50) for i in chosen]
        return TeamTask(task, [parts[i][0].format(**fields) for i in chosen], answers, [templates[i] for i in chosen],
                        [part.format(**fields) for part, _ in parts], fields)

    def team_pattern(self, template: str, fields: dict) -> str:
        """The answers a worker's answer template gives with the task's own fields and any draw of the
        others (an adjective, a day, a word of either split, ...): what scripts/eval_demo.py accepts as
        a sensible answer to that part."""
        def one_of(words):
            return "(?:" + "|".join(re.escape(w) for w in words) + ")"

        slots = {"a": one_of(ADJECTIVES), "a2": one_of(ADJECTIVES), "day": one_of(DAYS), "day2": one_of(DAYS),
                 "w": one_of(self.all_words), "w2": one_of(self.all_words), "w3": one_of(self.all_words),
                 "food": one_of(FOODS), "food2": one_of(FOODS), "food3": one_of(FOODS), "name2": one_of(NAMES),
                 "name3": one_of(NAMES), "name4": one_of(NAMES), "n": r"\d+"}
        pieces = re.split(r"\{(\w+)\}", template)
        return "".join(re.escape(piece) if i % 2 == 0 else
                       (re.escape(fields[piece]) if piece in fields else slots[piece])
                       for i, piece in enumerate(pieces))

    def task_plan(self, s: Session, task, parts, answers, combine=True):
        s.user(task)
        s.answer("\n".join(f"{i}. {part}" for i, part in enumerate(parts, 1)))
        s.tasks.append({"kind": "plan", "expect": parts})
        if not combine:
            return
        sep = "\n" if self.spaced_copies else " "
        report = "\n".join(f"Answer {i} (to: {part}):{sep}{answer}"
                           for i, (part, answer) in enumerate(zip(parts, answers), 1))
        s.user(f"Your team answered:\n{report}\nCombine these into one answer to the task.")
        s.answer(sep.join(answers))
        s.tasks.append({"kind": "combine", "expect": answers})

    def team_session(self, kind: str | None = None, graded=False) -> Session:
        """A session of examples/multi_agent.py's team: "combine" (the coordinator's plan, then its
        combined answer), "plan" (the plan alone) or "part" (a worker's); None: "combine" or "part", one
        in two (drawn after the task, as the corpora were). graded (scripts/eval_demo.py):
        plans and parts have many sensible answers, so their last task record carries the pattern of
        them all (team_pattern; a plan: as many lines as parts, each a part of the task's kind)."""
        team = self.team_task()
        task, parts, answers = team.task, team.parts, team.answers
        if kind is None:
            kind = "combine" if self.rng.random() < 0.5 else "part"
        if kind == "part":
            i = self.rng.randrange(len(parts))
            s = Session([], multi_agent.WORKER.format(i=i + 1), False)
            s.user(parts[i])
            s.answer(answers[i])
            s.tasks.append({"kind": "part", "expect": [answers[i]]})
            if graded:
                s.tasks[-1]["pattern"] = self.team_pattern(team.templates[i], team.fields)
            return s
        s = Session([], multi_agent.COORDINATOR.format(n=len(parts)), False)
        self.task_plan(s, task, parts, answers, combine=kind == "combine")
        if graded and kind == "plan":
            any_part = "(?:" + "|".join(re.escape(p) for p in team.every_part) + ")"
            s.tasks[-1]["pattern"] = "\n".join(f"{i}\\. {any_part}" for i in range(1, len(parts) + 1))
        return s

    def fillers(self, s: Session, n):
        for _ in range(n):
            self.rng.choice([self.task_chat, self.task_copy] + ([self.task_calc] if s.tools else []))(s)

    def single_task(self, kind: str) -> dict:
        """A session of one task of this kind (scripts/eval_demo.py): in the tool agent's setting, or a team's."""
        if kind in TEAM_KINDS:
            return self.team_session(kind, graded=True).request()
        s = Session(tool_agent.TOOLS, tool_agent.INSTRUCTIONS, False)
        {"calc": self.task_calc, "search": self.task_search, "both": self.task_both, "memory": self.task_memory,
         "memory_missing": self.task_recall_missing, "fact": self.task_fact, "copy": self.task_copy}[kind](s)
        return s.request()

    def session(self) -> dict:
        rng = self.rng
        style = rng.random()
        thinking = rng.random() < 0.1
        if style >= 1 - self.team_share:  # examples/multi_agent.py's team: its coordinator, or one of its workers
            return self.team_session().request()
        if style < 0.6:
            s = Session(tool_agent.TOOLS, tool_agent.INSTRUCTIONS, thinking)
            tasks = [self.task_calc, self.task_calc, self.task_search, self.task_both, self.task_both,
                     self.task_memory, self.task_recall_missing, self.task_fact, self.task_copy, self.task_chat]
        elif style < 0.72:
            calculator = [t for t in tool_agent.TOOLS if t["name"] == "calculator"]
            s = Session(calculator, rng.choice(["", "You are a helpful assistant.", "Answer briefly."]), thinking)
            tasks = [self.task_calc, self.task_calc, self.task_calc, self.task_fact, self.task_chat]
        else:
            s = Session([], rng.choice(["", "", "You are a helpful assistant.", "Be brief."]), False)
            tasks = [self.task_fact, self.task_fact, self.task_copy, self.task_copy, self.task_chat]
        for _ in range(rng.choice([1, 1, 2, 2, 3, 4])):
            rng.choice(tasks)(s)
        return s.request()


def render(hippo: str, tokenizer: str, requests_path: Path, out_path: Path):
    with open(out_path, "w") as out:
        r = subprocess.run([hippo, "--log-level", "warn", "model", "render", "--tokenizer", tokenizer,
                            "--in", str(requests_path)], stdout=out, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"hippo model render failed: {r.stderr.strip()}")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=20000, help="training sessions (held out: a tenth)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--hippo", default=str(ROOT / "build/release/hippo"))
    parser.add_argument("--tokenizer", default=str(ROOT / ".cache/deepseek-v4-tokenizer"))
    parser.add_argument("--spaced-copies", action="store_true",
                        help="copies keep their spelling: arguments with the question's space, listings and passages "
                             "on lines of their own (see above); the corpus of the next demo model")
    parser.add_argument("--repo-names", action="store_true",
                        help="with --spaced-copies: some file listings of a real repository's names (REPO_FILES)")
    parser.add_argument("--team-share", type=float, default=0.08, help="share of examples/multi_agent.py's sessions")
    parser.add_argument("--fixed-team-answers", action="store_true",
                        help="each team part has one answer and a plan the first n parts (FIXED_TEAM_ANSWERS)")
    parser.add_argument("--extra-words", type=int, default=0,
                        help="the training split also uses this many more words and a quarter as many names "
                             "(vocabulary_words)")
    args = parser.parse_args(argv)
    if args.repo_names and not args.spaced_copies:
        parser.error("--repo-names lists names one per line, as --spaced-copies does: give both")
    if not 0 <= args.team_share <= 1:
        parser.error("--team-share is a share, 0 to 1")
    args.out.mkdir(parents=True, exist_ok=True)
    extra = vocabulary_words(args.tokenizer, args.extra_words, args.extra_words // 4) if args.extra_words else ([], [])
    manifest = {"seed": args.seed, "extra_words": args.extra_words, "splits": {}}
    if args.spaced_copies:
        manifest["spaced_copies"] = True
    if args.repo_names:
        manifest["repo_names"] = True
    if args.team_share != 0.08:
        manifest["team_share"] = args.team_share
    if args.fixed_team_answers:
        manifest["fixed_team_answers"] = True
    answer_ids = {}
    for split, n in (("train", args.sessions), ("heldout", max(args.sessions // 10, 100))):
        gen = Generator(args.seed, split, extra, args.spaced_copies, args.repo_names, args.team_share,
                        args.fixed_team_answers)
        requests_path = args.out / f"{split}.jsonl"
        with open(requests_path, "w") as f:
            for _ in range(n):
                f.write(json.dumps(gen.session(), ensure_ascii=False) + "\n")
        tokens_path = args.out / f"{split}.tokens.jsonl"
        render(args.hippo, args.tokenizer, requests_path, tokens_path)
        n_tokens = n_answer = longest = 0
        answer_ids[split] = set()
        with open(tokens_path) as f:
            for line in f:
                d = json.loads(line)
                n_tokens += len(d["ids"])
                n_answer += sum(e - b for b, e in d["answers"])
                longest = max(longest, len(d["ids"]))
                for b, e in d["answers"]:
                    answer_ids[split].update(d["ids"][b:e])
        manifest["splits"][split] = {"sessions": n, "tokens": n_tokens, "answer_tokens": n_answer,
                                     "longest": longest, "sha256": {p.name: sha256(p) for p in (requests_path, tokens_path)}}
        print(f"gen_agent_corpus: {split}: {n} sessions, {n_tokens} tokens ({n_answer} generated), longest {longest}",
              file=sys.stderr)
    unwritable = sorted(answer_ids["heldout"] - answer_ids["train"])
    if unwritable:
        raise SystemExit(f"gen_agent_corpus: {len(unwritable)} token ids of held-out answers never occur in a "
                         f"training answer, so the model could not write them: {unwritable[:20]}")
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
