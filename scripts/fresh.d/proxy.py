"""An HTTP proxy on a Unix socket, for scripts/fresh: the fresh root's only way out.

`python3 proxy.py SOCKET` serves CONNECT (https: a byte tunnel) and absolute-URI requests
(plain http, as apt sends them: forwarded with the request line in origin form, one request
per connection). It resolves and connects on the host's network; the root cannot.
"""

import socket
import socketserver
import sys
import threading


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def tunnel(client, upstream, first=b""):
    if first:
        upstream.sendall(first)
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        client = self.request
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                return
            head += chunk
            if len(head) > 1 << 20:
                return
        header, _, rest = head.partition(b"\r\n\r\n")
        lines = header.split(b"\r\n")
        method, target, version = lines[0].split(b" ", 2)
        try:
            if method == b"CONNECT":
                host, _, port = target.decode().rpartition(":")
                upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=30)
                upstream.settimeout(None)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                tunnel(client, upstream, rest)
                return
            url = target.decode()
            if not url.startswith("http://"):
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                return
            hostport, _, path = url[len("http://"):].partition("/")
            host, _, port = hostport.partition(":")
            upstream = socket.create_connection((host, int(port or 80)), timeout=30)
            upstream.settimeout(None)
            kept = [l for l in lines[1:] if not l.lower().startswith((b"proxy-connection:", b"connection:"))]
            request = b" ".join([method, b"/" + path.encode(), version])
            first = b"\r\n".join([request] + kept + [b"Connection: close", b"", b""]) + rest
            tunnel(client, upstream, first)
        except OSError as err:
            message = f"proxy: {err}".encode()
            try:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n\r\n%s" % (len(message), message))
            except OSError:
                pass


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


if __name__ == "__main__":
    Server(sys.argv[1], Handler).serve_forever()
