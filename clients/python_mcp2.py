"""The official Python MCP client, 2.x (`mcp.client.Client`), against a running Docket in
both of its modes: forced to the `initialize` handshake (`mode="legacy"`), and in its
default `auto` mode, which probes `server/discover` and so speaks 2026-07-28 with Docket.
Each connects, lists tools, calls tools, answers a question by elicitation; the legacy
run also sees progress. Exits non-zero on the first mismatch.

With a second URL, `docket serve`'s own /mcp, each mode also saves and runs a script
and answers a real consent prompt (a Trino statement) through elicitation.

usage: python_mcp2.py FIXTURE_URL [DOCKET_URL]
"""

import asyncio
import sys

from mcp import types
from mcp.client import Client


# The consent prompts answered so far.
CONSENTS: list[str] = []


async def answer_question(context, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Answers the server's question, as a person would in the host's form."""
    if params.message.startswith("Run this statement on warehouse?"):
        CONSENTS.append(params.message)
        return types.ElicitResult(action="accept", content={"proceed": True})
    assert params.message == "Who are you?", params
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


async def check(url: str, mode: str, version: str) -> None:
    async with Client(url, mode=mode, elicitation_callback=answer_question) as client:
        assert client.protocol_version == version, (mode, client.protocol_version)
        assert client.server_info is not None and client.server_info.name == "docket", client.server_info

        tools = await client.list_tools()
        names = {tool.name for tool in tools.tools}
        for name in ("platform_info", "test_simple_text", "test_elicitation"):
            assert name in names, (name, sorted(names))

        me = await client.call_tool("platform_info", {})
        assert not me.is_error, me

        result = await client.call_tool("test_simple_text", {})
        assert not result.is_error, result

        if mode == "legacy":
            seen = []

            async def on_progress(progress, total, message):
                seen.append(progress)

            result = await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            assert not result.is_error and seen, (result, seen)

        asked = await client.call_tool("test_elicitation", {"message": "Who are you?"})
        assert not asked.is_error, asked
        text = asked.content[0].text
        assert "accept" in text and "ada" in text, text
    print(f"python mcp 2.x client, mode={mode} ({version}): ok")


async def check_docket(url: str, mode: str, version: str) -> None:
    """Docket's own tools on `docket serve`: a script saved and run, a consented query."""
    async with Client(url, mode=mode, elicitation_callback=answer_question) as client:
        assert client.protocol_version == version, (mode, client.protocol_version)
        me = await client.call_tool("platform_info", {})
        assert not me.is_error, me
        name = f"py2-{mode}-count"
        source = "total = 0\nfor i in range(1000):\n    total += i\nprint('total', total)\n"
        saved = await client.call_tool("manage_script", {"command": "create", "name": name, "source": source})
        assert not saved.is_error, saved
        ran = await client.call_tool("run_script", {"name": name})
        assert not ran.is_error, ran
        assert ran.structured_content["status"] == "succeeded", ran.structured_content
        assert "total 499500" in str(ran.structured_content), ran.structured_content
        asked_before = len(CONSENTS)
        counted = await client.call_tool("trino_query", {"sql": "SELECT count(*) AS n FROM memory.default.orders"})
        assert len(CONSENTS) == asked_before + 1, "the consent prompt was asked once"
        assert not counted.is_error, counted
        assert "50" in counted.content[0].text, counted
    print(f"python mcp 2.x client on docket serve, mode={mode} ({version}): ok")


async def main(url: str, docket: str | None) -> None:
    await check(url, "legacy", "2025-11-25")
    await check(url, "auto", "2026-07-28")
    if docket:
        await check_docket(docket, "legacy", "2025-11-25")
        await check_docket(docket, "auto", "2026-07-28")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
