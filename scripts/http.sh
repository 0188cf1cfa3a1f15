#!/usr/bin/env bash
# http.sh - sourced by the serve benchmark scripts: one HTTP call without a client library.

# GET URL, or POST the JSON file BODY to it; prints the response's body whatever its status. curl where
# the machine has it, else Python's urllib (the GPU machine has python3 and may lack curl).
http() {
    if command -v curl >/dev/null; then
        if [ -n "${2:-}" ]; then curl -s -H 'Content-Type: application/json' --data-binary @"$2" "$1"; else curl -s "$1"; fi
    else
        python3 - "$@" <<'PY'
import sys, urllib.error, urllib.request
data = open(sys.argv[2], "rb").read() if len(sys.argv) > 2 else None
req = urllib.request.Request(sys.argv[1], data=data, headers={"Content-Type": "application/json"})
try:
    body = urllib.request.urlopen(req, timeout=600).read()
except urllib.error.HTTPError as e:
    body = e.read()
sys.stdout.buffer.write(body)
PY
    fi
}
