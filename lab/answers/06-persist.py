REPLAY_WAIT_S = 5.0


def key_missing(key):
    return key is None or not key.strip()


def same_request(stored_hash, request_hash):
    return stored_hash == request_hash


def stored_answer(row):
    return row["status"], json.loads(row["response"]), {"Idempotency-Replayed": "true"}


def wait_in_flight():
    time.sleep(0.02)


def handle_pay(key, payload):
    if key_missing(key):
        return error(400, "an Idempotency-Key header is required")
    request_hash = fingerprint(payload)
    conn = db()
    try:
        conn.execute(
            "INSERT INTO idem (key, request_hash, status, response, created_at) VALUES (?, ?, NULL, NULL, ?)",
            (key, request_hash, now_iso()),
        )
    except sqlite3.IntegrityError:
        return replay_stored(key, request_hash)
    try:
        charge(payload["user"], payload["amount"])
        conn.execute("BEGIN IMMEDIATE")
        payment = record_payment(key, payload["user"], payload["amount"])
        conn.execute("UPDATE idem SET status = ?, response = ? WHERE key = ?", (201, json.dumps(payment), key))
        conn.execute("COMMIT")
    except Exception:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.execute("DELETE FROM idem WHERE key = ? AND status IS NULL", (key,))
        raise
    return 201, payment, {}


def replay_stored(key, request_hash):
    deadline = time.monotonic() + REPLAY_WAIT_S
    while True:
        row = db().execute("SELECT key, request_hash, status, response FROM idem WHERE key = ?", (key,)).fetchone()
        if row is None:
            return error(409, "the first request with this Idempotency-Key failed; retry it")
        if not same_request(row["request_hash"], request_hash):
            return error(422, "this Idempotency-Key was used with a different request body")
        if row["status"] is not None:
            return stored_answer(row)
        if time.monotonic() >= deadline:
            return error(409, "a request with this Idempotency-Key is still in flight")
        wait_in_flight()
