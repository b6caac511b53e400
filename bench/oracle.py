"""A stdlib oracle for the benchmark (bench/bench.ts): the same amount of work as a check,
done with nothing but Python's standard library, so a check's time can be read as a
ratio to it (how much the grader and its deliberate waits add to what the servers cost).

Usage: python3 oracle.py SERVER_PY STARTS REQUESTS
Starts SERVER_PY STARTS times under the server contract (PORT, IDEM_DB,
IDEM_PROVIDER_LOG, IDEM_CHARGE_MS=50 as the grader's default), each time waits for
GET /health, sends its share of REQUESTS POST /pay requests (every second one a replay
of the one before, four at a time) and stops it with SIGTERM. Prints the wall time in ms.
"""
import concurrent.futures
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, key=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"content-type": "application/json"}
        if key is not None:
            headers["idempotency-key"] = key
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def run(server, starts, requests):
    per_start = [requests // starts + (1 if i < requests % starts else 0) for i in range(starts)]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for n, count in enumerate(per_start):
            port = free_port()
            env = dict(os.environ, PORT=str(port), IDEM_DB=os.path.join(tmp, "lab.db"),
                       IDEM_PROVIDER_LOG=os.path.join(tmp, "provider.log"), IDEM_CHARGE_MS="50",
                       PYTHONDONTWRITEBYTECODE="1")
            proc = subprocess.Popen([sys.executable, server], cwd=os.path.dirname(server), env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                deadline = time.monotonic() + 10
                while True:
                    try:
                        if request(port, "GET", "/health") == 200:
                            break
                    except OSError:
                        pass
                    if time.monotonic() > deadline:
                        raise SystemExit(f"oracle: {server} did not answer GET /health")
                    time.sleep(0.01)
                keys = [f"oracle-{n}-{i // 2}" for i in range(count)]
                body = lambda key: json.dumps({"user": "oracle", "amount": 1000 + hash(key) % 1000})
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    list(pool.map(lambda key: request(port, "POST", "/pay", body(key), key), keys))
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(2)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    return (time.perf_counter() - began) * 1000


if __name__ == "__main__":
    server, starts, requests = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(round(run(server, max(1, starts), requests)))
