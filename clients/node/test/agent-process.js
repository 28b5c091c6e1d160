// Starts a real `intentd serve` on a temporary socket and data dir.
// The binary is $INTENTD_BINARY (ctest sets it), else the newest
// build*/agent/intentd of the repository.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export function findBinary() {
  const env = process.env.INTENTD_BINARY;
  if (env) {
    fs.accessSync(env, fs.constants.X_OK);
    return env;
  }
  const found = fs.readdirSync(REPO)
    .filter((d) => d.startsWith('build'))
    .map((d) => path.join(REPO, d, 'agent', 'intentd'))
    .filter((p) => {
      try {
        fs.accessSync(p, fs.constants.X_OK);
        return true;
      } catch {
        return false;
      }
    })
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  if (found.length === 0) throw new Error('no intentd binary: set INTENTD_BINARY');
  return found[0];
}

function answersPing(socketPath) {
  return new Promise((resolve) => {
    const s = net.createConnection({ path: socketPath });
    let buf = '';
    const done = (ok) => { s.destroy(); resolve(ok); };
    s.setTimeout(1000, () => done(false));
    s.on('error', () => done(false));
    s.on('connect', () => s.write('{"op":"ping","id":0}\n'));
    s.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) done(buf.includes('"ok":true'));
    });
  });
}

export class AgentProcess {
  constructor() {
    this.binary = findBinary();
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'intentd-node-'));
    this.socket = path.join(this.dir, 'intentd.sock');
    this.dataDir = path.join(this.dir, 'data');
    this.config = path.join(this.dir, 'intentd.json');
    fs.writeFileSync(this.config, '{}\n');
    this.proc = null;
    this.log = '';
  }

  async start(timeoutMs = 15000) {
    const env = { ...process.env, IDEMPOTENCY_HMAC_KEY: 'k'.repeat(40) };
    delete env.LISTEN_FDS;
    delete env.NOTIFY_SOCKET;
    this.proc = spawn(this.binary, ['serve', '--socket', this.socket, '--data-dir',
      this.dataDir, '--config', this.config], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stdout.on('data', (d) => { this.log += d; });
    this.proc.stderr.on('data', (d) => { this.log += d; });
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.exited = exited;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.proc.exitCode !== null) throw new Error(`intentd exited: ${this.log}`);
      if (await answersPing(this.socket)) return this;
      await sleep(20);
    }
    throw new Error(`intentd did not answer within ${timeoutMs} ms: ${this.log}`);
  }

  async stop() {
    if (!this.proc) return 0;
    const proc = this.proc;
    this.proc = null;
    if (proc.exitCode !== null) return proc.exitCode;
    proc.kill('SIGTERM');
    const code = await Promise.race([this.exited, sleep(5000).then(() => 'timeout')]);
    if (code === 'timeout') {
      proc.kill('SIGKILL');
      throw new Error('intentd did not exit within 5 s of SIGTERM');
    }
    return code;
  }

  async cleanup() {
    if (this.proc && this.proc.exitCode === null) {
      this.proc.kill('SIGKILL');
      await this.exited;
    }
    this.proc = null;
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

let counter = 0;
const RUN = Math.random().toString(16).slice(2, 8);
export function ref(prefix = 'FAT') {
  counter += 1;
  return `${prefix}-${RUN}-${String(counter).padStart(6, '0')}`;
}

/** A CPF with valid check digits: cpf('111222333') is 111.222.333-96. */
export function cpf(nine, punctuated = true) {
  const d = [...nine].map(Number);
  for (const n of [9, 10]) {
    let s = 0;
    for (let i = 0; i < n; i += 1) s += d[i] * (n + 1 - i);
    const r = s % 11;
    d.push(r < 2 ? 0 : 11 - r);
  }
  const t = d.join('');
  return punctuated ? `${t.slice(0, 3)}.${t.slice(3, 6)}.${t.slice(6, 9)}-${t.slice(9)}` : t;
}

export function pix(intentRef, { valor = '180.00', chave = cpf('111222333') } = {}) {
  return {
    cliente_id: '01J9ZQ3K8V7M2N4P6R8T0W2Y4A', valor, chave_pix_destino: chave,
    referencia_intencao: intentRef,
  };
}

export async function sleepPast(leaseUntilMs) {
  await sleep(Math.max(0, leaseUntilMs - Date.now()) + 150);
}
