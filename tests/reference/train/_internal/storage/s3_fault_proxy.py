"""An HTTP proxy on loopback in front of the S3-protocol server that answers requests for
chosen keys with an S3 error of its own (403 AccessDenied, 503 SlowDown...) and forwards
everything else, so a store that refuses only the run-folder lease can be tested for real.

    with FaultProxy(upstream="127.0.0.1:PORT", refuse=".run_owner.json",
                    status=403, code="AccessDenied") as proxy:
        proxy.endpoint  # "127.0.0.1:PORT2": point a client there
        proxy.refused   # how many requests were answered with the error
"""

from __future__ import annotations

import http.client
import http.server
import threading

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "upgrade",
               "proxy-connection", "te", "trailer"}


class FaultProxy:
    def __init__(self, upstream: str, refuse: str, status: int, code: str):
        self.upstream, self.refuse, self.status, self.code = upstream, refuse, status, code
        self.refused = 0
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


def _handler(proxy: FaultProxy):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline().strip():  # trailers
                            pass
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _serve(self) -> None:
            body = self._body()
            if proxy.refuse in self.path:
                proxy.refused += 1
                error = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{proxy.code}'
                         "</Code><Message>refused by the test proxy</Message>"
                         "<RequestId>fault-proxy</RequestId></Error>").encode()
                self.send_response(proxy.status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(error)
                return
            host, port = proxy.upstream.rsplit(":", 1)
            upstream = http.client.HTTPConnection(host, int(port), timeout=30)
            try:
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in _HOP_BY_HOP}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                length = str(len(data))
                for key, value in answer.getheaders():
                    if key.lower() == "content-length" and self.command == "HEAD":
                        length = value
                    elif key.lower() not in _HOP_BY_HOP | {"content-length"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                upstream.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

    return Handler
