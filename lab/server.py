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
  IDEM_DB_MS      simulated database round trip, in ms (default 0): once the server serves,
                  every statement it runs outside a transaction (through db() or any
                  connection of its own) answers this much later, as a database across a
                  network would (setting the database up at start-up is not slowed)
  IDEM_DB_GATE    set by the grader only (with IDEM_PROVIDER_GATE): each such statement is
                  reported to the grader, which lets it run when it chooses (see _db_gate;
                  "ends": a transaction's COMMIT too);
                  IDEM_DB_MS is then not waited for a statement the grader held

The advanced track (ADVANCED.md) adds these; the basic track never sets them:
  IDEM_TTL_S      how long an idempotency record is kept, in s (default 86400): TTL_S
  IDEM_LOCK_S     after how long an in-flight claim counts as abandoned, in s (default 30): LOCK_S
  IDEM_KEYLESS_WINDOW_S  when set, the window in s within which a request without a key is
                  deduplicated by its body (KEYLESS_WINDOW_S, None when unset)
  IDEM_PROVIDER_REPLY_MS  how long the provider's answer takes to come back once the money
                  has moved, in ms (default 0): the window in which a crash loses the answer

Before handle_pay is called, every request is checked (so nothing that can fail after
charge() goes unchecked before it): only POST /pay pays; the body is at most 16 KB (413
beyond, not read); it arrives within 5 s of the headers (408 otherwise); it is JSON
{"user": 1 to 100 characters that encode as UTF-8, "amount": an integer from 1 to 10^12}
(400 otherwise). Every error is answered as {"error": "..."}.
"""

import fcntl
import hashlib
import json
import os
import re
import resource
import socket
import signal
import sqlite3
import _sqlite3
import sys
import threading
import time
import traceback
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "8000"))
DB_PATH = os.environ.get("IDEM_DB", "lab.db")
CHARGE_MS = int(os.environ.get("IDEM_CHARGE_MS", "50"))
PROVIDER_LOG = os.environ.get("IDEM_PROVIDER_LOG")
DB_MS = int(os.environ.get("IDEM_DB_MS", "0"))
TTL_S = float(os.environ.get("IDEM_TTL_S", "86400"))
LOCK_S = float(os.environ.get("IDEM_LOCK_S", "30"))
KEYLESS_WINDOW_S = float(os.environ["IDEM_KEYLESS_WINDOW_S"]) if os.environ.get("IDEM_KEYLESS_WINDOW_S") else None
PROVIDER_REPLY_MS = int(os.environ.get("IDEM_PROVIDER_REPLY_MS", "0"))
PROVIDER_GATE = os.environ.get("IDEM_PROVIDER_GATE")  # the grader's hand on the provider (see _provider_gate)
DB_GATE = bool(PROVIDER_GATE and os.environ.get("IDEM_DB_GATE"))  # the grader's hand on the database (see _db_gate)
DB_GATE_ENDS = DB_GATE and os.environ.get("IDEM_DB_GATE") == "ends"  # a transaction's end reported too
_serving = threading.Event()  # set once the server takes requests: IDEM_DB_MS applies from then on

MAX_BODY_BYTES = 16 * 1024  # a larger body is answered 413 without being read
MAX_AMOUNT = 10**12  # what the ledger's INTEGER and any provider take, with room to spare
MAX_USER_CHARS = 100
BODY_TIMEOUT_S = 5.0  # the whole body must arrive within this time of the headers (else 408)
IDLE_TIMEOUT_S = 10.0  # a connection silent this long (between or inside requests) is closed

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
CREATE TABLE IF NOT EXISTS refunds (
    payment_id  INTEGER PRIMARY KEY,
    refunded_at TEXT NOT NULL
);
"""

_local = threading.local()


class _db_gate:
    """The grader's hand on the database (IDEM_DB_GATE, over the IDEM_PROVIDER_GATE socket;
    see the server contract): a statement run outside a transaction is reported to the
    grader first, {"point": "sql", "sql", "pid", "thread"}, and runs once the grader says
    "go" (it chose when: IDEM_DB_MS is not waited) or "late" (it did not hold it: the
    answer is IDEM_DB_MS late, as without the gate); once it has run, {"point": "ran"}
    follows. So the grader chooses the order of the statements of simultaneous requests.
    With IDEM_DB_GATE=ends, the statement that ends a transaction (COMMIT or END, commit(),
    a `with conn:` block's end) is reported too, with "ends": true (`ends`), so that the
    grader can stop the server between its answer and its COMMIT; the other statements
    inside a transaction (and any before the server serves) run at once.
    Without the variables it does nothing; if the grader goes away, statements run at once."""

    def __init__(self, connection, sql, ends=False):
        self.conn = None
        self.late = True
        if not DB_GATE or not _serving.is_set() or connection.in_transaction != bool(ends) or (ends and not DB_GATE_ENDS):
            return
        self.conn = getattr(_local, "db_gate", None)
        try:
            if self.conn is None:
                self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.conn.connect(PROVIDER_GATE)
                _local.db_gate = self.conn
            report = {"point": "sql", "sql": str(sql)[:200], "pid": os.getpid(), "thread": threading.get_native_id()}
            if ends:
                report["ends"] = True
            self.conn.sendall((json.dumps(report) + "\n").encode("utf-8"))
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = self.conn.recv(16)
                if not chunk:
                    raise OSError("the grader went away")
                answer += chunk
            self.late = answer != b"go\n"
        except OSError:
            self._drop()

    def _drop(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = _local.db_gate = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.conn is not None:
            try:
                self.conn.sendall(b'{"point": "ran"}\n')
            except OSError:
                self._drop()
        return False


_ENDS_TRANSACTION = re.compile(r"\s*(COMMIT|END)\b", re.IGNORECASE)  # a statement that ends a transaction


class _RoundTripCursor(sqlite3.Cursor):
    """A cursor whose statements outside a transaction answer IDEM_DB_MS late.

    The statement runs to its end first (its rows are read, so it holds no lock), then the
    answer waits: only the answer is late, as with a database across a network.
    """

    _rows = None

    def _late(self, late=True):
        if DB_MS > 0 and late and _serving.is_set() and not self.connection.in_transaction:
            self._rows = super().fetchall()
            time.sleep(DB_MS / 1000)
        return self

    def execute(self, sql, parameters=()):
        self._rows = None
        with _db_gate(self.connection, sql, _ENDS_TRANSACTION.match(str(sql)) is not None) as gate:
            super().execute(sql, parameters)
        return self._late(gate.late)

    def executemany(self, sql, seq_of_parameters):
        self._rows = None
        with _db_gate(self.connection, sql) as gate:
            super().executemany(sql, seq_of_parameters)
        return self._late(gate.late)

    def executescript(self, script):
        self._rows = None
        with _db_gate(self.connection, script) as gate:
            super().executescript(script)
        return self._late(gate.late)

    def fetchone(self):
        if self._rows is None:
            return super().fetchone()
        return self._rows.pop(0) if self._rows else None

    def fetchmany(self, size=None):
        if self._rows is None:
            return super().fetchmany(size or self.arraysize)
        rows, self._rows = self._rows[: size or self.arraysize], self._rows[size or self.arraysize :]
        return rows

    def fetchall(self):
        if self._rows is None:
            return super().fetchall()
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self):
        return iter(self.fetchall())


class _RoundTrip(sqlite3.Connection):
    """A connection whose cursors are _RoundTripCursor: every way of running a statement
    (execute, executemany, executescript, a cursor of its own) answers IDEM_DB_MS late."""

    def cursor(self, factory=_RoundTripCursor):
        return super().cursor(factory)

    def execute(self, sql, parameters=()):
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql, seq_of_parameters):
        return self.cursor().executemany(sql, seq_of_parameters)

    def executescript(self, script):
        return self.cursor().executescript(script)

    def _answered(self):
        if DB_MS > 0 and not DB_GATE and _serving.is_set():
            time.sleep(DB_MS / 1000)

    def commit(self):
        with _db_gate(self, "COMMIT", True):
            super().commit()
        self._answered()

    def rollback(self):
        super().rollback()
        self._answered()

    def __exit__(self, *exc):
        # `with conn:` commits or rolls back: that answer is late too.
        if exc[0] is None:
            with _db_gate(self, "COMMIT", True):
                result = super().__exit__(*exc)
        else:
            result = super().__exit__(*exc)
        self._answered()
        return result


_plain_connect = sqlite3.connect


def _connect(*args, factory=_RoundTrip, **kwargs):
    """sqlite3.connect, with the simulated round trip for every connection this server opens."""
    return _plain_connect(*args, factory=factory, **kwargs)


# Every way to open a connection gets the round trip: sqlite3.connect, its twins in
# sqlite3.dbapi2 and the _sqlite3 extension itself, and sqlite3.Connection called directly.
sqlite3.connect = sqlite3.dbapi2.connect = _sqlite3.connect = _connect
sqlite3.Connection = sqlite3.dbapi2.Connection = _sqlite3.Connection = _RoundTrip


def db():
    """This thread's connection to IDEM_DB, in autocommit mode.

    Open a transaction yourself when you need one: db().execute("BEGIN IMMEDIATE").
    Waits up to 10 s for another writer's lock instead of failing at once.
    """
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(DB_PATH, timeout=10, isolation_level=None, factory=_RoundTrip)
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


class _provider_gate:
    """The grader's hand on the provider (IDEM_PROVIDER_GATE, a Unix socket; see the server
    contract). charge() reports its start and waits for the word "go" before any money
    moves, then reports that the money moved and waits again before it returns: the
    grader may hold a charge there, or stop the server while it is held. Without the
    variable (your own runs) it does nothing."""

    def __init__(self, user, amount, key):
        self.conn = None
        if not PROVIDER_GATE:
            return
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.conn.connect(PROVIDER_GATE)
        report = {"point": "start", "user": user, "amount": amount, "pid": os.getpid()}
        if key is not None:
            report["key"] = key
        self._ask(report)

    def _ask(self, report):
        self.conn.sendall((json.dumps(report) + "\n").encode("utf-8"))
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = self.conn.recv(16)
            if not chunk:  # the grader went away: go on
                return
            answer += chunk

    def moved(self):
        if self.conn is not None:
            self._ask({"point": "moved"})

    def close(self):
        if self.conn is not None:
            self.conn.close()


def charge(user, amount, key=None):
    """Ask the payment provider to move the money. Takes IDEM_CHARGE_MS; this is the slow,
    irreversible part that must happen once per payment.

    key: the provider's own idempotency key, as Stripe's API takes one (None: none). A
    charge() with a key the provider's statement already holds moves no money and returns
    that first charge. Returns the charge: {"user", "amount", "at", "pid"} (and "key").
    Raises ValueError when the key was used for another user or amount.
    """
    gate = _provider_gate(user, amount, key)
    try:
        done, moved = _move_money(user, amount, key)
        gate.moved()
    finally:
        gate.close()
    if moved:
        time.sleep(PROVIDER_REPLY_MS / 1000)  # the provider's answer on its way back
    return done


def _move_money(user, amount, key):
    """The provider's side of charge(): IDEM_CHARGE_MS, then one line on its statement (none
    for a key it already holds). Returns (the charge, whether money moved now)."""
    time.sleep(CHARGE_MS / 1000)
    done = {"user": user, "amount": amount, "at": now_iso(), "pid": os.getpid()}
    if key is not None:
        done["key"] = key
    if not PROVIDER_LOG:
        return done, True
    with _provider_lock, open(PROVIDER_LOG, "a+", encoding="utf-8") as statement:
        fcntl.flock(statement, fcntl.LOCK_EX)  # one provider, whichever process calls it
        if key is not None:
            statement.seek(0)
            for line in statement:
                try:
                    earlier = json.loads(line)
                except ValueError:
                    continue
                if isinstance(earlier, dict) and earlier.get("key") == key:
                    if earlier.get("user") != user or earlier.get("amount") != amount:
                        raise ValueError("the provider refused: this key was used for another charge")
                    return earlier, False
        statement.write(json.dumps(done) + "\n")
        statement.flush()
    return done, True


def record_payment(key, user, amount):
    """Write one ledger row (the key as sent, None when absent) and return the payment as
    the API answers it: {"payment_id", "user", "amount", "charged_at"}."""
    charged_at = now_iso()
    cur = db().execute(
        "INSERT INTO ledger (idempotency_key, user, amount, created_at) VALUES (?, ?, ?, ?)",
        (key, user, amount, charged_at),
    )
    return {"payment_id": cur.lastrowid, "user": user, "amount": amount, "charged_at": charged_at}


def payment_link(payment_id):
    """Where a payment's current state is served: GET /payments/{id} (advanced track)."""
    return "/payments/%d" % payment_id


def payment_state(payment_id):
    """(200, the payment as it is now, {}) or a 404 error: {"payment_id", "user", "amount",
    "charged_at", "status": "charged" or "refunded", and "refunded_at" once refunded}."""
    row = db().execute(
        "SELECT l.payment_id, l.user, l.amount, l.created_at, r.refunded_at FROM ledger l"
        " LEFT JOIN refunds r ON r.payment_id = l.payment_id WHERE l.payment_id = ?",
        (payment_id,),
    ).fetchone()
    if row is None:
        return error(404, "no payment %d" % payment_id)
    state = {"payment_id": row["payment_id"], "user": row["user"], "amount": row["amount"], "charged_at": row["created_at"]}
    state["status"] = "refunded" if row["refunded_at"] else "charged"
    if row["refunded_at"]:
        state["refunded_at"] = row["refunded_at"]
    return 200, state, {}


def refund(payment_id):
    """POST /payments/{id}/refund: marks the payment refunded (once: a second refund changes
    nothing) and answers its state as payment_state does. The ledger row is never changed."""
    if payment_state(payment_id)[0] != 200:
        return error(404, "no payment %d" % payment_id)
    db().execute("INSERT OR IGNORE INTO refunds (payment_id, refunded_at) VALUES (?, ?)", (payment_id, now_iso()))
    return payment_state(payment_id)


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


def payment_problem(raw):
    """(payload, None) for a valid body, else (None, what is wrong with it as one sentence).

    Valid: JSON {"user": a non-empty string of at most 100 characters that encodes as UTF-8,
    "amount": an integer from 1 to 10^12, not a boolean}; other fields are ignored.
    """
    shape = 'body must be JSON {"user": non-empty string, "amount": positive integer}'
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, shape
    if not isinstance(payload, dict):
        return None, shape
    user, amount = payload.get("user"), payload.get("amount")
    if not isinstance(user, str) or not user.strip():
        return None, shape
    if len(user) > MAX_USER_CHARS:
        return None, "user must be at most %d characters" % MAX_USER_CHARS
    try:
        user.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, e.g. from a JSON \ud800 escape
        return None, "user must be text that encodes as UTF-8 (no lone surrogates)"
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        return None, shape
    if amount > MAX_AMOUNT:
        return None, "amount must be an integer from 1 to %d" % MAX_AMOUNT
    return {"user": user, "amount": amount}, None


def parse_payment(raw):
    """The body as {"user", "amount"}, or None when it is not that shape (see payment_problem)."""
    return payment_problem(raw)[0]


PAYMENT_PATH = re.compile(r"/payments/([1-9][0-9]{0,17})")  # GET: a payment's current state
REFUND_PATH = re.compile(r"/payments/([1-9][0-9]{0,17})/refund")  # POST: refund it


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "idem-lab"
    timeout = IDLE_TIMEOUT_S  # per socket operation: a silent client cannot hold a thread for ever

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status, message):
        """Answers an error and closes the connection: what is left of the request is not read."""
        self.close_connection = True
        self.send_json(status, {"error": message})

    def read_body(self):
        """The request body (b"" when there is none), or None after answering 400/408/411/413.

        Read in full or not at all, so the next request on the connection starts where it
        should; the whole body must arrive within BODY_TIMEOUT_S.
        """
        if self.headers.get("Transfer-Encoding") is not None:
            self.refuse(411, "send the body with a Content-Length header (chunked bodies are not accepted)")
            return None
        lengths = set(value.strip() for value in self.headers.get_all("Content-Length") or [])
        if not lengths:
            return b""
        text = lengths.pop()
        if lengths or not text.isdigit() or not text.isascii():
            self.refuse(400, "Content-Length must be one whole number of bytes")
            return None
        length = int(text)
        if length > MAX_BODY_BYTES:
            self.refuse(413, "the body must be at most %d bytes" % MAX_BODY_BYTES)
            return None
        chunks, got = [], 0
        deadline = time.monotonic() + BODY_TIMEOUT_S
        try:
            while got < length:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.connection.settimeout(left)
                chunk = self.rfile.read1(length - got)
                if not chunk:  # the client closed its side before sending the whole body
                    self.close_connection = True
                    return None
                chunks.append(chunk)
                got += len(chunk)
        except (TimeoutError, socket.timeout):
            self.refuse(408, "the body did not arrive: Content-Length said %d bytes, %d came within %g s" % (length, got, BODY_TIMEOUT_S))
            return None
        finally:
            self.connection.settimeout(self.timeout)
        return b"".join(chunks)

    def do_GET(self):
        if self.read_body() is None:  # a body on a GET is read and ignored: it never pays
            return
        if self.path == "/health":
            self.send_json(200, {"ok": True})
        elif PAYMENT_PATH.fullmatch(self.path):
            self.send_json(*payment_state(int(PAYMENT_PATH.fullmatch(self.path).group(1))))
        elif self.path == "/ledger":
            rows = db().execute(
                "SELECT payment_id, idempotency_key, user, amount, created_at FROM ledger ORDER BY payment_id"
            ).fetchall()
            self.send_json(200, [dict(row) for row in rows])
        else:
            self.send_json(404, {"error": "no such path"})

    def do_POST(self):
        raw = self.read_body()
        if raw is None:
            return
        if REFUND_PATH.fullmatch(self.path):
            self.send_json(*refund(int(REFUND_PATH.fullmatch(self.path).group(1))))
            return
        if self.path != "/pay":
            self.send_json(404, {"error": "no such path"})
            return
        payload, problem = payment_problem(raw)
        if payload is None:
            self.send_json(400, {"error": problem})
            return
        try:
            status, body, headers = handle_pay(self.headers.get("Idempotency-Key"), payload)
        except Exception as exc:  # a bug in handle_pay: answer 500 and keep serving
            self.log_message("handle_pay failed: %r", exc)
            sys.stderr.write(traceback.format_exc())  # as lines: log_message would escape the newlines
            status, body, headers = error(500, "internal error: %s" % exc.__class__.__name__)
        self.send_json(status, body, headers)

    def not_allowed(self):
        if self.read_body() is None:
            return
        self.send_json(405, {"error": "only GET /health, GET /ledger, GET /payments/{id}, POST /pay and POST /payments/{id}/refund are served"})

    do_PUT = do_PATCH = do_DELETE = do_OPTIONS = not_allowed


class Server(ThreadingHTTPServer):
    """A thread per connection; a deep listen backlog so a burst of connections waits to be
    accepted instead of being refused."""

    request_queue_size = 1024
    daemon_threads = True


def main():
    conn = sqlite3.connect(DB_PATH, timeout=10)
    conn.executescript(SCHEMA)
    conn.close()
    # One file descriptor per connection: room for a few thousand, as far as the hard limit allows.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(8192, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    server = Server(("127.0.0.1", PORT), Handler)

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("payment server on http://127.0.0.1:%d (db %s, charge %d ms)" % (PORT, DB_PATH, CHARGE_MS), flush=True)
    _serving.set()
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
