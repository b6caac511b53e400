def handle_pay(key, payload):
    if key is None or not key.strip():
        return error(400, "an Idempotency-Key header is required")
    request_hash = fingerprint(payload)
    row = db().execute("SELECT request_hash, status, response FROM idem WHERE key = ?", (key,)).fetchone()
    if row is not None:
        if row["request_hash"] != request_hash:
            return error(422, "this Idempotency-Key was used with a different request body")
        return row["status"], json.loads(row["response"]), {"Idempotency-Replayed": "true"}
    charge(payload["user"], payload["amount"])
    payment = record_payment(key, payload["user"], payload["amount"])
    db().execute(
        "INSERT INTO idem (key, request_hash, status, response, created_at) VALUES (?, ?, ?, ?, ?)",
        (key, request_hash, 201, json.dumps(payment), now_iso()),
    )
    return 201, payment, {}
