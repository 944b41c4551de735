"""One redaction for every output: a property over generated URLs with credentials."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from stormotel.textsafe import REDACTED, html_text, one_line, redact, redact_url, script_json

# What a user may put in a password: RFC 3986 unreserved, sub-delims, ':' and percent-escapes,
# plus a raw '@' (which real users write and URL parsers split at the *last* '@').
_PASSWORD_CHARS = string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@%"
_USER_CHARS = string.ascii_letters + string.digits + "-._~!$&'()*+,;=%"
hosts = st.from_regex(r"[a-z][a-z0-9-]{0,12}(\.[a-z]{2,5}){0,2}", fullmatch=True)
ports = st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}"))
paths = st.from_regex(r"(/[A-Za-z0-9._~-]{0,10}){0,3}", fullmatch=True)
passwords = st.text(_PASSWORD_CHARS, min_size=6, max_size=30)
secret_names = st.sampled_from(["token", "access_token", "api_key", "apiKey", "password",
                                "client_secret", "X-Auth-Token", "sessionid", "auth"])


@given(scheme=st.sampled_from(["http", "https"]), user=st.text(_USER_CHARS, max_size=12),
       password=passwords, host=hosts, port=ports, path=paths,
       prefix=st.sampled_from(["", "GET ", "endpoint ", '{"url": "', "(", "<a href='"]))
def test_userinfo_is_removed_up_to_the_last_at_before_the_host(scheme, user, password, host,
                                                                   port, path, prefix):
    userinfo = f"{user}:{password}"
    url = f"{scheme}://{userinfo}@{host}{port}{path}"
    expected_tail = f"{scheme}://{REDACTED}@{host}{port}{path}"
    out = redact(prefix + url + " failed")
    assert out == prefix + expected_tail + " failed"
    assert redact_url(url) == f"{scheme}://{host}{port}{path}"
    # every output's own wrapper keeps it out too
    assert f"{userinfo}@" not in one_line(url) and password not in html_text(url).replace(
        "&amp;", "&").replace("&#x27;", "'").split(host)[0].replace(REDACTED, "")


_VALUE_CHARS = string.ascii_letters + string.digits + "-_.~%+/"


@given(host=hosts, name=secret_names, value=st.text(_VALUE_CHARS, min_size=8, max_size=40),
       before=st.sampled_from(["", "x=1&"]), after=st.sampled_from(["", "&y=2", "#frag"]))
def test_query_parameters_named_like_secrets_are_replaced(host, name, value, before, after):
    url = f"https://{host}/api/v1/query?{before}{name}={value}{after}"
    out = redact(url)
    assert value not in out.split("?", 1)[1] or value in (before + after)
    assert f"{name}={REDACTED}" in out and out.startswith(f"https://{host}/api/v1/query?")


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=4), hosts,
       st.text(_PASSWORD_CHARS, min_size=8, max_size=20))
def test_script_json_has_no_markup_and_no_credential(extra, host, password):
    data = {"label": "<!--<script></script>&\u2028\u2029", **extra,
            f"https://u:{password}@{host}/": ["http://u:" + password + "@" + host]}
    out = script_json(data)
    assert not set("<>&\u2028\u2029") & set(out)
    assert f"u:{password}@" not in out


def test_known_cases():
    assert redact("http://alice:p@ss@w0rd@prom:9090/api") == f"http://{REDACTED}@prom:9090/api"
    assert "\x00" not in html_text("a\x00b\u202ec") and "\\x00" in html_text("a\x00b\u202ec")
    assert "\\u202e" in html_text("\u202e")


@given(name=st.sampled_from(["Authorization", "X-Auth-Token", "X-Api-Key", "Cookie", "PASSWORD",
                             "x-grafana-token", "client_secret", "Proxy-Authorization"]),
       sep=st.sampled_from([": ", "=", '": "', ":"]),
       scheme=st.sampled_from(["", "Bearer ", "Basic ", "token "]),
       value=st.text(string.ascii_letters + string.digits + "-_.~+/=", min_size=8, max_size=40))
def test_headers_named_like_secrets_are_replaced(name, sep, scheme, value):
    out = redact(f"request failed; {name}{sep}{scheme}{value}\nnext line")
    assert value not in out and REDACTED in out and out.endswith("\nnext line")
