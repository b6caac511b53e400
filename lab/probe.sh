#!/bin/sh
# ./probe.sh [KEY] [BODY]: send one POST /pay to the lab's payment server and print
# the request, the status, the Idempotency-Replayed header when present, and the body.
#   no KEY      the request carries no Idempotency-Key header
#   KEY ''      the header is sent empty
#   BODY        JSON text, default {"user":"u1","amount":1000}
# The port is $PORT, else the one idem-lab recorded in .idem-lab/state.json, else 8000.
exec python3 - "$@" <<'PY'
import http.client, json, os, sys
from http import HTTPStatus

args = sys.argv[1:]
key = args[0] if args else None
body = args[1] if len(args) > 1 else '{"user":"u1","amount":1000}'
port = os.environ.get("PORT")
if not port:
    try:
        with open(".idem-lab/state.json") as f:
            port = str(json.load(f)["port"])
    except (OSError, ValueError, KeyError):
        port = "8000"
headers = {"Content-Type": "application/json"}
if key is not None:
    headers["Idempotency-Key"] = key
shown = "(no Idempotency-Key)" if key is None else "Idempotency-Key: " + (key if key else "(empty)")
print("POST /pay  %s  %s" % (shown, body))
try:
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    conn.request("POST", "/pay", body=body.encode("utf-8"), headers=headers)
    res = conn.getresponse()
except OSError as exc:
    print("no answer: %s (is the server running on port %s? idem-lab status)" % (exc, port))
    sys.exit(1)
try:
    phrase = HTTPStatus(res.status).phrase
except ValueError:
    phrase = ""
print(("HTTP %d %s" % (res.status, phrase)).rstrip())
replayed = res.getheader("Idempotency-Replayed")
if replayed is not None:
    print("Idempotency-Replayed: " + replayed)
text = res.read().decode("utf-8", "replace")
if text:
    print(text)
PY
