def handle_pay(key, payload):
    if key is None or not key.strip():
        return error(400, "an Idempotency-Key header is required")
    row = db().execute("SELECT status, response FROM idem WHERE key = ?", (key,)).fetchone()
    if row is not None:
        return row["status"], json.loads(row["response"]), {"Idempotency-Replayed": "true"}
    charge(payload["user"], payload["amount"])
    payment = record_payment(key, payload["user"], payload["amount"])
    db().execute(
        "INSERT INTO idem (key, request_hash, status, response, created_at) VALUES (?, ?, ?, ?, ?)",
        (key, fingerprint(payload), 201, json.dumps(payment), now_iso()),
    )
    return 201, payment, {}
