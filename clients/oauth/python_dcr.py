"""The official Python MCP client (the `mcp` package, the 1.x version clients/run pins) logging in
to Docket through Docket's own authorization server, as a host does for a person:

1. discovery from the 401 of /mcp (protected-resource metadata naming Docket as the authorization
   server, then Docket's RFC 8414 metadata);
2. dynamic client registration (RFC 7591) at Docket's registration endpoint, with a loopback
   redirect URI on a port of this process's own callback server (RFC 8252);
3. the login in a real headless Chromium: the SDK's redirect handler runs browser.mjs, which signs
   in at the provider's login form and approves Docket's consent page naming this client; the
   browser's redirect reaches the callback server, whose `state` the SDK checks and whose `iss`
   (RFC 9207) is checked here;
4. `tools/list` and `tools/call` (`platform_info` names alice, her role and persona);
5. a refresh through the SDK's own path: the SDK refreshes when it holds the access token for
   expired, so its expiry is moved into the past (what time does to it); the tokens rotate, the
   next call carries the new access token, and presenting the old refresh token again is
   `invalid_grant`, and so is the newest one then (reuse revokes the whole family);
6. the SDK's recovery from the revoked family: its refresh refused, it drops its tokens and logs
   in again, and Docket asks no consent the second time.

usage: python_dcr.py DOCKET_MCP_URL --browser PATH/TO/browser.mjs [--account alice]
Exits non-zero on the first mismatch.
"""

import argparse
import asyncio
import json
import sys
import time
from urllib.parse import parse_qs, urlsplit

import httpx
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

CLIENT_NAME = "Docket OAuth check (Python mcp)"


class MemoryStorage:
    """The host's OAuth state for one server, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class CallbackServer:
    """The loopback redirect URI: the queries of the requests to /callback, in order."""

    def __init__(self) -> None:
        self.answers: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = (await reader.readline()).decode("latin-1")
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        parts = request_line.split(" ")
        target = urlsplit(parts[1]) if len(parts) >= 2 else urlsplit("/")
        if target.path == "/callback":
            self.answers.put_nowait({name: values[0] for name, values in parse_qs(target.query).items()})
            body = b"<!doctype html><title>Signed in</title><p>Signed in; you may close this window.</p>"
            status = b"200 OK"
        else:
            body = b""
            status = b"404 Not Found"
        writer.write(
            b"HTTP/1.1 " + status + b"\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
        )
        await writer.drain()
        writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


class Recorder:
    """Every request the SDK makes (MCP and OAuth alike), with the bearer token it carried."""

    def __init__(self) -> None:
        self.requests: list[dict[str, object]] = []

    async def on_response(self, response: httpx.Response) -> None:
        authorization = response.request.headers.get("authorization", "")
        self.requests.append(
            {
                "method": response.request.method,
                "path": response.request.url.path,
                "status": response.status_code,
                "bearer": authorization.removeprefix("Bearer ") or None,
                "challenge": response.headers.get("www-authenticate"),
            }
        )

    def paths(self, since: int = 0) -> list[str]:
        return [str(r["path"]) for r in self.requests[since:]]

    def describe(self) -> str:
        return "\n".join(f"  {r['method']} {r['path']} -> {r['status']}" for r in self.requests)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mcp_url")
    parser.add_argument("--browser", required=True)
    parser.add_argument("--account", default="alice")
    options = parser.parse_args()
    mcp_url: str = options.mcp_url

    async with httpx.AsyncClient() as plain:
        origin = f"{urlsplit(mcp_url).scheme}://{urlsplit(mcp_url).netloc}"
        resource_metadata = (await plain.get(f"{origin}/.well-known/oauth-protected-resource/mcp")).json()
        server_metadata = (await plain.get(f"{origin}/.well-known/oauth-authorization-server")).json()
    issuer = server_metadata["issuer"]
    assert resource_metadata["authorization_servers"] == [issuer], resource_metadata
    assert server_metadata.get("registration_endpoint"), server_metadata

    callback = CallbackServer()
    await callback.start()
    redirect_uri = f"http://127.0.0.1:{callback.port}/callback"
    browser_steps: list[list[str]] = []

    async def redirect_handler(authorization_url: str) -> None:
        process = await asyncio.create_subprocess_exec(
            "node", options.browser, authorization_url,
            "--account", options.account, "--redirect-uri", redirect_uri, "--consent-must-name", CLIENT_NAME,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"browser.mjs failed with status {process.returncode} (its log is above)")
        browser_steps.append(json.loads(out)["steps"])

    async def callback_handler() -> tuple[str, str | None]:
        answer = await callback.answers.get()
        if "error" in answer:
            raise RuntimeError(f"the authorization ended with {answer['error']}: {answer.get('error_description')}")
        assert answer.get("iss") == issuer, ("the redirect names Docket as the issuer (RFC 9207)", answer.get("iss"))
        return answer["code"], answer.get("state")

    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        timeout=120,
    )
    recorder = Recorder()

    async def check_platform_info(session: ClientSession) -> dict[str, object]:
        info = await session.call_tool("platform_info", {})
        assert not info.isError, info
        content = info.structuredContent or {}
        identity = content["identity"]
        assert identity["email"] == f"{options.account}@example.com", identity
        assert identity["roles"] == ["analyst"], identity
        assert content["persona"] == "analyst", content
        return identity

    try:
        async with httpx.AsyncClient(
            auth=auth,
            timeout=httpx.Timeout(30, read=300),
            event_hooks={"response": [recorder.on_response]},
        ) as http:
            async with streamable_http_client(mcp_url, http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    # 1-3: the initialize is refused with a 401, and the SDK logs in.
                    await session.initialize()
                    paths = recorder.paths()
                    assert recorder.requests[0]["status"] == 401, recorder.describe()
                    challenge = str(recorder.requests[0]["challenge"] or "")
                    metadata_url = f"{origin}/.well-known/oauth-protected-resource/mcp"
                    assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in challenge, challenge
                    for path in (
                        "/.well-known/oauth-protected-resource/mcp",
                        "/.well-known/oauth-authorization-server",
                        "/oauth/register",
                        "/oauth/token",
                    ):
                        assert path in paths, (path, recorder.describe())
                    assert storage.client_info is not None
                    client_id = storage.client_info.client_id
                    assert client_id and not client_id.startswith("https://"), client_id
                    assert browser_steps == [["login", "consent", "redirected to the client"]], browser_steps
                    first = storage.tokens
                    assert first is not None and first.access_token and first.refresh_token, first
                    print(f"discovery from the 401, registered as {client_id}, browser: {' -> '.join(browser_steps[0])}")

                    # 4: tools.
                    tools = (await session.list_tools()).tools
                    assert any(tool.name == "platform_info" for tool in tools), tools
                    identity = await check_platform_info(session)
                    print(
                        f"tools/list: {len(tools)} tools; tools/call platform_info: "
                        f"{identity['email']} {identity['roles']} ({identity['auth_type']})"
                    )

                    # 5: the access token is due; the SDK refreshes before the next call.
                    before = len(recorder.requests)
                    auth.context.token_expiry_time = time.time() - 1
                    await check_platform_info(session)
                    refreshed = storage.tokens
                    assert refreshed is not None
                    since = recorder.requests[before:]
                    assert any(r["path"] == "/oauth/token" and r["status"] == 200 for r in since), recorder.describe()
                    assert refreshed.access_token != first.access_token, "a new access token"
                    assert refreshed.refresh_token and refreshed.refresh_token != first.refresh_token, "rotated"
                    calls = [r for r in since if r["path"] == urlsplit(mcp_url).path]
                    assert calls and calls[-1]["status"] == 200, recorder.describe()
                    assert calls[-1]["bearer"] == refreshed.access_token, "the call carried the refreshed token"
                    await check_platform_info(session)
                    print("refresh: the SDK refreshed the due token, the tokens rotated, and calls work with the new one")

                    # The old refresh token again: refused, and the family is revoked with it.
                    async with httpx.AsyncClient() as plain:
                        for label, token in (
                            ("the old refresh token", first.refresh_token),
                            ("the newest, after it", refreshed.refresh_token),
                        ):
                            answer = await plain.post(
                                server_metadata["token_endpoint"],
                                data={
                                    "grant_type": "refresh_token",
                                    "refresh_token": token,
                                    "client_id": client_id,
                                    "resource": resource_metadata["resource"],
                                },
                            )
                            assert answer.status_code == 400 and answer.json().get("error") == "invalid_grant", (
                                label,
                                answer.status_code,
                                answer.text,
                            )
                    print("reuse: the old refresh token is invalid_grant, and the whole family with it")

                    # 6: the SDK still holds the newest token of the revoked family. When its access
                    # token is due, its refresh is refused; it drops its tokens, gets a 401 and logs
                    # in again in a new browser: the provider's login, but no consent page, since
                    # alice approved this client already.
                    before = len(recorder.requests)
                    auth.context.token_expiry_time = time.time() - 1
                    await check_platform_info(session)
                    since = recorder.requests[before:]
                    assert any(r["path"] == "/oauth/token" and r["status"] == 400 for r in since), recorder.describe()
                    assert browser_steps[1:] == [["login", "redirected to the client"]], browser_steps
                    assert storage.tokens is not None and storage.tokens.refresh_token not in (
                        first.refresh_token,
                        refreshed.refresh_token,
                    )
                    print(
                        f"a new login after the revocation: {' -> '.join(browser_steps[1])} "
                        "(the consent is remembered), and calls work again"
                    )
    finally:
        callback.close()

    print("Python mcp: DCR login, tool calls and refresh against Docket: ok")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # the whole chain, so a failure names where it happened
        import traceback

        traceback.print_exception(error)
        sys.exit(1)
