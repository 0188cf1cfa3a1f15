#!/usr/bin/env python3
"""fake-hub.py - a loopback stand-in for the Hugging Face hub, for tests/test-download.c.

Standard library only. Serves one repository (--repo) from the flat directory --root:
  GET /api/models/REPO/revision/REV[?blobs=true]  listing JSON ("siblings", with "size" and
                                                   "lfs": {"sha256", "size"} for *.safetensors)
  GET /REPO/resolve/REV/FILE                       302 to /blobs/FILE (the hub redirects to its CDN)
  GET /blobs/FILE                                  the bytes, honouring "Range: bytes=N-" with 206
Anything else is 404. Modes (--mode): normal; drop (the first /blobs/ request for a file over
64 KiB sends the full Content-Length, half the bytes, then closes the connection; once);
badsha (the listing's lfs.sha256 is wrong for files over 64 KiB); badsize (the listing's sizes of
files over 64 KiB are 10 bytes too large); norange (Range is ignored: always 200 and the whole file,
as some servers do). Every request is appended to --log as
"PATH range=VALUE". Binds 127.0.0.1 port 0 and writes the port to --port-file. Stops by itself
after --lifetime seconds (the test also kills it).
Not a real hub: no auth, no revisions, no nested paths.
"""
import argparse
import hashlib
import json
import os
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = None
dropped = False
lock = threading.Lock()


def listing():
    sib = []
    for name in sorted(os.listdir(args.root)):
        path = os.path.join(args.root, name)
        size = os.path.getsize(path)
        entry = {"rfilename": name, "size": size}
        if name.endswith(".safetensors"):
            with open(path, "rb") as f:
                sha = hashlib.sha256(f.read()).hexdigest()
            if args.mode == "badsha" and size > 65536:
                sha = hashlib.sha256(b"not the file").hexdigest()
            if args.mode == "badsize" and size > 65536:
                size += 10
                entry["size"] = size
            entry["lfs"] = {"sha256": sha, "size": size}
        sib.append(entry)
    return json.dumps({"id": args.repo, "sha": "0" * 40, "siblings": sib}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def send_bytes(self, code, body, ctype="application/octet-stream", extra=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        global dropped
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        rng = self.headers.get("Range")
        with lock, open(args.log, "a") as log:
            log.write("%s range=%s\n" % (path, rng or "-"))
        api = "/api/models/%s/revision/" % args.repo
        res = "/%s/resolve/" % args.repo
        if path.startswith(api):
            return self.send_bytes(200, listing(), "application/json")
        if path.startswith(res):
            rest = path[len(res):].split("/", 1)
            if len(rest) == 2 and os.path.isfile(os.path.join(args.root, rest[1])):
                loc = "/blobs/" + urllib.parse.quote(rest[1])
                return self.send_bytes(302, b"redirecting", "text/plain", {"Location": loc})
        if path.startswith("/blobs/"):
            name = path[len("/blobs/"):]
            full = os.path.join(args.root, name)
            if "/" not in name and os.path.isfile(full):
                with open(full, "rb") as f:
                    data = f.read()
                start = 0
                if rng and rng.startswith("bytes=") and rng.endswith("-") and args.mode != "norange":
                    start = int(rng[6:-1])
                    if start >= len(data):
                        return self.send_bytes(416, b"range not satisfiable", "text/plain")
                body = data[start:]
                with lock:
                    drop = args.mode == "drop" and not dropped and len(data) > 65536
                    if drop:
                        dropped = True
                if drop:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if start > 0:
                    extra = {"Content-Range": "bytes %d-%d/%d" % (start, len(data) - 1, len(data))}
                    return self.send_bytes(206, body, extra=extra)
                return self.send_bytes(200, body)
        self.send_bytes(404, b'{"error":"Repository Not Found"}', "application/json")


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--mode", default="normal", choices=["normal", "drop", "badsha", "badsize", "norange"])
    p.add_argument("--log", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--lifetime", type=float, default=60.0)
    args = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)  # the test never reads a half-written port
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    time.sleep(args.lifetime)


if __name__ == "__main__":
    main()
