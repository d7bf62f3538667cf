"""A local web site for the tests that make the server fetch something (link previews)."""
import http.server
import threading


class Site:
    """A local HTTP server whose pages are a dict of path → (status, headers, body); counts hits."""

    def __init__(self, pages=None):
        self.pages = pages or {}
        self.hits = {}
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits[self.path] = site.hits.get(self.path, 0) + 1
                status, headers, body = site.pages.get(self.path, (404, {}, b"not here"))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def total_hits(self):
        return sum(self.hits.values())

    def close(self):
        self.httpd.shutdown()


def html(head, body="<p>Hello</p>"):
    return (200, {"Content-Type": "text/html; charset=utf-8"}, f"<!doctype html><html><head>{head}</head><body>{body}</body></html>".encode())


def redirect(location):
    return 302, {"Location": location}, b""
