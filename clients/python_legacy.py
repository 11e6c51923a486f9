"""The official Python MCP client (the `mcp` package, 1.x: it opens with `initialize`)
against a running Docket: negotiation, the session header, tools, progress on the
call's stream, a question answered by elicitation, ping, and the end of the session. Exits non-zero on the first mismatch.

usage: python_legacy.py URL     (the /mcp endpoint, e.g. the conformance fixture's)
"""

import asyncio
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def answer_question(context, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Answers the server's question, as a person would in the host's form."""
    assert params.message == "Who are you?", params
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


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
