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
try:
    with open(".idem-lab/state.json") as f:
        state = json.load(f)
except (OSError, ValueError):
    state = {}
port = os.environ.get("PORT") or str(state.get("port") or "8000")
# The workspace's language, as idem-lab start chose it.
NO_ANSWER = {
    "en": "no answer: %s (is the server running on port %s? idem-lab status)",
    "ko": "응답 없음: %s (포트 %s에서 서버가 실행 중인가요? idem-lab status)",
    "zh": "没有响应：%s（端口 %s 上的服务器在运行吗？idem-lab status）",
}
WHY = {
    "en": {"refused": "connection refused", "timeout": "no answer within 10 s", "other": "the connection failed (%s)"},
    "ko": {"refused": "연결이 거부되었습니다", "timeout": "10초 안에 응답이 오지 않았습니다", "other": "연결이 끊겼습니다 (%s)"},
    "zh": {"refused": "连接被拒绝", "timeout": "10 秒内没有响应", "other": "连接中断（%s）"},
}
lang = state.get("lang") if state.get("lang") in NO_ANSWER else "en"
headers = {"Content-Type": "application/json"}
if key is not None:
    headers["Idempotency-Key"] = key
# The words, in the language idem-lab start chose for this workspace (.idem-lab/words.json), else English.
try:
    with open(".idem-lab/words.json", encoding="utf-8") as f:
        WORDS = json.load(f)
except (OSError, ValueError):
    WORDS = {}
def word(key, english):
    return WORDS.get(key) if isinstance(WORDS, dict) and isinstance(WORDS.get(key), str) else english
shown = word("probe.noKey", "(no Idempotency-Key)") if key is None else "Idempotency-Key: " + (key if key else word("probe.emptyKey", "(empty)"))
print("POST /pay  %s  %s" % (shown, body))
try:
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    conn.request("POST", "/pay", body=body.encode("utf-8"), headers=headers)
    res = conn.getresponse()
except OSError as exc:
    if isinstance(exc, ConnectionRefusedError):
        why = WHY[lang]["refused"]
    elif isinstance(exc, TimeoutError):
        why = WHY[lang]["timeout"]
    else:
        why = WHY[lang]["other"] % (exc.__class__.__name__,)
    print(NO_ANSWER[lang] % (why, port))
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
if "\\u" in text:
    # A JSON body whose letters were escaped (Python's json.dumps does so by default):
    # shown with its letters, so an error written in Korean or Chinese reads as written.
    try:
        text = json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        pass
if text:
    print(text)
PY
