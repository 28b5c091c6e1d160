// README.md's "Install", run as documented: the package installs into a
// scratch project with npm from this folder and from `npm pack`'s tarball,
// with no registry reachable (it has no dependencies), and the installed
// copy calls a real agent when imported from an ES module and, with a
// dynamic import(), from CommonJS. require() is checked to do what the
// README says on this Node: load it where Node can require ES modules, else
// fail with ERR_REQUIRE_ESM.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { AgentProcess } from './agent-process.js';

const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { version } = JSON.parse(fs.readFileSync(path.join(PACKAGE, 'package.json'), 'utf8'));

// npm with every way to a registry closed: a local folder or tarball with no
// dependencies needs none.
const NPM_ENV = {
  ...process.env,
  npm_config_registry: 'http://127.0.0.1:9/',
  npm_config_offline: 'true',
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
};

function run(cmd, args, cwd) {
  try {
    return execFileSync(cmd, args, {
      cwd, env: NPM_ENV, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000,
    });
  } catch (e) {
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.stderr || e.message}`);
  }
}

// Each program prints one JSON line: where the package was loaded from and
// the agent's protocol.
const ESM = `import { Client } from 'intentd-client';
import { fileURLToPath } from 'node:url';
const client = new Client({ socketPath: process.argv[2] });
const pong = await client.ping();
client.close();
console.log(JSON.stringify({ from: fileURLToPath(import.meta.resolve('intentd-client')), protocol: pong.protocol }));
`;
const CJS = `(async () => {
  const { Client } = await import('intentd-client');
  const client = new Client({ socketPath: process.argv[2] });
  const pong = await client.ping();
  client.close();
  console.log(JSON.stringify({ from: require.resolve('intentd-client'), protocol: pong.protocol }));
})().catch((e) => { console.error(e); process.exit(1); });
`;
const REQUIRE = `try {
  const { Client } = require('intentd-client');
  console.log(JSON.stringify({ loaded: typeof Client === 'function' }));
} catch (e) {
  console.log(JSON.stringify({ loaded: false, code: e.code }));
}
`;

function scratchProject(dir) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"scratch","private":true}\n');
  fs.writeFileSync(path.join(dir, 'esm.mjs'), ESM);
  fs.writeFileSync(path.join(dir, 'cjs.cjs'), CJS);
  fs.writeFileSync(path.join(dir, 'require.cjs'), REQUIRE);
}

describe('installing intentd-client with npm, offline', () => {
  let agent;
  let tmp;
  before(async () => {
    agent = await new AgentProcess().start();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'intentd-npm-'));
  });
  after(async () => {
    await agent.cleanup();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  function checkImports(project) {
    for (const program of ['esm.mjs', 'cjs.cjs']) {
      const out = JSON.parse(run(process.execPath, [program, agent.socket], project).trim());
      assert.equal(out.protocol, 1, program);
      assert.ok(out.from.includes(`${path.sep}node_modules${path.sep}intentd-client${path.sep}`) ||
                fs.realpathSync(out.from).startsWith(PACKAGE), `${program} loaded ${out.from}`);
    }
    const required = JSON.parse(run(process.execPath, ['require.cjs'], project).trim());
    if (process.features.require_module) {
      assert.deepEqual(required, { loaded: true });
    } else {
      assert.deepEqual(required, { loaded: false, code: 'ERR_REQUIRE_ESM' });
    }
  }

  test('npm install /path/to/clients/node', () => {
    const project = path.join(tmp, 'from-folder');
    scratchProject(project);
    run('npm', ['install', PACKAGE], project);
    checkImports(project);
  });

  test('npm pack, then npm install the tarball (a copy of the packed files only)', () => {
    const project = path.join(tmp, 'from-tarball');
    scratchProject(project);
    run('npm', ['pack', '--pack-destination', project, PACKAGE], project);
    const tarball = path.join(project, `intentd-client-${version}.tgz`);
    assert.ok(fs.existsSync(tarball), `npm pack wrote no ${tarball}`);
    run('npm', ['install', tarball], project);
    const installed = path.join(project, 'node_modules', 'intentd-client');
    assert.ok(!fs.lstatSync(installed).isSymbolicLink(), 'a tarball installs a copy');
    checkImports(project);
  });
});
