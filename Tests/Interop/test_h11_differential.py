"""Differential test of Parley's HTTP/1.1 request parser against h11 (python-hyper).

Each request in the corpus goes to both parsers. They must agree on accept or reject and, when
both accept, on the body. Parley may be stricter than h11 only where listed in STRICTER, and more
lenient only where listed in LAXER, each with the RFC rule it follows.
"""
import socket

import h11
import pytest

VALID = {
    "get": b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    "get-1.0": b"GET /healthz HTTP/1.0\r\n\r\n",
    "post-length": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    "post-chunked": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    "chunk-extension": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n0\r\n\r\n",
    "chunk-trailer": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Checksum: 1\r\n\r\n",
    "uppercase-hex": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n",
    "te-case": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    "same-length-twice": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
    "ows-around-value": b"GET /healthz HTTP/1.1\r\nHost:   a  \r\nX-A:\t b \t\r\n\r\n",
    "empty-value": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n",
    "obs-text-value": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: caf\xe9\r\n\r\n",
    "query": b"GET /healthz?a=1&b=%20 HTTP/1.1\r\nHost: a\r\n\r\n",
    "absolute-form": b"GET http://a/healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    "zero-length": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
    "many-headers": b"GET /healthz HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(90)) + b"\r\n",
    "leading-crlf": b"\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    "tchar-header": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-!#$%&'*+-.^_`|~: v\r\n\r\n",
}

MALICIOUS = {
    "cl-list": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2\r\n\r\nab",
    "te-xchunked": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n",
    "te-vertical-tab": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n",
    "chunk-size-0x": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    "two-hosts": b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "lowercase-version": b"GET /healthz http/1.1\r\nHost: a\r\n\r\n",
    "cl-and-te": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX",
    "differing-cl": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    "cl-plus": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\nab",
    "cl-negative": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: -2\r\n\r\n",
    "cl-space-inside": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n",
    "te-gzip": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
    "te-chunked-then-identity": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
    "bad-chunk-size": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "chunk-missing-crlf": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhiX\r\n0\r\n\r\n",
    "obs-fold": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n  continued\r\n\r\n",
    "space-before-colon": b"GET /healthz HTTP/1.1\r\nHost: a\r\nContent-Length : 0\r\n\r\n",
    "nul-in-value": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n",
    "cr-in-value": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n",
    "no-host": b"GET /healthz HTTP/1.1\r\n\r\n",
    "bad-version": b"GET /healthz HTTP/1.x\r\nHost: a\r\n\r\n",
    "http-2": b"GET /healthz HTTP/2.0\r\nHost: a\r\n\r\n",
    "double-space": b"GET  /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    "tab-separator": b"GET\t/healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    "space-in-target": b"GET /heal thz HTTP/1.1\r\nHost: a\r\n\r\n",
    "empty-header-name": b"GET /healthz HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n",
    "no-colon": b"GET /healthz HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n",
    "bad-method": b"G@T /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    "bare-lf": b"GET /healthz HTTP/1.1\nHost: a\n\n",
    "bare-cr": b"GET /healthz HTTP/1.1\rHost: a\r\n\r\n",
    "header-too-large": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: " + b"b" * 20000 + b"\r\n\r\n",
    "te-in-http10": b"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "unknown-expect": b"POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx",
    "relative-target": b"GET healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    "del-in-target": b"GET /health\x7fz HTTP/1.1\r\nHost: a\r\n\r\n",
}

# Where Parley rejects and h11 accepts: each follows a MUST or a deliberate hardening rule.
STRICTER = {
    "bare-lf": "RFC 9112 §2.2 lets a server reject a bare LF; accepting it is a smuggling vector behind proxies that do not",
    "te-in-http10": "RFC 9112 §6.1: Transfer-Encoding in a 1.0 request must be treated as faulty",
    "unknown-expect": "RFC 9110 §10.1.1: an unsupported expectation gets 417",
    "relative-target": "RFC 9112 §3.2: the target must be origin-form, absolute-form, authority-form or *",
    "cl-and-te": "RFC 9112 §6.3: both framings at once 'ought to be handled as an error' (request smuggling)",
    "obs-fold": "RFC 9112 §5.2: a server must reject obs-fold with 400 or unfold it; Parley rejects",
    "http-2": "RFC 9110 §15.6.6: an unsupported major version gets 505",
    "header-too-large": "Parley's header section limit is 16 KiB (h11's is larger)",
}

# Where Parley accepts and h11 rejects: only where the RFC asks servers to accept.
LAXER = {
    "leading-crlf": "RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request-line",
}


def h11_verdict(raw):
    """('accept', body) or ('reject', None) as h11 sees the first request."""
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
    connection.receive_data(raw)
    connection.receive_data(b"")  # end of input: an incomplete request is an error
    body = b""
    try:
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return "accept", body
            elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return "reject", None
    except h11.RemoteProtocolError:
        return "reject", None


def parley_verdict(server, raw):
    """('accept', body) or ('reject', status) as parley-server answers the same bytes."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    if not data:
        return "reject", None
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    if status >= 400 and status not in (404, 405):
        return "reject", status
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return "accept", rest[:length]


@pytest.mark.parametrize("name", sorted(VALID) + sorted(MALICIOUS))
def test_parley_agrees_with_h11(server, name):
    raw = VALID.get(name) or MALICIOUS[name]
    h11_result, h11_body = h11_verdict(raw)
    parley_result, detail = parley_verdict(server, raw)
    if parley_result == "accept" and h11_result == "reject":
        assert LAXER.get(name), f"{name}: Parley accepted what h11 rejects"
        return
    if parley_result == "reject" and h11_result == "accept":
        assert STRICTER.get(name), f"{name}: Parley rejected ({detail}) what h11 accepts, with no rule listed"
        return
    if name in VALID:
        assert parley_result == "accept", f"{name}: a valid request was rejected with {detail}"
    else:
        assert parley_result == "reject", f"{name}: a malicious request was accepted"
    if parley_result == "accept" and raw.startswith(b"POST /echo"):
        assert detail == h11_body, f"{name}: the parsers disagree on the body"


def test_smuggled_second_request_is_never_served(server):
    """CL.TE: if either length were used for the other's framing, 'GET /smuggled' would run."""
    raw = (b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
    verdict, status = parley_verdict(server, raw)
    assert verdict == "reject" and status == 400
