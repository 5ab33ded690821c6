"""``kube.noproxy``: the proxy decisions of Go's ``golang.org/x/net/http/httpproxy``, which client-go makes.

The cases follow that package's ``useProxy`` and ``config.init``: CIDRs, addresses, domains with and without a leading
dot or ``*.``, ports, ``*``, and loopback always direct.
"""

from __future__ import annotations

import pytest

from webserver_operator.kube.noproxy import proxy_for, uses_proxy


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "expected"),
    [
        # CIDRs, the case Python's proxy_bypass cannot express.
        ("10.96.0.1", "443", "10.0.0.0/8", False),
        ("10.96.0.1", "443", "10.96.0.0/12,192.168.0.0/16", False),
        ("11.0.0.1", "443", "10.0.0.0/8", True),
        ("10.96.0.1", "443", "10.1.2.3/8", False),  # host bits set, as Go's ParseCIDR allows
        ("fd00::1", "443", "fd00::/8", False),
        ("fe00::1", "443", "fd00::/8", True),
        ("10.96.0.1", "443", "10.0.0.0/33", True),  # not a CIDR: matches nothing
        ("10.96.0.1", "443", "::/0", True),  # an IPv6 network never holds an IPv4 address
        # Addresses, with or without a port.
        ("10.96.0.1", "443", "10.96.0.1", False),
        ("10.96.0.1", "443", "10.96.0.1:6443", True),
        ("10.96.0.1", "6443", "10.96.0.1:6443", False),
        ("fd00::1", "443", "[fd00::1]:443", False),
        ("fd00::1", "443", "fd00::1", False),
        # Domains: a name covers itself and its subdomains, a leading dot or "*." only the subdomains.
        ("api.example.com", "443", "example.com", False),
        ("example.com", "443", "example.com", False),
        ("notexample.com", "443", "example.com", True),
        ("api.example.com", "443", ".example.com", False),
        ("example.com", "443", ".example.com", True),
        ("a.example.com", "443", "*.example.com", False),
        ("example.com", "443", "*.example.com", True),
        ("api.example.com", "443", " EXAMPLE.COM ", False),  # entries are trimmed and lower-cased
        ("api.example.com", "443", "example.com:6443", True),
        ("api.example.com", "6443", "example.com:6443", False),
        ("kubernetes.default.svc", "443", ".svc,.cluster.local", False),
        # Everything, nothing, and what is never proxied.
        ("api.example.com", "443", "*", False),
        ("api.example.com", "443", "", True),
        ("api.example.com", "443", " , ,:80", True),
        ("localhost", "443", "", False),
        ("127.0.0.1", "6443", "", False),
        ("127.1.2.3", "6443", "", False),
        ("::1", "6443", "", False),
        ("::ffff:127.0.0.1", "6443", "", False),
        ("::ffff:10.96.0.1", "443", "10.0.0.0/8", False),
    ],
)
def test_no_proxy_entries_decide_as_go_does(host: str, port: str, no_proxy: str, expected: bool) -> None:
    assert uses_proxy(host, port, no_proxy) is expected


@pytest.mark.parametrize(
    ("url", "environ", "expected"),
    [
        ("https://10.96.0.1", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://10.96.0.1", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "10.96.0.1:443"}, None),  # default port
        ("https://10.96.0.1", {"https_proxy": "http://p:3128", "no_proxy": "10.0.0.0/16"}, "http://p:3128"),
        ("https://api.example", {"HTTPS_PROXY": "", "https_proxy": "http://q:3128"}, "http://q:3128"),
        ("https://api.example", {"HTTPS_PROXY": "http://p:3128", "https_proxy": "http://q:3128"}, "http://p:3128"),
        ("https://api.example", {"HTTP_PROXY": "http://p:3128"}, None),  # https asks HTTPS_PROXY only
        ("http://api.example", {"HTTP_PROXY": "http://p:3128"}, "http://p:3128"),
        ("http://api.example", {"HTTP_PROXY": "http://p:3128", "REQUEST_METHOD": "GET"}, None),  # CGI
        ("https://api.example", {"NO_PROXY": "*"}, None),
    ],
)
def test_the_proxy_comes_from_the_environment_as_go_reads_it(
    url: str, environ: dict[str, str], expected: str | None
) -> None:
    assert proxy_for(url, environ) == expected
