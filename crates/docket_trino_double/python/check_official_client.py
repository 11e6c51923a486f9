"""Checks the Trino double with the official Python `trino` client (docs/design.md, Testing).

Run by .ci/run against the double serving the impersonation rules next to this script:

    cargo xtask trino-double --listen 127.0.0.1:0 --page-rows 16 \
        --access-control-rules crates/docket_trino_double/python/rules.json
    python check_official_client.py http://127.0.0.1:PORT

Every check runs even when an earlier one failed; the script prints one line per
check, then `N passed, N failed`, and exits non-zero on any failure. The page size of
16 makes the 50 orders arrive in four pages and the 1000 synthetic rows in 63, so the
client has to follow `nextUri` across pages.

The impersonation checks authenticate with Basic credentials (the double reads the
user name and checks no password) and run as another session user, as a service
does on behalf of its users; rules.json lets `docket-service` run as `analyst-*` but
not as `root`, and `X-admin` run as `X`. The client refuses credentials over plain
http unless told `allow_insecure_auth=True`, which these checks pass.
"""

import base64
import datetime
import decimal
import json
import sys
import traceback
import urllib.parse
import urllib.request

import trino
from trino.auth import BasicAuthentication
from trino.exceptions import TrinoUserError

SOURCE = "docket-python-check"
SERVICE = "docket-service"
PASSWORD = "any-password"

RESULTS = []


def check(name):
    """Runs the decorated function as a named check and records its outcome."""

    def run(function):
        try:
            function()
        except Exception:  # noqa: BLE001 - every failure is reported, none stops the run
            RESULTS.append((name, False, traceback.format_exc()))
        else:
            RESULTS.append((name, True, ""))
        return function

    return run


def expect(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def connect(url, user="docket-ci", **options):
    parsed = urllib.parse.urlparse(url)
    return trino.dbapi.connect(
        host=parsed.hostname,
        port=parsed.port,
        user=user,
        catalog="memory",
        schema="default",
        source=SOURCE,
        http_scheme="http",
        **options,
    )


def connect_as(url, user, principal, **options):
    """A connection authenticated as `principal` whose queries run as `user`."""
    return connect(
        url,
        user=user,
        auth=BasicAuthentication(principal, PASSWORD),
        allow_insecure_auth=True,
        **options,
    )


def runtime_query(url, query_id, columns):
    """The columns of `query_id`'s row of system.runtime.queries, read by another user."""
    cursor = connect(url).cursor()
    cursor.execute(f"SELECT {columns} FROM system.runtime.queries WHERE query_id = '{query_id}'")
    return cursor.fetchall()


def query_info(url, query_id, principal):
    """Trino's QueryInfo of `query_id`, from GET /v1/query/{queryId}."""
    credentials = base64.b64encode(f"{principal}:{PASSWORD}".encode()).decode()
    request = urllib.request.Request(
        f"{url}/v1/query/{query_id}",
        headers={"Authorization": f"Basic {credentials}", "X-Trino-User": principal},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def expect_denied(url, principal, user):
    """Runs a query as `user` authenticated as `principal`; returns the client's error."""
    cursor = connect_as(url, user, principal).cursor()
    try:
        cursor.execute("SELECT 1")
        cursor.fetchall()
    except TrinoUserError as error:
        expect(error.error_name, "PERMISSION_DENIED", "error name")
        expect(error.error_code, 4, "error code")
        expect(error.error_type, "USER_ERROR", "error type")
        expect(
            error.message,
            f"Access Denied: User {principal} cannot impersonate user {user}",
            "error message",
        )
        return error
    raise AssertionError(
        f"{principal} ran a query as {user}: is the double serving rules.json "
        "(--access-control-rules)?"
    )


def main(url):
    @check("GET /v1/info answers like a coordinator")
    def _():
        with urllib.request.urlopen(f"{url}/v1/info", timeout=10) as response:
            info = json.load(response)
        expect(info["coordinator"], True, "coordinator")
        expect(info["starting"], False, "starting")
        expect(isinstance(info["nodeVersion"]["version"], str), True, "nodeVersion.version")
        expect(isinstance(info["uptime"], str), True, "uptime")

    @check("execute and fetchall collect rows across pages, with Trino's types")
    def _():
        cursor = connect(url).cursor()
        cursor.execute(
            "SELECT orderkey, orderstatus, totalprice, orderdate, comment "
            "FROM orders ORDER BY orderkey"
        )
        rows = cursor.fetchall()
        expect(len(rows), 50, "row count")
        expect([row[0] for row in rows], list(range(1, 51)), "order keys in order")
        expect(rows[0][1], "F", "orderstatus of order 1")
        expect(rows[0][2], decimal.Decimal("37.75"), "totalprice of order 1 (a decimal)")
        expect(rows[0][3], datetime.date(2024, 1, 8), "orderdate of order 1 (a date)")
        expect(rows[49][4], "order 50", "comment of order 50")

    @check("cursor.description reads names, types and type signature arguments")
    def _():
        cursor = connect(url).cursor()
        cursor.execute("SELECT * FROM memory.default.customers WHERE custkey <= 2")
        cursor.fetchall()
        description = [tuple(column) for column in cursor.description]
        expect(
            description,
            [
                ("custkey", "bigint", None, None, None, None, None),
                ("name", "varchar", None, 2147483647, None, None, None),
                ("email", "varchar", None, 2147483647, None, None, None),
                ("country", "varchar(2)", None, 2, None, None, None),
                ("created_at", "timestamp(3)", None, None, 3, None, None),
                ("active", "boolean", None, None, None, None, None),
            ],
            "description",
        )
        orders = connect(url).cursor()
        orders.execute("SELECT totalprice FROM orders LIMIT 1")
        orders.fetchall()
        expect(
            tuple(orders.description[0]),
            ("totalprice", "decimal(12,2)", None, None, 12, 2, None),
            "decimal description",
        )

    @check("timestamps, booleans and nulls map to Python values")
    def _():
        cursor = connect(url).cursor()
        cursor.execute("SELECT created_at, active, email FROM customers WHERE custkey = 6")
        rows = cursor.fetchall()
        expect(
            rows,
            [[datetime.datetime(2024, 6, 30, 16, 20), False, None]],
            "customer 6",
        )

    @check("a thousand synthetic rows arrive in order over many pages")
    def _():
        cursor = connect(url).cursor()
        cursor.execute("SELECT id, name FROM synthetic.big.rows_1k")
        seen = 0
        while True:
            batch = cursor.fetchmany(100)
            if not batch:
                break
            for row in batch:
                seen += 1
                expect(row, [seen, f"row-{seen}"], f"row {seen}")
        expect(seen, 1000, "rows seen")
        expect(cursor.stats["state"], "FINISHED", "final state")
        expect(cursor.stats["processedRows"], 1000, "processedRows")

    @check("SHOW and DESCRIBE answer from the catalog")
    def _():
        cursor = connect(url).cursor()
        cursor.execute("SHOW CATALOGS")
        expect(cursor.fetchall(), [["memory"], ["synthetic"], ["system"], ["tpch"]], "catalogs")
        cursor.execute("SHOW TABLES FROM tpch.tiny")
        expect(cursor.fetchall(), [["nation"], ["region"]], "tpch.tiny tables")
        cursor.execute("DESCRIBE orders")
        described = [(row[0], row[1]) for row in cursor.fetchall()]
        expect(described[3], ("totalprice", "decimal(12,2)"), "DESCRIBE orders")

    @check("EXPLAIN reports an estimated row count")
    def _():
        cursor = connect(url).cursor()
        cursor.execute("EXPLAIN SELECT * FROM orders")
        plan = cursor.fetchall()[0][0]
        expect("Estimates: {rows: 50 " in plan, True, f"estimate in plan:\n{plan}")

    @check("cancel() sends DELETE to the next URI and gets 204")
    def _():
        cursor = connect(url).cursor()
        cursor.execute("SELECT * FROM synthetic.big.rows_1m")
        expect(len(cursor.fetchmany(10)), 10, "first rows")
        # The client raises unless the DELETE is answered with 204 No Content.
        cursor.cancel()
        expect(cursor._query.cancelled, True, "cancelled")  # noqa: SLF001
        # A GET of the URI the client was about to follow now reports USER_CANCELED.
        next_uri = cursor._query._next_uri  # noqa: SLF001
        with urllib.request.urlopen(next_uri, timeout=10) as response:
            document = json.load(response)
        expect(document["error"]["errorName"], "USER_CANCELED", "error after cancel")
        expect("nextUri" in document, False, "no nextUri after cancel")

    @check("a syntax error raises TrinoUserError SYNTAX_ERROR with its position")
    def _():
        cursor = connect(url).cursor()
        try:
            cursor.execute("SELECT * FORM orders")
            cursor.fetchall()
        except TrinoUserError as error:
            expect(error.error_name, "SYNTAX_ERROR", "error name")
            expect(error.error_type, "USER_ERROR", "error type")
            expect(error.error_location, (1, 10), "error location")
        else:
            raise AssertionError("no TrinoUserError for a syntax error")

    @check("an unknown table raises TrinoUserError TABLE_NOT_FOUND")
    def _():
        cursor = connect(url).cursor()
        try:
            cursor.execute("SELECT * FROM memory.default.missing")
            cursor.fetchall()
        except TrinoUserError as error:
            expect(error.error_name, "TABLE_NOT_FOUND", "error name")
            expect(error.error_location, (1, 15), "error location")
        else:
            raise AssertionError("no TrinoUserError for an unknown table")

    @check("an error after partial data reaches the client after the first pages")
    def _():
        cursor = connect(url).cursor()
        cursor.execute(
            "SELECT id, CASE WHEN id = 40 THEN fail('row 40 is bad') ELSE id END "
            "FROM synthetic.big.rows_1k"
        )
        received = []
        try:
            while True:
                row = cursor.fetchone()
                if row is None:
                    break
                received.append(row[0])
        except TrinoUserError as error:
            expect(error.error_name, "GENERIC_USER_ERROR", "error name")
            expect(error.message, "row 40 is bad", "error message")
        else:
            raise AssertionError("no TrinoUserError after partial data")
        expect(received[:16], list(range(1, 17)), "rows before the failure")

    @check("an allowed impersonation runs as the session user, as system.runtime.queries shows")
    def _():
        cursor = connect_as(url, "analyst-ada", SERVICE).cursor()
        cursor.execute("SELECT custkey FROM customers WHERE custkey = 1")
        expect(cursor.fetchall(), [[1]], "rows")
        query_id = cursor.query_id
        expect(
            runtime_query(url, query_id, "user, source"),
            [["analyst-ada", SOURCE]],
            "user and source",
        )
        expect(
            runtime_query(url, query_id, "state, error_type, error_code"),
            [["FINISHED", None, None]],
            "final state",
        )

    @check("new_user may refer to original_user's groups: ada-admin runs as ada")
    def _():
        cursor = connect_as(url, "ada", "ada-admin").cursor()
        cursor.execute("SELECT 1")
        expect(cursor.fetchall(), [[1]], "rows")
        expect(runtime_query(url, cursor.query_id, "user"), [["ada"]], "user")

    @check("a denied impersonation raises TrinoUserError PERMISSION_DENIED with Trino's message")
    def _():
        error = expect_denied(url, SERVICE, "root")
        expect(
            runtime_query(url, error.query_id, "user, state, error_type, error_code"),
            [["root", "FAILED", "USER_ERROR", "PERMISSION_DENIED"]],
            "the denied query in system.runtime.queries",
        )

    @check("no matching rule denies, and the first matching rule decides")
    def _():
        expect_denied(url, "mallory", "ada")
        expect_denied(url, "ada-admin", "grace")
        # docket-service matches `analyst-.*` only after its `root` rule.
        expect_denied(url, SERVICE, "ada")

    @check("running as oneself, with or without credentials, is no impersonation")
    def _():
        cursor = connect_as(url, "mallory", "mallory").cursor()
        cursor.execute("SELECT 1")
        expect(cursor.fetchall(), [[1]], "rows")
        cursor = connect(url, user="root").cursor()
        cursor.execute("SELECT 1")
        expect(cursor.fetchall(), [[1]], "rows")
        info = query_info(url, cursor.query_id, "root")
        expect(info["session"]["principal"], None, "principal without credentials")
        expect(info["session"]["originalUser"], "root", "original user")

    @check("client tags, client info and trace token reach the double's QueryInfo")
    def _():
        cursor = connect_as(
            url,
            "analyst-bo",
            SERVICE,
            client_tags=["nightly", "docket"],
            http_headers={
                "X-Trino-Client-Info": "docket export 42",
                "X-Trino-Trace-Token": "trace-python-check",
            },
        ).cursor()
        cursor.execute("SELECT 1")
        cursor.fetchall()
        session = query_info(url, cursor.query_id, SERVICE)["session"]
        expect(sorted(session["clientTags"]), ["docket", "nightly"], "client tags")
        expect(session["clientInfo"], "docket export 42", "client info")
        expect(session["traceToken"], "trace-python-check", "trace token")
        expect(session["user"], "analyst-bo", "session user")
        expect(session["principal"], SERVICE, "principal")
        expect(session["source"], SOURCE, "source")

    @check("system.runtime.queries has Trino's columns and types, mapped to Python values")
    def _():
        cursor = connect(url).cursor()
        cursor.execute("SELECT 1")
        cursor.fetchall()
        [[resource_group, created, started, end, queued]] = runtime_query(
            url,
            cursor.query_id,
            'resource_group_id, created, started, "end", queued_time_ms',
        )
        expect(resource_group, ["global"], "resource_group_id (an array)")
        for name, value in [("created", created), ("started", started), ("end", end)]:
            expect(isinstance(value, datetime.datetime), True, f"{name} is a datetime")
            expect(value.utcoffset(), datetime.timedelta(0), f"{name} is in UTC")
        expect(created <= started <= end, True, "created, started and end in order")
        expect(isinstance(queued, int), True, "queued_time_ms is a number")
        described = connect(url).cursor()
        described.execute("DESCRIBE system.runtime.queries")
        expect(
            [(row[0], row[1]) for row in described.fetchall()],
            [
                ("query_id", "varchar"),
                ("state", "varchar"),
                ("user", "varchar"),
                ("source", "varchar"),
                ("query", "varchar"),
                ("resource_group_id", "array(varchar)"),
                ("queued_time_ms", "bigint"),
                ("analysis_time_ms", "bigint"),
                ("planning_time_ms", "bigint"),
                ("created", "timestamp(3) with time zone"),
                ("started", "timestamp(3) with time zone"),
                ("last_heartbeat", "timestamp(3) with time zone"),
                ("end", "timestamp(3) with time zone"),
                ("error_type", "varchar"),
                ("error_code", "varchar"),
            ],
            "columns",
        )

    passed = sum(1 for _, ok, _ in RESULTS if ok)
    failed = len(RESULTS) - passed
    for name, ok, details in RESULTS:
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        if details:
            print("     " + details.replace("\n", "\n     "))
    print(f"python trino {trino.__version__}: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} http://HOST:PORT", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1].rstrip("/")))
