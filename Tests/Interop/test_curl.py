"""Everyday HTTP through curl, a client nobody here wrote."""
import json
import subprocess


def curl(*args):
    result = subprocess.run(["curl", "-sS", "--max-time", "10", *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result


def test_healthz(server):
    body = json.loads(curl(server.url + "/healthz").stdout)
    assert body["status"] == "ok"
    assert body["version"]


def test_keep_alive_reuses_one_connection(server):
    result = curl("-v", server.url + "/healthz", server.url + "/healthz", server.url + "/metrics")
    assert result.stderr.count("Connected to") == 1
    assert "Re-using existing connection" in result.stderr or "Reusing existing connection" in result.stderr


def test_head_has_length_but_no_body(server):
    result = curl("-I", server.url + "/healthz")
    assert result.stdout.startswith("HTTP/1.1 200")
    assert "Content-Length:" in result.stdout


def test_chunked_upload_is_echoed(server, tmp_path):
    payload = tmp_path / "payload.bin"
    payload.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    out = tmp_path / "out.bin"
    curl("-H", "Transfer-Encoding: chunked", "--data-binary", f"@{payload}", "-o", str(out), server.url + "/echo")
    assert out.read_bytes() == payload.read_bytes()


def test_expect_100_continue_upload(server, tmp_path):
    payload = tmp_path / "big.bin"
    payload.write_bytes(b"x" * (3 << 20))
    result = curl("-v", "-H", "Expect: 100-continue", "--data-binary", f"@{payload}", server.url + "/echo", "-o", "/dev/null")
    assert "HTTP/1.1 100 Continue" in result.stderr
    assert "HTTP/1.1 200 OK" in result.stderr


def test_errors_are_json(server):
    result = curl("-i", server.url + "/no/such/path")
    assert result.stdout.startswith("HTTP/1.1 404")
    body = json.loads(result.stdout.split("\n\n", 1)[1])
    assert body["error"]["code"] == "not_found"
    result = curl("-i", "-X", "DELETE", server.url + "/healthz")
    assert result.stdout.startswith("HTTP/1.1 405")
    assert "Allow: GET, HEAD" in result.stdout


def test_body_over_the_limit_is_413(server, tmp_path):
    payload = tmp_path / "huge.bin"
    payload.write_bytes(b"y" * ((16 << 20) + 1))
    result = curl("-i", "--data-binary", f"@{payload}", server.url + "/echo")
    assert result.stdout.startswith("HTTP/1.1 413")
    assert "body_too_large" in result.stdout


def test_help_lists_every_option():
    from conftest import BINARY
    result = subprocess.run([BINARY, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for option in ["--host", "--port", "--data-dir", "--threads", "--enable-echo", "PARLEY_PORT"]:
        assert option in result.stdout
    result = subprocess.run([BINARY, "--port", "nope"], capture_output=True, text=True)
    assert result.returncode == 64
    assert "--port must be a whole number" in result.stderr
