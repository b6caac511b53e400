#!/bin/sh
# ./ledger.sh: print every ledger row (payment_id, idempotency_key, user, amount,
# created_at) from the lab's sqlite file, $IDEM_DB or lab.db. A missing key shows as -.
exec python3 - "$@" <<'PY'
import json, os, sqlite3, sys

# The words, in the language idem-lab start chose for this workspace (.idem-lab/words.json), else English.
try:
    with open(".idem-lab/words.json", encoding="utf-8") as f:
        WORDS = json.load(f)
except (OSError, ValueError):
    WORDS = {}
NONE = WORDS.get("cli.ledger.none") if isinstance(WORDS, dict) and isinstance(WORDS.get("cli.ledger.none"), str) else "no ledger yet: {db} does not exist (start the server first)"

path = os.environ.get("IDEM_DB", "lab.db")
if not os.path.exists(path):
    print(NONE.replace("{db}", path))
    sys.exit(1)
try:
    # Read-write, then read-only by pragma: a server killed mid-transaction (kill -9)
    # leaves a hot journal that the next connection must roll back, which a mode=ro
    # connection cannot ("attempt to write a readonly database").
    conn = sqlite3.connect(path, timeout=5)
    conn.execute("PRAGMA query_only = ON")
    rows = conn.execute(
        "SELECT payment_id, idempotency_key, user, amount, created_at FROM ledger ORDER BY payment_id"
    ).fetchall()
except sqlite3.Error as e:
    print("%s cannot be read as the ledger (%s): stop the server, move the file aside or delete it, and start again" % (path, e))
    sys.exit(1)
table = [("payment_id", "idempotency_key", "user", "amount", "created_at")]
table += [(str(r[0]), "-" if r[1] is None else r[1], r[2], str(r[3]), r[4]) for r in rows]
widths = [max(len(row[i]) for row in table) for i in range(5)]
for row in table:
    print("  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(row)))
PY
