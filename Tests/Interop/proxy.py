"""A TCP proxy for tests: the network between a client and the server, cut where a test says."""
import re
import socket
import threading


class CuttingProxy:
    """A TCP proxy in front of the server that cuts the first connection carrying an upload
    (`POST /v1/media`) after `cut` more bytes, as a phone losing its network would — or, with
    `every_whole_upload`, every upload that is not a continuation (`Content-Range`), so only a
    client that resumes gets through. Every byte clients sent is kept so the test can read
    the requests."""

    def __init__(self, server, cut, every_whole_upload=False):
        self.server, self.cut, self.every_whole_upload = server, cut, every_whole_upload
        self.sent = bytearray()
        self.received = bytearray()
        self.lock = threading.Lock()
        self.cut_done = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((self.server.host, self.server.port))
            threading.Thread(target=self.pump_up, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self.pump_down, args=(upstream, client), daemon=True).start()

    def pump_up(self, client, upstream):
        cutting, after, cut_now = False, 0, False
        try:
            while data := client.recv(65536):
                with self.lock:
                    self.sent += data
                    if (self.every_whole_upload or not self.cut_done) and not cutting and b"POST /v1/media" in data:
                        head = data[data.index(b"POST /v1/media"):].split(b"\r\n\r\n", 1)[0].lower()
                        if b"content-range:" not in head:
                            cutting, after = True, len(data) - data.index(b"POST /v1/media")
                    elif cutting:
                        after += len(data)
                    if cutting and after >= self.cut:
                        self.cut_done = cut_now = True
                upstream.sendall(data)
                if cut_now:
                    break
        except OSError:
            pass
        for end in (client, upstream):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def pump_down(self, upstream, client):
        try:
            while data := upstream.recv(65536):
                with self.lock:
                    self.received += data
                client.sendall(data)
        except OSError:
            pass

    def upload_heads(self):
        with self.lock:
            return [head.decode() for head in re.findall(rb"POST /v1/media\?[^\r\n]*\r\n(?:[^\r\n]+\r\n)*", bytes(self.sent))]

    def close(self):
        self.listener.close()
