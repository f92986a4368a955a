"""Drive support-desk/resolve-billing through the episode SDK, as a trainer would, with no
model and no API key: a tiny hand-written policy stands in for the LLM.

The loop is the one a trainer writes around a real model: keep an OpenAI-style message
list, offer the turn's tools as OpenAI function tools, ask the policy for the next
assistant message (tool calls, or a final answer), run the tool calls through the turn's
tools, append the results, and end the turn with the answer and the tokens it cost. Swap
`policy(messages, tools)` for a chat-completions call and nothing else changes.

    python examples/sdk/drive_episode.py               # one episode, its scores and data
    python examples/sdk/drive_episode.py --episodes 20  # 20 at once (asyncio.gather)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import Any

from agentenv import Episode, EpisodeSpec, Task

TASK = "support-desk/resolve-billing"


# -- the policy: what an LLM would do, written by hand ------------------------------------


def _calls(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], Any]]:
    """(tool, arguments, parsed result) of every tool call so far, in order."""
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    out = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            text = results.get(call["id"], "")
            try:
                result = json.loads(text)
            except ValueError:
                result = text
            fn = call["function"]
            out.append((fn["name"], json.loads(fn["arguments"]), result))
    return out


def _last(calls: list[tuple[str, dict[str, Any], Any]], tool: str) -> Any:
    found = [result for name, _, result in calls if name == tool]
    return found[-1] if found else None


def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The next assistant message: `{"tool_calls": [(name, args)]}` or `{"content": ...}`.

    It reads the ticket the prompt names, works out the duplicate charge from the order,
    refunds it, emails the customer, waits until her answer is in the inbox, and closes.
    """
    offered = {t["function"]["name"] for t in tools}
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    ticket_id = re.search(r"T-\d+", prompt).group(0)  # type: ignore[union-attr]
    calls = _calls(messages)
    done = [name for name, _, _ in calls]
    ticket = _last(calls, "read_ticket")
    order = _last(calls, "get_order")

    def call(name: str, **args: Any) -> dict[str, Any]:
        assert name in offered, f"{name} is not offered"
        return {"tool_calls": [(name, args)]}

    if ticket is None:
        return call("read_ticket", ticket_id=ticket_id)
    email = ticket["customer"]["email"]
    if order is None:
        return call("get_order", id=ticket["order_id"])
    owed = round(sum(order["charges"]) - order["total"], 2)
    if "issue_refund" not in done:
        return call(
            "issue_refund",
            ticket_id=ticket_id,
            customer_id=ticket["customer_id"],
            order_id=order["id"],
            amount=owed,
            reason=f"Duplicate charge on order {order['id']}",
        )
    if "send_email" not in done:
        return call(
            "send_email",
            to=email,
            subject=f"Your refund for order {order['id']}",
            body=f"We refunded the duplicate ${owed:g} charge on order {order['id']}.",
            ticket_id=ticket_id,
        )
    sent_at = done.index("send_email")
    inbox = [r for n, _, r in calls[sent_at:] if n == "read_inbox"]
    answered = any(e.get("in_reply_to") for r in inbox for e in r["emails"])
    if not answered:  # wait, then look; again until she has answered
        if done[-1] != "wait":
            return call("wait")
        return call("read_inbox", from_addr=email)
    if "close_ticket" not in done:
        return call(
            "close_ticket",
            ticket_id=ticket_id,
            resolution=f"Refunded the duplicate ${owed:g} charge; the customer confirmed.",
        )
    return {"content": f"Refunded the duplicate ${owed:g} charge, emailed her, closed {ticket_id}."}


def tokens(messages: list[dict[str, Any]]) -> int:
    """A stand-in token count (about four characters a token)."""
    return len(json.dumps(messages)) // 4


# -- the loop a trainer writes --------------------------------------------------------------


async def play(episode: Episode) -> None:
    """Play every turn of the episode with `policy`, reporting usage per turn."""
    while (turn := await episode.next_turn()) is not None:
        messages: list[dict[str, Any]] = []
        if turn.system_prompt:
            messages.append({"role": "system", "content": turn.system_prompt})
        messages.append({"role": "user", "content": turn.prompt})
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        answer = ""
        async with turn.tools() as tools:
            offered = tools.openai_tools()
            for step in range(50):  # a turn's budget of model calls
                reply = policy(messages, offered)
                usage["prompt_tokens"] += tokens(messages)
                usage["completion_tokens"] += len(json.dumps(reply)) // 4
                if "content" in reply:
                    answer = reply["content"]
                    break
                calls = [
                    {
                        "id": f"call_{step}_{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                    for i, (name, args) in enumerate(reply["tool_calls"])
                ]
                messages.append({"role": "assistant", "content": None, "tool_calls": calls})
                for spec in calls:
                    fn = spec["function"]
                    result = await tools.call(fn["name"], json.loads(fn["arguments"]))
                    messages.append(
                        {"role": "tool", "tool_call_id": spec["id"], "content": result.text}
                    )
        await turn.end(response=answer, usage=usage)


async def one(task: Task) -> Episode:
    """Start an episode of `task`, play it, and wait for its verdict."""
    episode = await EpisodeSpec.from_task(task, turn_timeout=60).start()
    await play(episode)
    await episode.result()
    return episode


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1, help="how many to run at once")
    args = parser.parse_args()
    task = Task.get(TASK)  # load the task once; every episode shares its checked steps
    episodes = await asyncio.gather(*(one(task) for _ in range(args.episodes)))
    results = [await e.result() for e in episodes]
    first, result = episodes[0], results[0]
    print(f"task {TASK}: {sum(r.passed for r in results)}/{len(results)} passed")
    print(f"status {result.status}, score {result.score}")
    for verifier, score in result.scores.items():
        print(f"  {verifier}: {score.score:.2f} passed={score.passed}")
    calls = [r for r in first.trajectory() if r["kind"] == "call"]
    print(f"trajectory: {len(first.trajectory())} records, {len(calls)} calls")
    print(f"messages: {len(first.messages())} ({', '.join(m['role'] for m in first.messages())})")
    print(f"usage: {first.usage}")
    ticket = next(t for t in first.final_state()["desk"]["tickets"] if t["id"] == "T-1042")
    print(f"final state: T-1042 is {ticket['status']}")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
