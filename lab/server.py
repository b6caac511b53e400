#!/usr/bin/env python3
"""The idem-lab payment server: POST /pay charges a user, GET /ledger lists the charges.

Python 3 standard library only. Edit handle_pay (and nothing else): as shipped it charges
on every request, so a client that retries after a timeout pays twice.

Environment:
  PORT            port to listen on, on 127.0.0.1 (default 8000)
  IDEM_DB         sqlite file holding the ledger and the idem table (default lab.db)
  IDEM_CHARGE_MS  simulated payment-provider latency inside charge(), in ms (default 50)
  IDEM_PROVIDER_LOG  when set, a file to which charge() appends one JSON line per charge:
                  the payment provider's own statement, which the grader reads
"""

import hashlib
import json
import os
import signal
import sqlite3
import sys
import threading
import time
import traceback
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "8000"))
DB_PATH = os.environ.get("IDEM_DB", "lab.db")
CHARGE_MS = int(os.environ.get("IDEM_CHARGE_MS", "50"))
PROVIDER_LOG = os.environ.get("IDEM_PROVIDER_LOG")

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    payment_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT,
    user            TEXT NOT NULL,
    amount          INTEGER NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS idem (
    key          TEXT PRIMARY KEY,
    request_hash TEXT NOT NULL,
    status       INTEGER,
    response     TEXT,
    created_at   TEXT NOT NULL
);
"""

_local = threading.local()


def db():
    """This thread's connection to IDEM_DB, in autocommit mode.

    Open a transaction yourself when you need one: db().execute("BEGIN IMMEDIATE").
    Waits up to 10 s for another writer's lock instead of failing at once.
    """
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(DB_PATH, timeout=10, isolation_level=None)
        conn.row_factory = sqlite3.Row
        _local.conn = conn
    return conn


def now_iso():
    """The current UTC time as ISO-8601 with milliseconds, e.g. 2026-11-29T07:22:42.123Z."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fingerprint(payload):
    """The request hash of a validated body: sha256 hex of its canonical JSON (sorted keys)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


_provider_lock = threading.Lock()


def charge(user, amount):
    """Ask the payment provider to move the money. Takes IDEM_CHARGE_MS; this is the slow,
    irreversible part that must happen once per payment."""
    time.sleep(CHARGE_MS / 1000)
    if PROVIDER_LOG:
        line = json.dumps({"user": user, "amount": amount, "at": now_iso(), "pid": os.getpid()})
        with _provider_lock, open(PROVIDER_LOG, "a", encoding="utf-8") as statement:
            statement.write(line + "\n")


def record_payment(key, user, amount):
    """Write one ledger row (the key as sent, None when absent) and return the payment as
    the API answers it: {"payment_id", "user", "amount", "charged_at"}."""
    charged_at = now_iso()
    cur = db().execute(
        "INSERT INTO ledger (idempotency_key, user, amount, created_at) VALUES (?, ?, ?, ?)",
        (key, user, amount, charged_at),
    )
    return {"payment_id": cur.lastrowid, "user": user, "amount": amount, "charged_at": charged_at}


def error(status, message):
    """An error answer: (status, {"error": message}, no extra headers)."""
    return status, {"error": message}, {}


# --- handle_pay: the part you edit starts here ---
def handle_pay(key, payload):
    """Handle one POST /pay whose body is already valid.

    key:     the Idempotency-Key header as sent, or None when the request had none
    payload: {"user": non-empty str, "amount": positive int}
    Returns (status, body, headers): an int, a dict sent as JSON, a dict of extra headers.
    """
    charge(payload["user"], payload["amount"])
    payment = record_payment(key, payload["user"], payload["amount"])
    return 201, payment, {}
# --- handle_pay: the part you edit ends here ---


def parse_payment(raw):
    """The body as {"user", "amount"}, or None when it is not that shape."""
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(payload, dict):
        return None
    user, amount = payload.get("user"), payload.get("amount")
    if not isinstance(user, str) or not user.strip():
        return None
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        return None
    return {"user": user, "amount": amount}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "idem-lab"

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.send_json(200, {"ok": True})
        elif self.path == "/ledger":
            rows = db().execute(
                "SELECT payment_id, idempotency_key, user, amount, created_at FROM ledger ORDER BY payment_id"
            ).fetchall()
            self.send_json(200, [dict(row) for row in rows])
        else:
            self.send_json(404, {"error": "no such path"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if self.path != "/pay":
            self.send_json(404, {"error": "no such path"})
            return
        payload = parse_payment(raw)
        if payload is None:
            self.send_json(400, {"error": 'body must be JSON {"user": non-empty string, "amount": positive integer}'})
            return
        try:
            status, body, headers = handle_pay(self.headers.get("Idempotency-Key"), payload)
        except Exception as exc:  # a bug in handle_pay: answer 500 and keep serving
            self.log_message("handle_pay failed: %r", exc)
            # The traceback as lines: log_message would write each newline as \x0a.
            sys.stderr.write(traceback.format_exc())
            status, body, headers = error(500, "internal error: %s" % exc.__class__.__name__)
        self.send_json(status, body, headers)


def main():
    conn = sqlite3.connect(DB_PATH, timeout=10)
    conn.executescript(SCHEMA)
    conn.close()
    ThreadingHTTPServer.request_queue_size = 128  # room for many simultaneous connections
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    server.daemon_threads = True

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("payment server on http://127.0.0.1:%d (db %s, charge %d ms)" % (PORT, DB_PATH, CHARGE_MS), flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
