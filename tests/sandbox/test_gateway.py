"""The gateway against a real Unix socket client speaking (and breaking) the guest protocol."""

from __future__ import annotations

import json
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream

from daemon.errors import ProviderError, SandboxError
from daemon.gateway.guest_protocol import seal_ok
from daemon.gateway.session import GatewayRecord, serve_gateway
from tests.sandbox.conftest import StandInModel, make_task

pytestmark = [pytest.mark.anyio, pytest.mark.unit]

HELLO = {"v": 1, "id": 1, "op": "hello", "args": {}}
ANSWER = {"output": [], "claimed_success": True, "coverage": {"harness.py": [1, 2]}}


def sealed(
    key: bytes, fields: dict[str, Any] | None = None, mac: str | None = None
) -> dict[str, Any]:
    payload = json.dumps(ANSWER if fields is None else fields)
    return {
        "v": 1,
        "id": "s",
        "op": "submit",
        "args": {"payload": payload, "mac": mac or seal_ok(key, payload)},
    }


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="hd-gw-", dir="/tmp") as folder:
        yield Path(folder)


class Client:
    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.buffer = b""
        self.key = b""

    async def hello(self) -> dict[str, Any]:
        reply = await self.ask(HELLO)
        if reply.get("ok"):
            self.key = bytes.fromhex(reply["result"]["key"])
        return reply

    async def submit(self, fields: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.ask(sealed(self.key, fields))

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send(data)

    async def send(self, frame: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(frame).encode() + b"\n")

    async def reply(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.buffer += await self.stream.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def ask(self, frame: dict[str, Any]) -> dict[str, Any]:
        await self.send(frame)
        return await self.reply()

    async def at_eof(self) -> bool:
        try:
            with anyio.fail_after(5):
                extra = await self.stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return True
        return extra == b""


@asynccontextmanager
async def gateway(
    socket_dir: Path, handler: Any = None, **options: Any
) -> AsyncIterator[tuple[GatewayRecord, Path]]:
    path = socket_dir / "gateway.sock"
    async with serve_gateway(path, make_task(), handler or StandInModel(), **options) as record:
        yield record, path
    assert not path.exists()


@asynccontextmanager
async def client(path: Path) -> AsyncIterator[Client]:
    async with await anyio.connect_unix(path) as stream:
        yield Client(stream)


async def test_well_behaved_session(socket_dir: Path) -> None:
    model = StandInModel()
    async with gateway(socket_dir, model) as (record, path), client(path) as guest:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666
        hello = await guest.hello()
        assert hello["ok"] and hello["id"] == 1 and len(guest.key) == 32
        assert hello["result"]["task"]["prompt"][0]["content"].startswith("What is the weather")
        assert hello["result"]["tokens_left"] == 1000
        chat = await guest.ask(
            {
                "v": 1,
                "id": 2,
                "op": "chat",
                "args": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64},
            }
        )
        assert chat["ok"], chat
        assert chat["result"]["tool_calls"][0]["name"] == "get_weather"
        assert chat["result"]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}
        assert "model" not in chat["result"]  # primary and panel models look alike
        tool = await guest.ask(
            {"v": 1, "id": 3, "op": "tool_call", "args": {"name": "lookup", "arguments": {"q": 1}}}
        )
        assert tool["result"] == {"content": {"tool": {"answer": 42}, "arguments": {"q": 1}}}
        budget = await guest.ask({"v": 1, "id": 4, "op": "budget", "args": {}})
        assert budget["result"] == {"tokens_left": 985}
        assert (await guest.submit())["ok"]
        again = await guest.submit()
        assert again["error"]["code"] == "after_submit"
        late_chat = await guest.ask(
            {
                "v": 1,
                "id": 5,
                "op": "chat",
                "args": {"messages": [{"role": "user", "content": "x"}]},
            }
        )
        assert late_chat["error"]["code"] == "after_submit"
    assert record.submission is not None and record.submission.coverage == {"harness.py": [1, 2]}
    assert record.model_calls == 1 and record.tool_calls == 1
    assert record.bad_frames == 0 and not record.protocol_violation
    assert [entry["op"] for entry in record.transcript] == ["chat", "tool_call"]
    assert model.chats[0].max_tokens == 64


async def test_bad_frames_get_errors_and_the_gateway_survives(socket_dir: Path) -> None:
    async with gateway(socket_dir, max_frame=1024) as (record, path), client(path) as guest:
        await guest.send_raw(b"this is not json\n")
        assert (await guest.reply())["error"]["code"] == "bad_frame"
        await guest.send_raw(b"\xff\xfe\x00garbage\n")
        assert (await guest.reply())["error"]["code"] == "bad_frame"
        await guest.send_raw(b"[1, 2, 3]\n")
        assert (await guest.reply())["error"]["code"] == "bad_frame"
        await guest.send_raw(
            b'{"v": 1, "id": 7, "op": "hello", "args": {}, "pad": "' + b"x" * 5000 + b'"}\n'
        )
        assert (await guest.reply())["error"]["code"] == "too_large"
        wrong_version = await guest.ask({"v": 2, "id": 8, "op": "hello"})
        assert wrong_version["error"]["code"] == "unsupported_version"
        assert wrong_version["id"] == 8
        assert (await guest.ask({"v": 1, "id": 9, "op": "rm -rf"}))["error"]["code"] == "unknown_op"
        bad_id = await guest.ask({"v": 1, "id": {"nested": True}, "op": "hello"})
        assert bad_id["error"]["code"] == "bad_frame" and bad_id["id"] is None
        no_messages = await guest.ask({"v": 1, "id": 10, "op": "chat", "args": {"max_tokens": 5}})
        assert no_messages["error"]["code"] == "bad_args"
        assert "messages" in no_messages["error"]["message"]
        bad_role = await guest.ask(
            {"v": 1, "id": 11, "op": "chat", "args": {"messages": [{"role": "root"}]}}
        )
        assert bad_role["error"]["code"] == "bad_args"
        bad_submit = await guest.ask(
            {"v": 1, "id": 12, "op": "submit", "args": {"output": 1, "confidence": 7}}
        )
        assert bad_submit["error"]["code"] == "bad_args"
        assert (await guest.ask({"v": 1, "id": 13, "op": "hello", "args": []}))["error"][
            "code"
        ] == "bad_args"
        # Still serving: a good request works after all that.
        assert (await guest.hello())["ok"]
        assert (await guest.submit())["ok"]
    assert record.bad_frames == 11
    assert not record.protocol_violation
    assert record.submission is not None


async def test_too_many_bad_frames_close_every_connection(socket_dir: Path) -> None:
    async with gateway(socket_dir) as (record, path):
        async with client(path) as bystander, client(path) as attacker:
            assert (await bystander.ask(HELLO))["ok"]
            for _ in range(15):
                await attacker.send_raw(b"garbage\n")
                assert (await attacker.reply())["error"]["code"] == "bad_frame"
            await attacker.send_raw(b"garbage\n")
            last = await attacker.reply()
            assert last["error"]["code"] == "protocol_limit"
            assert await attacker.at_eof()
            assert await bystander.at_eof()
        async with client(path) as newcomer:
            refused = await newcomer.reply()
            assert refused["error"]["code"] == "protocol_limit"
    assert record.protocol_violation
    assert record.submission is None


async def test_connection_limit(socket_dir: Path) -> None:
    async with gateway(socket_dir, max_connections=2) as (record, path):
        async with client(path) as one, client(path) as two:
            budget = {"v": 1, "id": 2, "op": "budget", "args": {}}
            assert (await one.ask(HELLO))["ok"] and (await two.ask(budget))["ok"]
            async with client(path) as three:
                assert (await three.reply())["error"]["code"] == "protocol_limit"
                assert await three.at_eof()
        assert record.connections == 2 and record.bad_frames == 1


async def test_oversize_frame_without_newline_then_eof(socket_dir: Path) -> None:
    async with gateway(socket_dir, max_frame=1024) as (record, path):
        async with client(path) as guest:
            await guest.send_raw(b"x" * 100_000)
            await guest.stream.send_eof()
            assert (await guest.reply())["error"]["code"] == "too_large"
        async with client(path) as guest:
            # A last frame without a newline is still read at end of stream.
            await guest.send_raw(json.dumps({"v": 1, "id": 2, "op": "budget"}).encode())
            await guest.stream.send_eof()
            assert (await guest.reply())["ok"]
    assert record.submission is None and record.bad_frames == 1


class FailingModel(StandInModel):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def chat(self, request: Any) -> Any:
        raise self.error

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> Any:
        if name == "broken":
            raise RuntimeError("host bug")
        if name == "object":
            return object()
        return await super().tool_call(name, arguments)


async def test_handler_errors_become_error_replies(socket_dir: Path) -> None:
    chat = {"v": 1, "id": 1, "op": "chat", "args": {"messages": [{"role": "user", "content": "x"}]}}
    model = FailingModel(ProviderError("model down"))
    async with gateway(socket_dir, model) as (record, path), client(path) as guest:
        failed = await guest.ask(chat)
        assert failed["error"] == {"code": "provider", "message": "model down"}
        missing = await guest.ask(
            {"v": 1, "id": 2, "op": "tool_call", "args": {"name": "nope", "arguments": {}}}
        )
        assert missing["error"]["code"] == "no_tool"
        broken = await guest.ask({"v": 1, "id": 3, "op": "tool_call", "args": {"name": "broken"}})
        assert broken["error"]["code"] == "internal"
        assert "host bug" not in broken["error"]["message"]
        odd = await guest.ask({"v": 1, "id": 4, "op": "tool_call", "args": {"name": "object"}})
        assert odd["error"]["code"] == "internal"
        assert (await guest.ask(HELLO))["ok"]
    assert record.bad_frames == 0 and not record.budget_refused
    assert record.transcript[0]["error"].startswith("ProviderError")


class TurnsModel(StandInModel):
    """A two-turn task: one more user turn, then done."""

    def __init__(self) -> None:
        super().__init__()
        self.turns: list[dict[str, Any]] = [
            {"messages": [{"role": "user", "content": "And Bergen?"}], "tools": []}
        ]

    async def next_turn(self) -> dict[str, Any]:
        return self.turns.pop(0) if self.turns else {"done": True}


async def test_next_turn_returns_the_next_turn_then_done_and_marks_the_boundary(
    socket_dir: Path,
) -> None:
    def turn(i: int, args: Any) -> dict[str, Any]:
        return {"v": 1, "id": i, "op": "next_turn", "args": args}

    async with gateway(socket_dir, TurnsModel()) as (record, path), client(path) as guest:
        first = await guest.ask(turn(1, {}))
        assert first["result"]["messages"] == [{"role": "user", "content": "And Bergen?"}]
        assert (await guest.ask(turn(2, {})))["result"] == {"done": True}
        assert (await guest.ask(turn(3, {"skip": 3})))["error"]["code"] == "bad_args"
    assert record.turns_opened == 1 and record.bad_frames == 1
    assert [e.get("messages", e.get("done")) for e in record.transcript] == [["And Bergen?"], True]


async def test_budget_refusal_is_recorded(socket_dir: Path) -> None:
    chat = {"v": 1, "id": 1, "op": "chat", "args": {"messages": [{"role": "user", "content": "x"}]}}
    async with (
        gateway(socket_dir, StandInModel(budget=20)) as (record, path),
        client(path) as guest,
    ):
        assert (await guest.ask(chat))["ok"]
        assert (await guest.ask(chat))["ok"]
        refused = await guest.ask(chat)
        assert refused["error"]["code"] == "budget"
        assert "budget 'task'" in refused["error"]["message"]
    assert record.budget_refused and record.model_calls == 2


async def test_transcript_is_compact_and_capped(socket_dir: Path) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q" * 5000}]
    async with (
        gateway(socket_dir, StandInModel(budget=10**9), transcript_chars=20_000) as (record, path),
        client(path) as guest,
    ):
        for turn in range(40):
            reply = await guest.ask(
                {"v": 1, "id": turn, "op": "chat", "args": {"messages": messages}}
            )
            assert reply["ok"]
            messages.append({"role": "assistant", "content": "a" * 3000})
            messages.append({"role": "user", "content": f"turn {turn}"})
    first, second = record.transcript[0], record.transcript[1]
    assert first["from_message"] == 0 and len(first["messages"][0]["content"]) < 2100
    assert second["from_message"] == 1 and len(second["messages"]) == 2
    assert record.transcript[-1]["op"] == "truncated"
    assert len(json.dumps(record.transcript)) < 21_000
    assert record.model_calls == 40


async def test_socket_path_too_long_is_a_clear_error() -> None:
    long_dir = Path("/tmp") / ("d" * 120)
    with pytest.raises(SandboxError, match="107-byte limit"):
        async with serve_gateway(long_dir / "gateway.sock", make_task(), StandInModel()):
            pass


async def test_concurrent_runs_have_separate_records(socket_dir: Path) -> None:
    (socket_dir / "a").mkdir()
    (socket_dir / "b").mkdir()
    async with (
        gateway(socket_dir / "a") as (record_a, path_a),
        gateway(socket_dir / "b") as (record_b, path_b),
        client(path_a) as a,
        client(path_b) as b,
    ):
        assert (await a.hello())["ok"] and (await b.hello())["ok"]
        assert a.key != b.key  # every run has a key of its own
        assert (await a.ask(sealed(b.key)))["error"]["code"] == "bad_seal"
    async with (
        gateway(socket_dir / "a") as (record_a, path_a),
        gateway(socket_dir / "b") as (record_b, path_b),
        client(path_a) as a,
        client(path_b) as b,
    ):
        assert (await a.hello())["ok"] and (await a.submit())["ok"]
        assert (await b.hello())["ok"]
    assert record_a.submission is not None and record_b.submission is None


async def test_abrupt_and_unreading_clients_do_not_hurt_the_gateway(socket_dir: Path) -> None:
    async with gateway(socket_dir, max_connections=2) as (record, path), client(path) as guest:
        assert (await guest.hello())["ok"]  # the guest runtime's connection comes first
        for _ in range(30):  # connect and vanish, some of them past the connection limit
            stream = await anyio.connect_unix(path)
            await stream.aclose()
        async with client(path) as flooder:
            # Thousands of requests whose replies are never read: the gateway's writes block,
            # and end cleanly when the client goes away.
            frame = json.dumps(HELLO).encode() + b"\n"
            with anyio.move_on_after(2):
                for _ in range(5000):
                    await flooder.send_raw(frame)
        # Slots free up as the gateway notices the departures; then another one is served.
        budget = {"v": 1, "id": 2, "op": "budget", "args": {}}
        with anyio.fail_after(10):
            while True:
                async with client(path) as other:
                    if (await other.ask(budget)).get("ok"):
                        break
                await anyio.sleep(0.05)
        assert (await guest.submit())["ok"]
    assert record.submission is not None
    assert not record.protocol_violation


async def test_only_the_guest_connection_says_hello_and_submits_and_only_sealed(
    socket_dir: Path,
) -> None:
    """Harness code shares the container with the guest runtime: it may open connections of
    its own (chat through them is fine), but an answer in the guest's name needs the key
    that only the first connection received, before any harness code existed."""
    async with gateway(socket_dir) as (record, path), client(path) as guest:
        assert (await guest.hello())["ok"]
        async with client(path) as intruder:
            refused = await intruder.ask(HELLO)
            assert refused["error"]["code"] == "not_guest"
            refused = await intruder.ask(sealed(guest.key))
            assert refused["error"]["code"] == "not_guest"
        assert (await guest.ask(HELLO))["error"]["code"] == "not_guest"  # once per run
        forged = await guest.ask(sealed(guest.key, {"output": [1]}, mac="0" * 64))
        assert forged["error"]["code"] == "bad_seal"
        assert await guest.at_eof()  # a forged seal ends the run's connections
    assert record.forged_submit and record.protocol_violation and record.submission is None
