"""The official Python MCP client (the `mcp` package, 1.x: it opens with `initialize`)
against a running Docket: negotiation, the session header, tools, progress on the
call's stream, a question answered by elicitation, ping, and the end of the session. Exits non-zero on the first mismatch.

With a second URL, `docket serve`'s own /mcp (on SQLite, with a Trino double behind
a connection that asks consent for every statement), it also saves and runs a
script and answers a real consent prompt through elicitation.

usage: python_legacy.py FIXTURE_URL [DOCKET_URL]
"""

import asyncio
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


# The consent prompts answered so far.
CONSENTS: list[str] = []


async def answer_question(context, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Answers the server's question, as a person would in the host's form."""
    if params.message.startswith("Run this statement on warehouse?"):
        CONSENTS.append(params.message)
        return types.ElicitResult(action="accept", content={"proceed": True})
    assert params.message == "Who are you?", params
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


async def check_docket(url: str) -> None:
    """Docket's own tools on `docket serve`: a script saved and run, a consented query."""
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=answer_question) as session:
            init = await session.initialize()
            assert init.protocolVersion == "2025-11-25", init.protocolVersion
            names = {tool.name for tool in (await session.list_tools()).tools}
            for name in ("manage_script", "run_script", "trino_query", "platform_info"):
                assert name in names, (name, sorted(names))
            me = await session.call_tool("platform_info", {})
            assert not me.isError, me

            source = "total = 0\nfor i in range(1000):\n    total += i\nprint('total', total)\n"
            saved = await session.call_tool(
                "manage_script", {"command": "create", "name": "py1-count", "source": source}
            )
            assert not saved.isError, saved
            ran = await session.call_tool("run_script", {"name": "py1-count"})
            assert not ran.isError, ran
            assert ran.structuredContent["status"] == "succeeded", ran.structuredContent
            assert "total 499500" in str(ran.structuredContent), ran.structuredContent
            print("run_script:", ran.structuredContent["run_id"], ran.structuredContent["status"])

            # The connection asks before every statement: the question arrives as
            # elicitation/create on the call's stream, and the query runs once accepted.
            asked_before = len(CONSENTS)
            counted = await session.call_tool(
                "trino_query", {"sql": "SELECT count(*) AS n FROM memory.default.orders"}
            )
            assert len(CONSENTS) == asked_before + 1, "the consent prompt was asked once"
            assert not counted.isError, counted
            assert "50" in counted.content[0].text, counted
            print("trino_query after consent:", counted.content[0].text[:80])
    print("python mcp client on docket serve: ok")


async def check(url: str) -> None:
    async with streamablehttp_client(url) as (read, write, session_id):
        async with ClientSession(read, write, elicitation_callback=answer_question) as session:
            init = await session.initialize()
            assert init.protocolVersion == "2025-11-25", init.protocolVersion
            assert init.serverInfo.name == "docket", init.serverInfo
            assert init.capabilities.tools is not None, init.capabilities
            sid = session_id()
            assert sid and len(sid) == 32, sid

            await session.send_ping()

            tools = await session.list_tools()
            names = {tool.name for tool in tools.tools}
            for name in ("platform_info", "test_simple_text", "test_tool_with_progress"):
                assert name in names, (name, sorted(names))

            me = await session.call_tool("platform_info", {})
            assert not me.isError, me
            print("platform_info:", me.content[0].text[:80])

            result = await session.call_tool("test_simple_text", {})
            assert not result.isError, result
            assert result.content[0].type == "text", result
            print("test_simple_text:", result.content[0].text)

            seen = []

            async def on_progress(progress, total, message):
                seen.append((progress, total, message))

            result = await session.call_tool(
                "test_tool_with_progress", {}, progress_callback=on_progress
            )
            assert not result.isError, result
            assert seen, "no progress notification arrived on the call's stream"
            print("progress notifications:", seen)

            failed = await session.call_tool("test_error_handling", {})
            assert failed.isError, failed

            # A question the call asks arrives as elicitation/create on its stream; the
            # answer goes back in a POST of its own, and the call goes on with it.
            asked = await session.call_tool("test_elicitation", {"message": "Who are you?"})
            assert not asked.isError, asked
            assert "accept" in asked.content[0].text and "ada" in asked.content[0].text, asked
            print("test_elicitation:", asked.content[0].text)
    print("python mcp client: ok")


if __name__ == "__main__":
    asyncio.run(check(sys.argv[1]))
    if len(sys.argv) > 2:
        asyncio.run(check_docket(sys.argv[2]))
