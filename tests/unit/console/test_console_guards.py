"""The console's guard rails, through Starlette's test client over a fake backend (no server):
security headers, the loopback Host check, login off loopback, CSRF on every POST, and the
refusal to serve off loopback without a token."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from wiggle.client import Instance, InstanceStatus, Token, TokenState
from wiggle.console import ConsoleSettings, create_app, settings_for
from wiggle.console._backend import InstancePage
from wiggle.errors import InstanceNotFound, InvalidRequest

ROW = Instance(
    "i-1", "greet", "sha256:" + "a" * 64, InstanceStatus.RUNNING, {}, "", "SERVER", "", 1, 2,
    current_node="hello",
)  # fmt: skip


class FakeBackend:
    """Records the actions; answers one instance list."""

    def __init__(self) -> None:
        self.actions: list[tuple[Any, ...]] = []

    def list_instances(self, query: Any) -> InstancePage:
        return InstancePage([ROW], "", {"RUNNING": 1})

    def describe(self, instance_id: str) -> Instance:
        raise InstanceNotFound(instance_id)

    def signal(self, instance_id: str, name: str, payload: Any) -> bool:
        self.actions.append(("signal", instance_id, name, payload))
        return True

    def cancel(self, instance_id: str, reason: str) -> str:
        self.actions.append(("cancel", instance_id, reason))
        return "CANCELLED"


def _client(settings: ConsoleSettings | None = None, base: str = "http://127.0.0.1:8080"):
    backend = FakeBackend()
    app = create_app(backend, settings)  # type: ignore[arg-type]
    return TestClient(app, base_url=base, follow_redirects=False), backend


def _csrf(client: TestClient) -> str:
    client.get("/instances")
    return client.cookies["wiggle_csrf"]


def test_every_page_carries_a_strict_csp_and_a_protected_csrf_cookie():
    client, _ = _client()
    response = client.get("/instances")
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    cookie = response.headers["set-cookie"].lower()
    assert "wiggle_csrf=" in cookie and "httponly" in cookie and "samesite=strict" in cookie
    assert client.get("/static/console.js").headers["content-security-policy"] == csp


def test_a_loopback_console_refuses_foreign_host_names():
    client, _ = _client(base="http://attacker.example:8080")
    assert client.get("/instances").status_code == 400
    for base in ("http://localhost:8080", "http://[::1]:8080", "http://127.0.0.1"):
        assert _client(base=base)[0].get("/instances").status_code == 200


def test_a_post_without_the_csrf_token_acts_on_nothing():
    client, backend = _client()
    _csrf(client)
    form = {"name": "go", "payload": "{}", "confirm": "yes"}
    response = client.post("/instances/i-1/signal", data=form)
    assert response.status_code == 403 and "CSRF" in response.text
    response = client.post("/instances/i-1/signal", data={**form, "csrf": "x" * 43})
    assert response.status_code == 403
    assert backend.actions == []


def test_a_post_from_another_origin_is_refused_even_with_the_token():
    client, backend = _client()
    token = _csrf(client)
    response = client.post(
        "/instances/i-1/cancel",
        data={"csrf": token, "reason": "r", "confirm": "yes"},
        headers={"origin": "http://evil.example"},
    )
    assert response.status_code == 403
    assert backend.actions == []


def test_signal_and_cancel_act_only_after_the_confirmation():
    client, backend = _client()
    token = _csrf(client)
    first = client.post(
        "/instances/i-1/signal", data={"csrf": token, "name": "go", "payload": '{"a": 1}'}
    )
    assert first.status_code == 200 and 'name="confirm" value="yes"' in first.text
    assert backend.actions == []
    done = client.post(
        "/instances/i-1/signal",
        data={"csrf": token, "name": "go", "payload": '{"a": 1}', "confirm": "yes"},
    )
    assert done.status_code == 303 and done.headers["location"].startswith("/instances/i-1?")
    assert backend.actions == [("signal", "i-1", "go", {"a": 1})]
    client.post("/instances/i-1/cancel", data={"csrf": token, "reason": "stop"})
    assert len(backend.actions) == 1
    client.post("/instances/i-1/cancel", data={"csrf": token, "reason": "stop", "confirm": "yes"})
    assert backend.actions[-1] == ("cancel", "i-1", "stop")


def test_off_loopback_every_page_needs_a_login_with_the_token():
    settings = settings_for("0.0.0.0", "s3cret")
    assert settings.require_login and not settings.loopback_only
    client, _ = _client(settings, base="http://console.internal:8080")
    response = client.get("/instances")
    assert response.status_code == 303 and response.headers["location"].startswith("/login")
    assert client.get("/instances", headers={"x-wiggle-fragment": "1"}).status_code == 401
    client.get("/login")
    token = client.cookies["wiggle_csrf"]
    wrong = client.post("/login", data={"csrf": token, "token": "guess"})
    assert wrong.status_code == 401 and "wiggle_session" not in client.cookies
    right = client.post("/login?next=/instances", data={"csrf": token, "token": "s3cret"})
    assert right.status_code == 303 and right.headers["location"] == "/instances"
    cookie = right.headers["set-cookie"].lower()
    assert "wiggle_session=" in cookie and "httponly" in cookie and "samesite=strict" in cookie
    assert client.get("/instances").status_code == 200
    client.post("/logout", data={"csrf": token})
    assert client.get("/instances").status_code == 303


def test_only_a_response_that_shows_the_csrf_token_sets_its_cookie():
    # A browser whose cookies were cleared: the old page's live refresh (refused, no login) and
    # the redirect to the login page must not mint tokens of their own, for one landing after
    # the login page would leave its form's token unmatched (a clean clone's run failed so).
    client, _ = _client(settings_for("0.0.0.0", "s3cret"), base="http://console.internal:8080")
    refused = client.get("/instances", headers={"x-wiggle-fragment": "1"})
    redirect = client.get("/instances")
    assert refused.status_code == 401 and redirect.status_code == 303
    assert "set-cookie" not in refused.headers and "set-cookie" not in redirect.headers
    login = client.get("/login")
    token = client.cookies["wiggle_csrf"]
    assert f'value="{token}"' in login.text
    again = client.get("/instances", headers={"x-wiggle-fragment": "1"})
    assert "set-cookie" not in again.headers and client.cookies["wiggle_csrf"] == token
    assert client.post("/login", data={"csrf": token, "token": "s3cret"}).status_code == 303


def test_a_live_refresh_never_sets_the_csrf_cookie():
    # A browser clearing its cookies one at a time (as a logout by hand, or WebDriver's "delete
    # all cookies", does): between the CSRF cookie's going and the session's, the old page's live
    # refresh still logs in. Its answer must not mint a token of its own, for one landing after
    # the login page would leave that page's form unmatched (a clean clone's busy run failed so:
    # "the form's CSRF token is missing or does not match" at the next login).
    client, _ = _client(settings_for("0.0.0.0", "s3cret"), base="http://console.internal:8080")
    client.get("/login")
    token = client.cookies["wiggle_csrf"]
    assert client.post("/login", data={"csrf": token, "token": "s3cret"}).status_code == 303
    del client.cookies["wiggle_csrf"]
    live = client.get("/instances", headers={"x-wiggle-fragment": "1"})
    assert live.status_code == 200 and "wiggle_session" in client.cookies
    assert "set-cookie" not in live.headers and "wiggle_csrf" not in client.cookies
    page = client.get("/instances")  # a whole page shows the token, and sets its cookie
    assert page.status_code == 200 and client.cookies["wiggle_csrf"] in page.text


def test_the_login_never_redirects_off_the_console():
    client, _ = _client(settings_for("0.0.0.0", "s3cret"), base="http://console.internal")
    client.get("/login")
    token = client.cookies["wiggle_csrf"]
    response = client.post("/login?next=//evil.example/x", data={"csrf": token, "token": "s3cret"})
    assert response.headers["location"] == "/"


def test_off_loopback_without_a_token_the_console_refuses_to_start():
    with pytest.raises(InvalidRequest, match="--token"):
        settings_for("0.0.0.0", None)
    assert not settings_for("127.0.0.1", None).require_login
    assert settings_for("127.0.0.1", "t", require_login=True).require_login


def test_server_errors_become_an_escaped_page_with_a_fitting_status():
    client, _ = _client()
    response = client.get("/instances/%3Cb%3Ex")
    assert response.status_code == 404
    assert "<b>x" not in response.text and "&lt;b&gt;x" in response.text


def test_explanations_token_contexts_and_links_are_shown_when_the_server_sends_them():
    from wiggle.client import Definition
    from wiggle.compiler import load_flow

    flow = load_flow(b"wiggle: 1\nname: gate\nsteps:\n  - task: prep\n  - await: approve\n")
    token = Token(
        "t",
        "approve",
        TokenState.AWAITING,
        1,
        "",
        0,
        0,
        "",
        {"score": 7},
        explanation="waiting for signal `approve` since 12:00",
    )
    detail = Instance(
        "i-1",
        "gate",
        flow.version,
        InstanceStatus.RUNNING,
        {"score": 7},
        "",
        "SERVER",
        "p-9",
        1,
        2,
        tokens=[token],
        input={},
        child_instance_ids=["c-1"],
        current_node="approve",
    )
    client, backend = _client()
    backend.describe = lambda instance_id: detail  # type: ignore[method-assign]
    backend.get_definition = lambda name, version: Definition(  # type: ignore[attr-defined]
        "gate", flow.version, flow.canonical, 1
    )
    page = client.get("/instances/i-1").text
    assert "waiting for signal `approve` since 12:00" in page
    assert "&#34;score&#34;: 7" in page or "&quot;score&quot;: 7" in page or '"score": 7' in page
    assert 'href="/instances/p-9"' in page and 'href="/instances/c-1"' in page
    assert 'class="node lit current" data-node="approve"' in page


def test_a_server_without_the_newer_rpcs_gets_notes_instead_of_errors():
    from wiggle.console import Unsupported

    client, backend = _client()

    def unsupported(*args: Any, **kwargs: Any) -> Any:
        raise Unsupported("the server at x does not support this")

    backend.list_workers = unsupported  # type: ignore[attr-defined]
    backend.list_definitions = unsupported  # type: ignore[attr-defined]
    workers = client.get("/workers")
    assert workers.status_code == 200 and "does not report its workers" in workers.text
    flows = client.get("/flows")
    assert flows.status_code == 200 and "does not list definitions" in flows.text
    assert 'data-flow="greet"' in flows.text  # from the newest instances


def test_require_login_on_loopback_without_a_token_says_what_is_missing():
    """It used to say the console on 127.0.0.1 would be reachable from other machines."""
    with pytest.raises(InvalidRequest) as caught:
        settings_for("127.0.0.1", None, require_login=True)
    message = str(caught.value)
    assert "--require-login" in message and "--token" in message
    assert "reachable from other machines" not in message


PROXY = "10.0.0.7"
PUBLIC = {"x-forwarded-host": "console.example.com", "x-forwarded-proto": "https"}


def _behind_proxy(client_address: str) -> TestClient:
    settings = settings_for("127.0.0.1", "s3cret", trusted_proxies=[PROXY])
    app = create_app(FakeBackend(), settings)  # type: ignore[arg-type]
    # The proxy forwards to the loopback console: the Host it sends is its own upstream.
    return TestClient(
        app, base_url="http://127.0.0.1:8080", follow_redirects=False, client=(client_address, 1)
    )


def test_behind_a_trusted_proxy_pages_answer_for_the_public_host():
    """A loopback console behind a TLS proxy answered 400 to every page (outside Host)."""
    proxied = _behind_proxy(PROXY)
    page = proxied.get("/login", headers={**PUBLIC, "host": "console.example.com"})
    assert page.status_code == 200
    assert page.headers["strict-transport-security"] == "max-age=31536000"
    assert "secure" in page.headers["set-cookie"].lower()
    # The same headers from any other address are not believed: the Host check stands.
    direct = _behind_proxy("10.0.0.99")
    refused = direct.get("/login", headers={**PUBLIC, "host": "console.example.com"})
    assert refused.status_code == 400
    assert "strict-transport-security" not in refused.headers


def test_behind_a_trusted_proxy_posts_from_the_public_origin_are_accepted():
    """A proxy that rewrote Host made every POST a 403 (Origin != Host)."""
    proxied = _behind_proxy(PROXY)
    proxied.get("/login", headers=PUBLIC)
    token = proxied.cookies["wiggle_csrf"]
    # The cookie is Secure (the browser is on HTTPS); the test client talks plain HTTP to the
    # console as the proxy does, so it is sent by hand, as the browser would.
    origin = {**PUBLIC, "origin": "https://console.example.com", "cookie": f"wiggle_csrf={token}"}
    login = proxied.post("/login", data={"csrf": token, "token": "s3cret"}, headers=origin)
    assert login.status_code == 303
    assert "secure" in login.headers["set-cookie"].lower()
    direct = _behind_proxy("127.0.0.1")
    direct.get("/login")
    token = direct.cookies["wiggle_csrf"]
    origin["cookie"] = f"wiggle_csrf={token}"
    refused = direct.post("/login", data={"csrf": token, "token": "s3cret"}, headers=origin)
    assert refused.status_code == 403 and "another origin" in refused.text


def test_a_trusted_proxy_needs_a_token_and_an_ip_address():
    with pytest.raises(InvalidRequest, match="--token"):
        settings_for("127.0.0.1", None, trusted_proxies=["127.0.0.1"])
    with pytest.raises(InvalidRequest, match=r"--trusted-proxy 'proxy\.internal'"):
        settings_for("127.0.0.1", "t", trusted_proxies=["proxy.internal"])
    assert settings_for("127.0.0.1", "t", trusted_proxies=["::1"]).trusted_proxies == {"::1"}


def test_hsts_over_https_only():
    assert "strict-transport-security" not in _client()[0].get("/instances").headers
    https, _ = _client(base="https://127.0.0.1:8443")
    response = https.get("/instances")
    assert response.headers["strict-transport-security"] == "max-age=31536000"


def test_failed_logins_are_limited_per_client_address():
    settings = settings_for("0.0.0.0", "s3cret")
    app = create_app(FakeBackend(), settings)  # type: ignore[arg-type]
    one = TestClient(app, base_url="http://c.internal", follow_redirects=False, client=("a", 1))
    one.get("/login")
    token = one.cookies["wiggle_csrf"]
    for _ in range(10):
        assert one.post("/login", data={"csrf": token, "token": "guess"}).status_code == 401
    blocked = one.post("/login", data={"csrf": token, "token": "s3cret"})
    assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) > 0
    assert "too many failed logins" in blocked.text and "wiggle_session" not in one.cookies
    other = TestClient(app, base_url="http://c.internal", follow_redirects=False, client=("b", 1))
    other.get("/login")
    right = other.post("/login", data={"csrf": other.cookies["wiggle_csrf"], "token": "s3cret"})
    assert right.status_code == 303


def test_the_failed_login_table_is_bounded_and_forgets_with_time():
    from wiggle.console._security import LoginLimiter

    now = [0.0]
    limiter = LoginLimiter(failures=2, window_s=60, table=3, clock=lambda: now[0])
    for client in ("a", "a", "b", "c", "d"):
        limiter.failed(client)
    assert limiter.wait_s("a") == 0.0  # forgotten: the table holds the 3 most recent
    limiter.failed("d")
    assert limiter.wait_s("d") == 60.0
    now[0] = 61.0
    assert limiter.wait_s("d") == 0.0


def test_the_favicon_is_served_without_a_login():
    client, _ = _client(settings_for("0.0.0.0", "s3cret"), base="http://c.internal")
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert 'rel="icon"' in client.get("/login").text


def test_a_trace_url_must_be_an_http_address_naming_the_trace_id():
    """`--trace-url` is drawn as a link on every instance page: a template without
    `{trace_id}`, or of another scheme (javascript:), is refused at the start."""
    good = "http://jaeger:16686/trace/{trace_id}"
    assert settings_for("127.0.0.1", None, trace_url=good).trace_url == good
    with pytest.raises(InvalidRequest, match=r"\{trace_id\}"):
        settings_for("127.0.0.1", None, trace_url="http://jaeger:16686/search")
    with pytest.raises(InvalidRequest, match="http"):
        settings_for("127.0.0.1", None, trace_url="javascript:alert('{trace_id}')")
    with pytest.raises(ValueError, match="http"):
        ConsoleSettings(trace_url="//jaeger/{trace_id}")
