"""Agent frameworks on `hippo serve`'s /v1/chat/completions and /v1/responses, through the real binary: whole conversations with
tool-call history, as the official `openai` client and the OpenAI Agents SDK (`agents`) send them.

- A tool loop (user turn with `tools`; an assistant tool call and its `tool` result; the model's answer; the next
  user turn), plain and streamed: every turn completes, and from the turn that re-sends an answer the server gave
  on, the idle session holding that answer is continued (0 < `cached_tokens` < `prompt_tokens`); streamed deltas
  concatenate to the plain greedy answer and `stream_options.include_usage` puts usage on the last chunk.
- `tool_choice` naming a function and `parallel_tool_calls: false` are accepted.
- Malformed history gets 400 naming the message (`messages[i]`) and stores nothing.
- Speculative decoding (context and DSpark drafts, on by default; DSpark alone) answers as a server with
  `--speculative off` does, and
  usage reports the drafts as OpenAI's predicted-output tokens; /metrics counts them too.
- Prefix reuse never crosses tenants.
- The Agents SDK (`OpenAIChatCompletionsModel`): `Runner.run`, its next turn from `result.to_input_list()` (cached),
  and input with `function_call`/`function_call_output` items.
- The Responses API (/v1/responses): plain, streamed (its SSE event types), stored, retrieved, chained with
  `previous_response_id` (cached), deleted, never across tenants; bad items are 400 naming `input[i]`; the SDK's
  `OpenAIResponsesModel` with `to_input_list()` and with `previous_response_id`.

The model is the tiny preset with random weights: its answers are gibberish and it never calls a tool by itself,
so the tool calls in these conversations are made up by the test, as a client that ran a tool would send them.
Once a trained model is available these tests can also assert the model's own tool calls (finish_reason
`tool_calls`, the SDK running the function tool and feeding its output back)."""
import asyncio

import openai
import pytest
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool,
                    set_tracing_disabled)

from serve_helpers import TIMEOUT, Server, make_checkpoint, metric

set_tracing_disabled(True)  # the SDK would otherwise export traces to OpenAI

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look a number up",
    "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("agents-model"))


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    work = tmp_path_factory.mktemp("agents")
    with Server(work, "--model", str(checkpoint), "--db", str(work / "hippo.db")) as s:
        yield s
        assert s.stop() == 0, s.log()


def client_for(server, key=None):
    return openai.OpenAI(base_url=server.http + "/v1", api_key=key or server.api_key, max_retries=0, timeout=TIMEOUT)


@pytest.fixture
def client(server):
    return client_for(server)


def complete(client, messages, stream=False, **kw):
    """One greedy turn: (content, finish_reason, usage); streamed, checks the chunks' shape on the way."""
    kw = {"model": "tiny", "messages": messages, "temperature": 0, "max_tokens": 8, **kw}
    if not stream:
        r = client.chat.completions.create(**kw)
        return r.choices[0].message.content, r.choices[0].finish_reason, r.usage
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None, chunks[-1]
    assert all(c.usage is None for c in chunks[:-1])
    finishes = [c.choices[0].finish_reason for c in chunks[:-1] if c.choices[0].finish_reason]
    assert len(finishes) == 1, finishes
    return "".join(c.choices[0].delta.content or "" for c in chunks[:-1]), finishes[0], chunks[-1].usage


def cached(usage):
    return usage.prompt_tokens_details.cached_tokens


def tool_loop(client, stream):
    """Four turns of a conversation with a tool call; per turn (content, finish_reason, usage)."""
    conv = [{"role": "system", "content": "You look numbers up."},
            {"role": "user", "content": "What is the number for 1?"}]
    turns = [complete(client, conv, stream, tools=TOOLS)]
    # The model would have called the tool: the client sends that call (in place of the answer) and its result.
    conv += [{"role": "assistant", "content": None, "tool_calls": [
                 {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": '{"x": 1}'}}]},
             {"role": "tool", "tool_call_id": "call_a", "content": "42"}]
    turns.append(complete(client, conv, stream, tools=TOOLS))
    for follow_up in ["And for 2?", "Thanks."]:
        conv += [{"role": "assistant", "content": turns[-1][0]}, {"role": "user", "content": follow_up}]
        turns.append(complete(client, conv, stream, tools=TOOLS))
    return turns


def test_tool_loop_plain_and_streamed(client):
    plain = tool_loop(client, stream=False)
    streamed = tool_loop(client, stream=True)
    for turns in (plain, streamed):
        assert all(finish in ("stop", "length") for _, finish, _ in turns), turns
        # Turns 3 and 4 re-send the server's previous answer: its session is continued.
        for _, _, usage in turns[2:]:
            assert 0 < cached(usage) < usage.prompt_tokens, usage
        # Turn 4 re-sends all of turn 3's prompt.
        assert cached(turns[3][2]) >= turns[2][2].prompt_tokens, (turns[2][2], turns[3][2])
    assert [content for content, _, _ in streamed] == [content for content, _, _ in plain]
    assert [u.prompt_tokens for _, _, u in streamed] == [u.prompt_tokens for _, _, u in plain]


def test_speculative_drafts_keep_the_answer_and_are_counted(server, checkpoint, tmp_path):
    def ask_twice(client):
        """A question, then the same question again after the answer. (The random model seldom repeats
        itself, so drafts are rare here: tests/agents/speculation_test.cpp shows them accepted and
        rejected; this test shows the answer unchanged and the counts reaching the client.)"""
        question = {"role": "user", "content": "Tell me a story."}
        kw = {"model": "tiny", "temperature": 0, "max_tokens": 96}
        first = client.chat.completions.create(messages=[question], **kw).choices[0].message.content
        return client.chat.completions.create(
            messages=[question, {"role": "assistant", "content": first}, question], **kw)

    drafted = ask_twice(client_for(server))
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(tmp_path / "off.db"), "--speculative", "off",
                name="off") as off:
        plain = ask_twice(client_for(off))
        assert off.stop() == 0, off.log()
    # DSpark alone: the tiny preset's random stages draft (and are rejected), the answer stays.
    with Server(tmp_path, "--model", str(checkpoint), "--db", str(tmp_path / "dspark.db"), "--speculative", "dspark",
                name="dspark") as dspark:
        with_dspark = ask_twice(client_for(dspark))
        assert metric(dspark, "hippo_drafted_tokens_total") > 0
        assert metric(dspark, 'hippo_drafted_tokens_by_drafter_total{drafter="dspark"}') > 0
        assert metric(dspark, 'hippo_drafted_tokens_by_drafter_total{drafter="context"}') == 0
        # What auto mode would weigh drafts by, as measured: a decode step and a DSpark pass.
        assert metric(dspark, 'hippo_step_cost_seconds{what="decode_step"}') > 0
        assert metric(dspark, 'hippo_step_cost_seconds{what="dspark_pass"}') > 0
        assert dspark.stop() == 0, dspark.log()
    assert with_dspark.choices[0].message.content == plain.choices[0].message.content
    assert drafted.choices[0].message.content == plain.choices[0].message.content
    assert drafted.usage.completion_tokens == plain.usage.completion_tokens
    d, p = drafted.usage.completion_tokens_details, plain.usage.completion_tokens_details
    assert d.accepted_prediction_tokens >= 0 and d.rejected_prediction_tokens >= 0, d
    assert p.accepted_prediction_tokens == 0 and p.rejected_prediction_tokens == 0, p
    assert metric(server, "hippo_drafted_tokens_total") >= d.accepted_prediction_tokens + d.rejected_prediction_tokens
    assert metric(server, "hippo_accepted_draft_tokens_total") >= d.accepted_prediction_tokens


def test_named_tool_choice_and_parallel_tool_calls_are_accepted(client):
    messages = [{"role": "user", "content": "Look up 3"}]
    r = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=8, temperature=0,
                                       tool_choice={"type": "function", "function": {"name": "lookup"}})
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls"), r
    assert all(call.function.name == "lookup" for call in r.choices[0].message.tool_calls or [])
    r = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=8, temperature=0,
                                       parallel_tool_calls=False)
    assert r.choices[0].finish_reason in ("stop", "length"), r


def test_malformed_history_is_400_naming_the_message(client, server):
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": '{"x": 1}'}}]}
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Look up 1"}, call,
               {"role": "tool", "tool_call_id": "call_a", "content": "42"}]

    def with_args(arguments):
        return {**call, "tool_calls": [{**call["tool_calls"][0], "function": {"name": "lookup",
                                                                             "arguments": arguments}}]}

    bad = [(history[:2] + [{"role": "robot", "content": "beep"}], "messages[2]"),
           (history[:3] + [{"role": "tool", "tool_call_id": "call_zz", "content": "42"}], "messages[3]"),
           (history[:2] + [with_args("{x: 1")] + history[3:], "messages[2]"),
           (history[:2] + [with_args("[1, 2]")] + history[3:], "messages[2]"),
           (history + [{"role": "assistant", "content": "Done."}], "messages[4]"),
           (history[:3], "messages[2]")]  # ends with a call that has no result
    sessions_before = server.request("GET", "/v1/sessions?kind=all")[2]["data"]
    unnamed = []
    for messages, where in bad:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="tiny", messages=messages, max_tokens=4, tools=TOOLS)
        assert refused.value.body["type"] == "invalid_request_error", refused.value.body
        if where not in refused.value.body["message"]:
            unnamed.append((where, refused.value.body["message"]))
    assert server.request("GET", "/v1/sessions?kind=all")[2]["data"] == sessions_before
    _, finish, _ = complete(client, history, tools=TOOLS)
    assert finish in ("stop", "length")
    assert unnamed == [], "400s that do not name the message"


def test_prefix_reuse_stays_within_the_tenant(client, server):
    other = client_for(server, server.new_key("tenant-b"))
    conv = [{"role": "user", "content": "Tenant A's own question"}]
    answer, _, _ = complete(client, conv)
    conv += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]
    _, _, usage = complete(other, conv)
    assert cached(usage) == 0, usage
    # A's session was there to reuse, for A.
    _, _, usage = complete(client, conv)
    assert 0 < cached(usage) < usage.prompt_tokens, usage


@function_tool
def lookup(x: int) -> str:
    """Look a number up."""
    return str(x * 42)


def test_openai_agents_sdk_over_chat_completions(server):
    async def scenario():
        model = OpenAIChatCompletionsModel(model="tiny", openai_client=openai.AsyncOpenAI(
            base_url=server.http + "/v1", api_key=server.api_key, max_retries=0, timeout=TIMEOUT))
        agent = Agent(name="helper", instructions="You look numbers up.", tools=[lookup], model=model,
                      model_settings=ModelSettings(temperature=0, max_tokens=8))
        first = await Runner.run(agent, "What is the number for 5?", max_turns=3)
        second = await Runner.run(agent, first.to_input_list() + [{"role": "user", "content": "next"}], max_turns=3)
        # History as to_input_list writes a tool call the agent made, and the call's output.
        called = [{"role": "user", "content": "What is the number for 6?"},
                  {"type": "function_call", "call_id": "call_f", "name": "lookup", "arguments": '{"x": 6}'},
                  {"type": "function_call_output", "call_id": "call_f", "output": "252"}]
        third = await Runner.run(agent, called, max_turns=3)
        fourth = await Runner.run(agent, third.to_input_list() + [{"role": "user", "content": "next"}], max_turns=3)
        return first, second, third, fourth

    first, second, third, fourth = asyncio.run(scenario())
    for result in (first, second, third, fourth):
        assert len(result.raw_responses) == 1 and isinstance(result.final_output, str), result
    assert first.raw_responses[0].usage.input_tokens_details.cached_tokens == 0
    for result in (second, fourth):
        usage = result.raw_responses[0].usage
        assert 0 < usage.input_tokens_details.cached_tokens < usage.input_tokens, usage


# ---------------------------------------------------------------------------------------------------------------------
# The Responses API (/v1/responses): the `openai` client and the SDK's OpenAIResponsesModel.
# ---------------------------------------------------------------------------------------------------------------------
# A response that reaches max_output_tokens is `incomplete`, which the openai client's stream helper and the SDK
# treat as a failure. The random model rarely ends a turn by itself, so these tests end it with stop strings that
# its greedy output meets within a few tokens (`stop` is hippo's extension of the Responses API).
STOP = {"stop": ["e", "a", "o", "i", "n", " "]}
RESPONSE_TOOLS = [{"type": "function", "name": "lookup", "description": "Look a number up",
                   "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}]


def test_responses_plain_streamed_stored_chained_and_deleted(client, server):
    first = client.responses.create(model="tiny", instructions="Be brief.", input="Hello!", max_output_tokens=8,
                                    temperature=0, tools=RESPONSE_TOOLS, extra_body=STOP)
    assert first.object == "response" and first.status == "completed"
    assert all(item.type == "message" for item in first.output)  # possibly none: a stop string may come first
    assert first.usage.input_tokens > 0 and first.usage.input_tokens_details.cached_tokens == 0

    # Streamed, the same greedy answer, in the Responses event types.
    with client.responses.stream(model="tiny", instructions="Be brief.", input="Hello!", max_output_tokens=8,
                                 temperature=0, tools=RESPONSE_TOOLS, store=False, extra_body=STOP) as stream:
        events = list(stream)
        streamed = stream.get_final_response()
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert types.count("response.output_item.added") == types.count("response.output_item.done") == len(first.output)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert streamed.output_text == first.output_text
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == first.output_text
    with pytest.raises(openai.NotFoundError):  # store: false
        client.responses.retrieve(streamed.id)

    # previous_response_id: the stored conversation and its answer, continued (only the new input prefilled).
    second = client.responses.create(model="tiny", instructions="Be brief.", previous_response_id=first.id,
                                     input=[{"role": "user", "content": "And then?"}], max_output_tokens=8,
                                     temperature=0, tools=RESPONSE_TOOLS, extra_body=STOP)
    assert second.previous_response_id == first.id
    assert 0 < second.usage.input_tokens_details.cached_tokens < second.usage.input_tokens
    # The same conversation sent whole, with a tool leg as function_call items, continues as well.
    third = client.responses.create(model="tiny", instructions="Be brief.", max_output_tokens=8, temperature=0,
                                    tools=RESPONSE_TOOLS, extra_body=STOP, input=[
                                        {"role": "user", "content": "Hello!"},
                                        {"role": "assistant", "content": first.output_text},
                                        {"role": "user", "content": "And then?"},
                                        {"role": "assistant", "content": second.output_text},
                                        {"role": "user", "content": "Look 2 up."},
                                        {"type": "function_call", "call_id": "call_z", "name": "lookup",
                                         "arguments": '{"x": 2}'},
                                        {"type": "function_call_output", "call_id": "call_z", "output": "84"}])
    assert third.usage.input_tokens_details.cached_tokens > second.usage.input_tokens_details.cached_tokens

    assert client.responses.retrieve(first.id).output_text == first.output_text
    other = client_for(server, server.new_key("responses-other"))
    with pytest.raises(openai.NotFoundError):  # another tenant's response is none of its business
        other.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model="tiny", previous_response_id=first.id, input="Hi")
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.create(model="tiny", previous_response_id=first.id, input="Hi")
    assert first.id in str(gone.value)


def test_responses_bad_input_is_400_naming_the_item(client):
    cases = [
        [{"role": "user", "content": "Hi"}, {"type": "function_call_output", "call_id": "nope", "output": "1"}],
        [{"role": "user", "content": "Hi"},
         {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{x"}],
        [{"role": "wizard", "content": "Hi"}],
    ]
    for index, items in zip((1, 1, 0), cases):
        with pytest.raises(openai.BadRequestError) as bad:
            client.responses.create(model="tiny", input=items, max_output_tokens=2)
        assert f"input[{index}]" in str(bad.value), bad.value
    with pytest.raises(openai.BadRequestError, match="web_search"):
        client.responses.create(model="tiny", input="Hi", tools=[{"type": "web_search"}], max_output_tokens=2)
    assert client.responses.create(model="tiny", input="Hi", max_output_tokens=2).status in ("completed", "incomplete")


def test_openai_agents_sdk_over_responses(server):
    from agents import OpenAIResponsesModel

    async def scenario():
        model = OpenAIResponsesModel(model="tiny", openai_client=openai.AsyncOpenAI(
            base_url=server.http + "/v1", api_key=server.api_key, max_retries=0, timeout=TIMEOUT))
        agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[lookup],
                      model_settings=ModelSettings(temperature=0, max_tokens=8, extra_body=STOP))
        first = await Runner.run(agent, "What is the number for 3?", max_turns=3)
        second = await Runner.run(agent, first.to_input_list() + [{"role": "user", "content": "next"}], max_turns=3)
        chained = await Runner.run(agent, "and now?", previous_response_id=second.last_response_id, max_turns=3)
        return first, second, chained

    first, second, chained = asyncio.run(scenario())
    for result in (first, second, chained):
        assert len(result.raw_responses) == 1 and isinstance(result.final_output, str), result
    assert first.raw_responses[0].usage.input_tokens_details.cached_tokens == 0
    for result in (second, chained):
        usage = result.raw_responses[0].usage
        assert 0 < usage.input_tokens_details.cached_tokens < usage.input_tokens, usage
