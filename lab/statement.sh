#!/bin/sh
# ./statement.sh: print what the payment provider charged ($IDEM_PROVIDER_LOG or
# provider.log: one JSON line per charge() call), each charge beside the ledger row of the
# same user and amount in $IDEM_DB or lab.db. A charge with no ledger row is money that
# moved for a payment the shop does not know of.
exec python3 - "$@" <<'PY'
import json, os, sqlite3, sys, unicodedata

# The words, in the language idem-lab start chose for this workspace (.idem-lab/words.json), else English.
try:
    with open(".idem-lab/words.json", encoding="utf-8") as f:
        WORDS = json.load(f)
except (OSError, ValueError):
    WORDS = {}
ENGLISH = {
    "cli.statement.none": "no statement yet: {log} does not exist (the server writes it on its first charge)",
    "cli.statement.at": "charged_at", "cli.statement.user": "user", "cli.statement.amount": "amount",
    "cli.statement.pid": "pid", "cli.statement.ledger": "ledger", "cli.statement.noRow": "NO LEDGER ROW",
    "cli.statement.payment": "payment {id}",
    "cli.statement.unpaid": "payment {id} is in the ledger, but the provider never charged it",
    "cli.statement.summary": "{charges} charges, {rows} ledger rows",
}
def say(key, **params):
    text = WORDS.get(key) if isinstance(WORDS, dict) and isinstance(WORDS.get(key), str) else ENGLISH[key]
    for name, value in params.items():
        text = text.replace("{%s}" % name, str(value))
    return text

log = os.environ.get("IDEM_PROVIDER_LOG", "provider.log")
db = os.environ.get("IDEM_DB", "lab.db")
if not os.path.exists(log):
    print(say("cli.statement.none", log=log))
    sys.exit(1)
charges = []
with open(log, encoding="utf-8", errors="replace") as f:
    for line in f:
        try:
            c = json.loads(line)
        except ValueError:
            continue
        if isinstance(c, dict) and isinstance(c.get("user"), str) and isinstance(c.get("amount"), int):
            charges.append(c)
rows = []
if os.path.exists(db):
    try:
        # Read-write, then read-only by pragma: a server killed mid-transaction (kill -9)
        # leaves a hot journal that the next connection must roll back, which a
        # mode=ro connection cannot ("attempt to write a readonly database").
        conn = sqlite3.connect(db, timeout=5)
        conn.execute("PRAGMA query_only = ON")
        rows = conn.execute("SELECT payment_id, user, amount FROM ledger ORDER BY payment_id").fetchall()
    except sqlite3.Error as e:
        # No ledger table yet: nothing was charged. Anything else is a damaged file, said as such.
        if "no such table" not in str(e):
            print("%s cannot be read as the ledger (%s): stop the server, move the file aside or delete it, and start again" % (db, e))
            sys.exit(1)
        rows = []
table = [tuple(say("cli.statement." + k) for k in ("at", "user", "amount", "pid", "ledger"))]
unmatched = list(rows)
for c in charges:
    row = next((r for r in unmatched if r[1] == c["user"] and r[2] == c["amount"]), None)
    if row is not None:
        unmatched.remove(row)
    pid = c.get("pid")
    table.append((str(c.get("at", "")), c["user"], str(c["amount"]), "-" if pid is None else str(pid), say("cli.statement.payment", id=row[0]) if row else say("cli.statement.noRow")))
def width(text):
    # A wide (CJK) character takes two columns in a terminal.
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
widths = [max(width(r[i]) for r in table) for i in range(5)]
for r in table:
    print("  ".join(cell + " " * (widths[i] - width(cell)) if i < 4 else cell for i, cell in enumerate(r)))
for r in unmatched:
    print(say("cli.statement.unpaid", id=r[0]))
print(say("cli.statement.summary", charges=len(charges), rows=len(rows)))
PY
