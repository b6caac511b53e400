/**
 * ./probe.sh shows a JSON body's letters as written: a server that escapes them
 * (Python's json.dumps does by default) still reads in Korean or Chinese; a body that is
 * not JSON is printed as it came.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { LAB_DIR } from '../lab/paths.js';
import { tempDir } from './support.js';

/** A one-file server on a free port answering every POST with `body`; resolves to its port and a stop function. */
async function answering(dir: string, body: string): Promise<{ port: number; stop: () => void }> {
  fs.writeFileSync(
    path.join(dir, 'answer.py'),
    [
      'import sys',
      'from http.server import BaseHTTPRequestHandler, HTTPServer',
      `BODY = ${JSON.stringify(body)}.encode("utf-8")`,
      'class H(BaseHTTPRequestHandler):',
      '    def do_POST(self):',
      '        self.send_response(400); self.send_header("Content-Length", str(len(BODY))); self.end_headers(); self.wfile.write(BODY)',
      '    def log_message(self, *a): pass',
      'server = HTTPServer(("127.0.0.1", 0), H)',
      'print(server.server_address[1], flush=True)',
      'server.serve_forever()',
    ].join('\n'),
  );
  const child = spawn('python3', ['answer.py'], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  return { port: Number(line.toString().trim()), stop: () => child.kill('SIGKILL') };
}

test('probe.sh shows an escaped JSON body with its letters, and a body that is not JSON as it came', async () => {
  const tmp = tempDir('idem-lab-probe-');
  fs.copyFileSync(path.join(LAB_DIR, 'probe.sh'), path.join(tmp.dir, 'probe.sh'));
  const cases: Array<[string, RegExp]> = [
    ['{"error": "\\uba71\\ub4f1 \\ud0a4\\uac00 \\ud544\\uc694\\ud569\\ub2c8\\ub2e4", "amount": 1000}', /^\{"error": "멱등 키가 필요합니다", "amount": 1000\}$/m],
    ['{"error":"\\u7f3a\\u5c11"}', /^\{"error": "缺少"\}$/m],
    ['not json \\u00e9', /^not json \\u00e9$/m],
  ];
  try {
    for (const [body, shown] of cases) {
      const server = await answering(tmp.dir, body);
      try {
        const run = await execa('sh', ['probe.sh', 'k1'], { cwd: tmp.dir, reject: false, env: { PORT: String(server.port) } });
        assert.match(run.stdout, /^HTTP 400 Bad Request$/m, run.stdout + run.stderr);
        assert.match(run.stdout, shown, run.stdout);
      } finally {
        server.stop();
      }
    }
  } finally {
    tmp.remove();
  }
});
