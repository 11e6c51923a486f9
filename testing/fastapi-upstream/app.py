"""A small "shop" API on FastAPI and uvicorn: a real upstream for Docket's tests.

FastAPI generates the OpenAPI 3.1 document at /openapi.json. Bearer JWTs (checked against an
OpenID provider's JWKS) and TLS with client certificates are turned on by flags; see README.md.

The server binds 127.0.0.1 (a free port unless --port says otherwise) and prints one line,
`listening on http(s)://127.0.0.1:<port>`, to stdout once it accepts connections. Everything
else it says goes to stderr.
"""

import argparse
import asyncio
import json
import logging
import os
import socket
import ssl
import sys
import threading
import urllib.request
from typing import Annotated, Any

import jwt
import uvicorn
from cryptography import x509
from cryptography.x509.oid import NameOID
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from uvicorn.protocols.http.h11_impl import H11Protocol

# The only outbound requests go to the issuer, on loopback: never through a proxy.
os.environ["no_proxy"] = "*"
os.environ["NO_PROXY"] = "*"

LOG = logging.getLogger("fastapi-upstream")


# --- The shop's data -------------------------------------------------------------------------


class Item(BaseModel):
    """An item as a client submits it."""

    name: str = Field(min_length=1, description="What the item is called.", examples=["Teapot"])
    price: float = Field(gt=0, description="Its price in euros; more than zero.", examples=[19.5])
    tags: list[str] = Field(default=[], description="Free-form labels, for filtering.")


class StoredItem(Item):
    """An item in the catalog, with the id the shop gave it."""

    id: int = Field(description="The item's id, given by the shop.")


class OrderLine(BaseModel):
    """One line of an order."""

    line: int = Field(description="The line number, from 1.")
    item_id: int = Field(description="The item ordered.")
    quantity: int = Field(ge=1, description="How many.")
    unit_price: float = Field(description="The price of one, in euros, when ordered.")


class Caller(BaseModel):
    """What the request's credentials proved."""

    authenticated: bool = Field(description="Whether a bearer token was required and verified.")
    sub: str | None = Field(default=None, description="The token's `sub`.")
    client_id: str | None = Field(default=None, description="The token's `client_id`.")
    aud: str | list[str] | None = Field(default=None, description="The token's `aud`.")
    iss: str | None = Field(default=None, description="The token's `iss`.")
    scope: str | None = Field(default=None, description="The token's `scope`.")
    client_cert_subject: str | None = Field(
        default=None, description="The TLS client certificate's subject (RFC 4514)."
    )
    client_cert_cn: str | None = Field(
        default=None, description="The TLS client certificate's common name."
    )


SEED_ITEMS = [
    StoredItem(id=1, name="Teapot", price=19.5, tags=["kitchen", "ceramic"]),
    StoredItem(id=2, name="Espresso cup", price=6.0, tags=["kitchen", "ceramic"]),
    StoredItem(id=3, name="Desk lamp", price=34.9, tags=["office", "lighting"]),
    StoredItem(id=4, name="Notebook", price=3.25, tags=["office", "paper"]),
    StoredItem(id=5, name="Tea towel", price=4.5, tags=["kitchen", "textile"]),
]

ORDERS = {
    "A-1001": [
        OrderLine(line=1, item_id=1, quantity=1, unit_price=19.5),
        OrderLine(line=2, item_id=2, quantity=4, unit_price=6.0),
    ],
    "A-1002": [OrderLine(line=1, item_id=3, quantity=2, unit_price=34.9)],
}


# --- Credentials -----------------------------------------------------------------------------


class JwtCheck:
    """Verifies bearer JWTs: RS256, signed with a key of the issuer's JWKS, for one audience."""

    def __init__(self, issuer: str, audience: str) -> None:
        self.issuer = issuer
        self.audience = audience
        discovery_url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        # Fetched once at startup, so that a wrong issuer fails the start, not a request.
        with urllib.request.urlopen(discovery_url, timeout=30) as response:
            discovery = json.load(response)
        jwks_uri = discovery.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ValueError(f"{discovery_url} has no jwks_uri")
        self.jwks = jwt.PyJWKClient(jwks_uri, timeout=30)

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims; raises jwt.PyJWTError when it is not acceptable."""
        key = self.jwks.get_signing_key_from_jwt(token)
        return jwt.decode(
            token,
            key.key,
            algorithms=["RS256"],
            audience=self.audience,
            issuer=self.issuer,
            options={"require": ["exp", "iss", "aud"]},
        )


def unauthorized(description: str) -> HTTPException:
    return HTTPException(
        status_code=401,
        detail={"error": "invalid_token", "error_description": description},
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )


def bearer_dependency(check: JwtCheck):
    """A dependency that refuses a request without a valid bearer JWT (401) and keeps the
    token's claims in `request.state.claims`. Synchronous on purpose: FastAPI runs it in a
    thread, where fetching the JWKS does not block the event loop."""

    bearer = HTTPBearer(auto_error=False, description="An access token of the issuer (JWT).")

    def require_token(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        if credentials is None:
            raise unauthorized("a bearer token is required")
        try:
            request.state.claims = check.verify(credentials.credentials)
        except jwt.PyJWTError as error:
            raise unauthorized(f"the token was refused: {error}") from error

    return require_token


def client_certificate(request: Request) -> x509.Certificate | None:
    """The TLS client certificate, from the ASGI TLS extension (see TlsScopeProtocol)."""
    tls = request.scope.get("extensions", {}).get("tls") or {}
    chain = tls.get("client_cert_chain") or []
    if not chain:
        return None
    return x509.load_pem_x509_certificate(chain[0].encode("ascii"))


# --- The application -------------------------------------------------------------------------


def create_app(check: JwtCheck | None) -> FastAPI:
    dependencies = [Depends(bearer_dependency(check))] if check is not None else []
    # /openapi.json is served by FastAPI itself, outside the routes, so the dependency above
    # never guards it. The interactive docs are off: every route but the document is guarded.
    app = FastAPI(
        title="Shop API",
        version="1.4.0",
        description="A small shop: a catalog of items and the lines of orders.",
        dependencies=dependencies,
        docs_url=None,
        redoc_url=None,
    )
    items = {item.id: item for item in SEED_ITEMS}

    @app.get(
        "/items",
        operation_id="list_items",
        summary="List items",
        description="Search the catalog: by a part of the name, by tags, a page at a time.",
        tags=["items"],
    )
    def list_items(
        q: Annotated[
            str | None, Query(description="A case-insensitive part of the item's name.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=100, description="At most this many items.")] = 10,
        tag: Annotated[
            list[str], Query(description="Only items carrying every one of these tags.")
        ] = [],
    ) -> list[StoredItem]:
        found = [
            item
            for item in items.values()
            if (q is None or q.lower() in item.name.lower()) and all(t in item.tags for t in tag)
        ]
        return found[:limit]

    @app.get(
        "/items/{item_id}",
        operation_id="get_item",
        summary="Get one item",
        description="One item of the catalog by its id.",
        tags=["items"],
        responses={404: {"description": "No item has this id."}},
    )
    def get_item(
        item_id: Annotated[int, Path(ge=1, description="The item's id.")],
    ) -> StoredItem:
        item = items.get(item_id)
        if item is None:
            raise HTTPException(status_code=404, detail=f"item {item_id} not found")
        return item

    @app.post(
        "/items",
        operation_id="create_item",
        summary="Create an item",
        description="Adds an item to the catalog and answers it with its new id.",
        tags=["items"],
        status_code=201,
    )
    def create_item(item: Item) -> StoredItem:
        stored = StoredItem(id=max(items, default=0) + 1, **item.model_dump())
        items[stored.id] = stored
        return stored

    @app.get(
        "/orders/{order_id}/lines",
        operation_id="list_order_lines",
        summary="List an order's lines",
        description="The lines of one order: which items, how many, at what price.",
        tags=["orders"],
        responses={404: {"description": "No order has this id."}},
    )
    def list_order_lines(
        order_id: Annotated[
            str, Path(pattern=r"^[A-Z]-\d+$", description="The order's id, such as A-1001.")
        ],
    ) -> list[OrderLine]:
        lines = ORDERS.get(order_id)
        if lines is None:
            raise HTTPException(status_code=404, detail=f"order {order_id} not found")
        return lines

    @app.get(
        "/legacy/items",
        operation_id="list_items_legacy",
        summary="List every item (old)",
        description="Every item at once, unfiltered. Deprecated: use list_items.",
        tags=["items"],
        deprecated=True,
    )
    def list_items_legacy() -> list[StoredItem]:
        return list(items.values())

    @app.get(
        "/whoami",
        operation_id="whoami",
        summary="Who is calling",
        description="What the request's credentials proved: the token's subject, client and "
        "audience, and the TLS client certificate's subject.",
        tags=["auth"],
    )
    def whoami(request: Request) -> Caller:
        claims = getattr(request.state, "claims", None) or {}
        certificate = client_certificate(request)
        common_names = (
            certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
            if certificate is not None
            else []
        )
        return Caller(
            authenticated=check is not None,
            sub=claims.get("sub"),
            client_id=claims.get("client_id"),
            aud=claims.get("aud"),
            iss=claims.get("iss"),
            scope=claims.get("scope"),
            client_cert_subject=(
                certificate.subject.rfc4514_string() if certificate is not None else None
            ),
            client_cert_cn=str(common_names[0].value) if common_names else None,
        )

    @app.get(
        "/echo-headers",
        operation_id="echo_headers",
        summary="Echo the request headers",
        description="The headers this request arrived with, names in lower case; a repeated "
        "header's values are joined with a comma.",
        tags=["debug"],
    )
    def echo_headers(request: Request) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return headers

    # No operation_id on purpose: FastAPI makes one up (`health_health_get`), as it does for
    # most real services.
    @app.get("/health", summary="Health", tags=["debug"])
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


# --- Serving ---------------------------------------------------------------------------------


class TlsScopeProtocol(H11Protocol):
    """uvicorn's h11 protocol, adding the ASGI TLS extension (`scope["extensions"]["tls"]`,
    with the client certificate) that uvicorn itself does not provide."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None:
            return
        der = ssl_object.getpeercert(binary_form=True)
        chain = [ssl.DER_cert_to_PEM_cert(der)] if der else []
        name = x509.load_der_x509_certificate(der).subject.rfc4514_string() if der else None
        tls = {
            "server_cert": None,
            "client_cert_chain": chain,
            "client_cert_name": name,
            "client_cert_error": None,
            "tls_version": None,
            "cipher_suite": None,
        }
        app = self.app

        async def with_tls(scope, receive, send):
            scope.setdefault("extensions", {})["tls"] = tls
            await app(scope, receive, send)

        # Per connection: the protocol calls `self.app` for each request it reads.
        self.app = with_tls


def exit_when_stdin_closes() -> None:
    """Exits the process once standard input reaches its end: the parent is gone."""

    def watch() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()


async def serve(app: FastAPI, args: argparse.Namespace) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    port = listener.getsockname()[1]

    tls: dict[str, Any] = {}
    if args.tls_cert:
        tls = {"ssl_certfile": args.tls_cert, "ssl_keyfile": args.tls_key}
        if args.client_ca:
            tls.update(ssl_ca_certs=args.client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
    config = uvicorn.Config(
        app,
        http=TlsScopeProtocol,
        ws="none",
        lifespan="off",
        log_config=None,
        log_level="warning",
        access_log=False,
        **tls,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started:
        if task.done():
            await task
            raise SystemExit("uvicorn stopped before it started")
        await asyncio.sleep(0.01)

    scheme = "https" if args.tls_cert else "http"
    print(f"listening on {scheme}://127.0.0.1:{port}", flush=True)
    # Nothing else goes to stdout: a stray print lands on stderr.
    sys.stdout = sys.stderr
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    parser.add_argument("--require-jwt", action="store_true", help="require a bearer JWT")
    parser.add_argument("--issuer", help="the JWT issuer (its discovery gives the JWKS)")
    parser.add_argument("--audience", help="the JWT audience")
    parser.add_argument("--tls-cert", help="serve https with this certificate (PEM)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")
    parser.add_argument("--client-ca", help="require client certificates signed by this CA")
    parser.add_argument(
        "--exit-when-stdin-closes",
        action="store_true",
        help="exit when standard input closes (the parent process went away)",
    )
    args = parser.parse_args()
    if args.require_jwt and not (args.issuer and args.audience):
        parser.error("--require-jwt needs --issuer and --audience")
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        parser.error("--client-ca needs --tls-cert and --tls-key")

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if args.exit_when_stdin_closes:
        exit_when_stdin_closes()
    check = None
    if args.require_jwt:
        try:
            check = JwtCheck(args.issuer, args.audience)
        except Exception as error:  # noqa: BLE001 - any failure here ends the start
            sys.exit(f"cannot read the issuer's discovery document: {error}")
    asyncio.run(serve(create_app(check), args))


if __name__ == "__main__":
    main()
