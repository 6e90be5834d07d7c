"""End-to-end check of a running `nib serve` with the official MCP Python SDK (`mcp`, pinned in
tests/tools/requirements.txt).

Usage: python_client.py URL TOKEN

For each protocol era the SDK speaks it connects with `Authorization: Bearer TOKEN`, then:
initialize (legacy) or server/discover (auto -> 2026-07-28) -> tools/list (all eight tools) ->
tools/call list_pages -> tools/call create_task -> tools/call list_tasks {"status": "open"} (the new
task is listed) -> list_tasks {"limit": 500} (lowered: limit_applied 200) -> update_task_status done
then todo (answers todo) -> get_page (the line reads status open, from the page; a resource link
names the page) -> resources/list (the page) -> resources/read (its markdown) -> prompts/list ->
prompts/get daily_review (embeds the page as a resource) -> delete_task through a client that
answers elicitation (asked first in both eras, 2025-11-25 on the call's event stream within
its session; declined, nothing changes; accepted, deleted). It also checks that connecting without the token fails, and that a bare POST
without it gets HTTP 401 with a WWW-Authenticate challenge.

Prints one line per check and ends with `python client: N passed, M failed`; exits 1 on any failure.
Set NIB_TEST_VERBOSE=1 for full tracebacks.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import urllib.error
import urllib.request
from typing import Any

import anyio
import httpx2  # the SDK's HTTP client; streamable_http_client takes a configured one for headers
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client

# The tools an admin token lists: the catalog, as `nib tools` prints it (tests/clients/run.sh).
EXPECTED_TOOLS = set(os.environ["NIB_EXPECTED_TOOLS"].split())
# The SDK's connect modes: "legacy" forces the initialize handshake (2025-11-25); "auto" probes
# server/discover first and must end up on the stateless 2026-07-28 era, which nib supports.
MODES = {"legacy": "2025-11-25", "auto": "2026-07-28"}
TIMEOUT_S = 30

passed = 0
failed = 0


def check(name: str, ok: bool, detail: str = "") -> bool:
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   - {name}")
    else:
        failed += 1
        print(f"FAIL - {name}{': ' + detail if detail else ''}")
    return ok


def client_for(url: str, token: str | None, mode: str, elicitation_callback: Any = None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT_S, read=TIMEOUT_S * 2))
    # cache=None: always ask the server, so every call below really reaches nib.
    return Client(
        streamable_http_client(url, http_client=http),
        mode=mode,
        cache=None,
        elicitation_callback=elicitation_callback,
    )


async def destructive_tools_ask_first(url: str, token: str, mode: str, era: str, task_id: Any) -> None:
    """delete_task through a client that can ask its user; a decline keeps the task, an accept
    deletes it. On 2026-07-28 nib answers input-required (the SDK's driver calls the callback,
    then calls again with the answer); on 2025-11-25 the SDK declared elicitation at
    initialize, got a session id, and nib puts `elicitation/create` on the call's event
    stream, which the SDK answers by POST."""
    label = f"[{mode}]"
    asked: list[str] = []

    def answering(action: str) -> Any:
        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params.message)
            return types.ElicitResult(action=action)
        return callback

    async def listed() -> bool:
        async with client_for(url, token, mode) as client:
            res = await client.call_tool("list_tasks", {"status": "all", "limit": 200})
            return contains_value(res.structured_content, task_id)

    for action, word in (("decline", "declined"), ("cancel", "cancelled")):
        asked.clear()
        async with client_for(url, token, mode, answering(action)) as client:
            res = await client.call_tool("delete_task", {"task_link_id": task_id})
        text = res.content[0].text if res.content else ""
        check(
            f"{label} delete_task asks first ({era}), naming the task; {word}, it changes nothing",
            len(asked) == 1 and "Python client task" in asked[0] and res.is_error
            and word in text and await listed(),
            f"asked {asked} isError={res.is_error} text={short(text)}",
        )
    asked.clear()
    async with client_for(url, token, mode, answering("accept")) as client:
        res = await client.call_tool("delete_task", {"task_link_id": task_id})
    sc = res.structured_content
    check(
        f"{label} delete_task asks first ({era}); accepted, the task goes to the trash",
        len(asked) == 1 and not res.is_error and not await listed(),
        f"asked {asked} isError={res.is_error} structuredContent={short(sc)}",
    )


def contains_value(value: Any, wanted: str) -> bool:
    """True if `wanted` appears as a string anywhere inside a JSON-like value."""
    if isinstance(value, str):
        return value == wanted
    if isinstance(value, dict):
        return any(contains_value(v, wanted) for v in value.values())
    if isinstance(value, list):
        return any(contains_value(v, wanted) for v in value)
    return False


def leaf_exception(exc: BaseException) -> BaseException:
    """The first non-group exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 300 else text[:300] + "..."


async def list_all_tools(client: Client) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    for _ in range(50):  # a paginator that never ends must not hang the test
        page = await client.list_tools(cursor=cursor)
        names.extend(t.name for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return names


async def run_mode(url: str, token: str, mode: str, era: str) -> None:
    label = f"[{mode}]"
    task_text = "Python client task" if mode == "legacy" else f"Python client task ({era})"
    with anyio.fail_after(TIMEOUT_S * 4):
        async with client_for(url, token, mode) as client:
            check(
                f"{label} connect negotiates {era}",
                client.protocol_version == era,
                f"negotiated {client.protocol_version!r}",
            )

            names = await list_all_tools(client)
            missing = sorted(EXPECTED_TOOLS - set(names))
            check(f"{label} tools/list has the eight tools", not missing, f"missing {missing}; got {names}")

            res = await client.call_tool("list_pages", {})
            sc = res.structured_content
            check(
                f"{label} list_pages returns structuredContent.pages (a list), not isError",
                not res.is_error and isinstance(sc, dict) and isinstance(sc.get("pages"), list),
                f"isError={res.is_error} structuredContent={short(sc)}",
            )

            res = await client.call_tool("create_task", {"target_date": "2026-06-20", "text": task_text})
            sc = res.structured_content
            check(
                f"{label} create_task returns created: true",
                not res.is_error and isinstance(sc, dict) and sc.get("created") is True,
                f"isError={res.is_error} structuredContent={short(sc)}",
            )

            created = sc if isinstance(sc, dict) else {}

            res = await client.call_tool("list_tasks", {"status": "open"})
            sc = res.structured_content
            check(
                f"{label} list_tasks status=open lists the new task",
                not res.is_error and contains_value(sc, task_text),
                f"isError={res.is_error} structuredContent={short(sc)}",
            )

            # A limit above the maximum is lowered, not refused, and the result says so (the SDK
            # validates structuredContent against the output schema, paging fields included).
            res = await client.call_tool("list_tasks", {"status": "all", "limit": 500})
            sc = res.structured_content
            check(
                f"{label} list_tasks limit=500 answers limit_applied 200 and next_cursor",
                not res.is_error
                and isinstance(sc, dict)
                and sc.get("limit_applied") == 200
                and "next_cursor" in sc,
                f"isError={res.is_error} structuredContent={short(sc)}",
            )

            # Done then todo at once reopens the task; its line reads open, from the page.
            task_id = created.get("task_link_id")
            statuses = []
            for status in ("done", "todo"):
                res = await client.call_tool("update_task_status", {"task_link_id": task_id, "status": status})
                sc = res.structured_content
                statuses.append(None if res.is_error or not isinstance(sc, dict) else sc.get("status"))
            check(f"{label} update_task_status done then todo answers todo", statuses == ["done", "todo"], f"got {statuses}")
            res = await client.call_tool("get_page", {"page_id": created.get("page_id")})
            sc = res.structured_content
            lines = sc.get("structure_json", {}).get("lines", []) if isinstance(sc, dict) else []
            line = next((ln for ln in lines if ln.get("line_id") == created.get("block_id")), None)
            check(
                f"{label} get_page shows the reopened line status open, page_status open, from the page",
                not res.is_error
                and line is not None
                and (line.get("status"), line.get("page_status"), line.get("status_source")) == ("open", "open", "page"),
                f"isError={res.is_error} line={short(line)}",
            )
            page_uri = f"nib://pages/{created.get('page_id')}"
            links = [str(c.uri) for c in res.content[1:] if getattr(c, "type", None) == "resource_link"]
            check(f"{label} get_page links its page after the text block", page_uri in links, f"links {links}")

            # Resources and prompts: the page is a resource, and a prompt embeds it.
            listed = await client.list_resources()
            uris = [str(r.uri) for r in listed.resources]
            check(f"{label} resources/list lists the page", page_uri in uris, f"got {uris}")
            read = await client.read_resource(page_uri)
            text = getattr(read.contents[0], "text", "") if read.contents else ""
            check(f"{label} resources/read gives the page's markdown", task_text in text, f"got {short(text)}")
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            check(
                f"{label} prompts/list has the three prompts",
                prompts == ["daily_review", "weekly_review", "carry_forward"],
                f"got {prompts}",
            )
            got = await client.get_prompt("daily_review", {"date": "2026-06-20"})
            embedded = [str(m.content.resource.uri) for m in got.messages if m.content.type == "resource"]
            check(f"{label} daily_review embeds the day's page as a resource", page_uri in embedded, f"got {embedded}")
        await destructive_tools_ask_first(url, token, mode, era, task_id)


async def expect_connect_fails_without_token(url: str, mode: str) -> None:
    try:
        with anyio.fail_after(TIMEOUT_S):
            async with client_for(url, None, mode) as client:
                await client.list_tools()
    except Exception as exc:  # noqa: BLE001 - inspected below
        leaf = leaf_exception(exc)
        # A refused connection or a timeout would also raise; only an error answered by the server counts.
        if check(
            f"[{mode}] connecting without the token fails",
            isinstance(leaf, MCPError),
            f"expected the SDK's MCPError from the server's rejection, got {type(leaf).__name__}: {leaf}",
        ):
            print(f"       ({type(leaf).__name__}: {short(str(leaf))})")
        return
    check(f"[{mode}] connecting without the token fails", False, "connected and listed tools without a token")


def expect_401_without_token(url: str) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "nib-python-client-test", "version": "1.0.0"},
            },
        }
    ).encode()
    req = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            check("POST without the token gets 401 + WWW-Authenticate", False, f"got HTTP {resp.status}")
    except urllib.error.HTTPError as err:
        challenge = err.headers.get("WWW-Authenticate")
        check(
            "POST without the token gets 401 + WWW-Authenticate",
            err.code == 401 and bool(challenge),
            f"HTTP {err.code}, WWW-Authenticate={challenge!r}",
        )
    except (urllib.error.URLError, OSError) as err:
        check("POST without the token gets 401 + WWW-Authenticate", False, f"request failed: {err}")


async def main(url: str, token: str) -> None:
    for mode, era in MODES.items():
        try:
            await run_mode(url, token, mode, era)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next mode
            leaf = leaf_exception(exc)
            check(f"[{mode}] session completes", False, f"{type(leaf).__name__}: {leaf}")
            if os.environ.get("NIB_TEST_VERBOSE"):
                traceback.print_exc()
        await expect_connect_fails_without_token(url, mode)
    expect_401_without_token(url)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python_client.py URL TOKEN", file=sys.stderr)
        sys.exit(2)
    anyio.run(main, sys.argv[1], sys.argv[2])
    print(f"python client: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
