"""The seed harness: the smallest loop that solves a harnessd task. Read seeds/README.md.

Three primitives, each a plain function or class that a patch may change or wrap:

* ``run_loop``: repeat one step until it says it is done, at most ``MAX_STEPS`` times.
* ``choose_tools``: ask the model with the task's tools; for tasks with host-side tools
  (kind ``tool_use``), run the calls it chose and feed the results back.
* ``State``: what happened so far (the conversation, the calls made, the last reply).

``solve`` is the entry point the sandbox calls.
"""

import json
import re

MAX_STEPS = 4  # model calls per task, at most
MAX_TOKENS = 512  # tokens the model may write per call
INSTRUCTIONS = ""  # system text put before every task's prompt ("": none)
CODE_BLOCK = re.compile(r"```(?:python|py)?[^\n]*\n(.*?)(?:```|$)", re.DOTALL)


class State:
    """Everything that happened so far in this task."""

    def __init__(self, task):
        self.messages = [dict(message) for message in task["prompt"]]
        if INSTRUCTIONS:
            self.messages.insert(0, {"role": "system", "content": INSTRUCTIONS})
        self.calls = []  # every call the model chose: {"name", "arguments"}
        self.reply = None  # the model's last reply
        self.steps = 0

    def add_reply(self, reply):
        self.steps += 1
        self.reply = reply
        self.calls.extend(
            {"name": c["name"], "arguments": c["arguments"]} for c in reply["tool_calls"]
        )
        self.messages.append(
            {"role": "assistant", "content": reply["content"], "tool_calls": reply["tool_calls"]}
        )

    def add_tool_result(self, call, result):
        content = result if isinstance(result, str) else json.dumps(result)
        self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})


def choose_tools(ctx, state, tools, dispatch):
    """Ask the model once, offering ``tools``; with ``dispatch``, run the calls it chose."""
    reply = ctx.model.chat(state.messages, tools=tools or None, max_tokens=MAX_TOKENS)
    state.add_reply(reply)
    if dispatch:
        for call in reply["tool_calls"]:
            try:
                result = ctx.tools.call(call["name"], call["arguments"])
            except ctx.ToolError as exc:
                result = {"error": str(exc)}
            state.add_tool_result(call, result)
    return reply


def run_loop(step, state, max_steps=MAX_STEPS):
    """Call ``step(state)`` until it returns True (done) or ``max_steps`` steps were taken."""
    while state.steps < max_steps:
        if step(state):
            return True
    return False


def extract_code(text):
    """The longest fenced code block in ``text`` (an unclosed one counts), else the text."""
    blocks = CODE_BLOCK.findall(text)
    return max(blocks, key=len) if blocks else text


def answer(task, state):
    """The output the task's kind asks for, taken from what happened."""
    if task["kind"] == "function_call":
        return state.calls
    text = state.reply["content"] or ""
    if task["kind"] == "code":
        return extract_code(text)
    return text


def solve(task, ctx):
    state = State(task)
    # Only host-side tools give results worth another turn; otherwise one ask is the answer.
    dispatch = task["kind"] == "tool_use"
    tools = task["tools"]

    def step(state):
        reply = choose_tools(ctx, state, tools, dispatch)
        return not (dispatch and reply["tool_calls"])

    run_loop(step, state)
    # A tool_use task may have more user turns: answer each, until the host says done.
    while dispatch:
        turn = ctx.next_turn()
        if turn.get("done"):
            break
        state.messages.extend(turn["messages"])
        tools = turn["tools"]
        state.steps = 0
        run_loop(step, state)
    output = answer(task, state)
    # Naive on purpose: any output counts as success.
    return {"output": output, "claimed_success": output not in (None, ""), "confidence": None}
