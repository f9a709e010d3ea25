// SPDX-License-Identifier: MIT
// node-redis (the `redis` npm package, v4, with @redis/bloom's client.bf.*) against the real
// blossomd. Prints TAP.
//
// Starts $BLOSSOMD_BIN on a free loopback port with its own temporary directory (HTTP off),
// runs the cases, restarts it after SIGKILL to check that every acknowledged key is still
// there, then stops it with SIGTERM and checks that it exits 0. The daemon runs under
// `setpriv --pdeathsig KILL` (when setpriv exists) so it dies with this process whatever
// happens to it. $BLOSSOMD_WRAPPER, if set, is put in front of the binary (split at spaces).
//
// The package comes from tests/compat/node (package.json and package-lock.json), which
// scripts/bootstrap installs with `npm ci`; without it the script bails out (a failure).

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

let n = 0;
let failed = 0;

function ok(name) {
  n += 1;
  console.log(`ok ${n} - ${name}`);
}

function notOk(name, diag = '') {
  n += 1;
  failed += 1;
  console.log(`not ok ${n} - ${name}`);
  for (const line of String(diag).split('\n')) console.log(`#   ${line}`);
}

function bail(msg) {
  console.log(`Bail out! ${msg}`);
  process.exit(1);
}

const show = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x));

function is(name, got, want) {
  if (show(got) === show(want)) ok(name);
  else notOk(name, `expected: ${show(want)}\ngot:      ${show(got)}`);
}

// fn() must reject with an error whose message is exactly message.
async function rejects(name, fn, message) {
  try {
    const got = await fn();
    notOk(name, `no error; returned ${show(got)}`);
  } catch (e) {
    is(name, e.message, message);
  }
}

// A group of cases: an unexpected exception fails one case and the group stops.
async function group(name, fn) {
  try {
    await fn();
  } catch (e) {
    notOk(`${name}: unexpected exception`, e.stack || String(e));
  }
}

// ---- the package ----------------------------------------------------------------------

const require = createRequire(new URL('./node/package.json', import.meta.url));
let redis;
try {
  redis = require('redis');
} catch (e) {
  bail(`the redis package is not installed in tests/compat/node (${e.code || e.message}); ` +
       'run scripts/bootstrap (npm ci --prefix tests/compat/node)');
}
const version = require('redis/package.json').version;
if (!version.startsWith('4.')) bail(`redis ${version} installed; these cases are for v4`);
console.log(`# node ${process.version}, redis ${version}`);

// ---- the daemon -----------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const c = net.connect({ host: '127.0.0.1', port });
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });
}

const hasSetpriv = spawnSync('sh', ['-c', 'command -v setpriv'], { stdio: 'ignore' }).status === 0;

class Daemon {
  constructor() {
    this.bin = process.env.BLOSSOMD_BIN;
    try {
      fs.accessSync(this.bin || '', fs.constants.X_OK);
    } catch {
      bail('BLOSSOMD_BIN is not set to an executable');
    }
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'blossomd-compat.'));
    this.data = path.join(this.dir, 'data');
    fs.mkdirSync(this.data);
    this.logPath = path.join(this.dir, 'daemon.log');
    this.proc = null;
    this.port = null;
  }

  log() {
    try {
      return fs.readFileSync(this.logPath, 'utf8');
    } catch {
      return '';
    }
  }

  // Start on a free port (a few tries); wait up to 20 s until it accepts.
  async start() {
    const wrapper = (process.env.BLOSSOMD_WRAPPER || '').split(' ').filter(Boolean);
    for (let attempt = 1; attempt <= 3; attempt++) {
      this.port = await freePort();
      const argv = [...(hasSetpriv ? ['setpriv', '--pdeathsig', 'KILL', '--'] : []), ...wrapper,
                    this.bin, '--port', String(this.port), '--http-port', '0',
                    '--data-dir', this.data];
      const log = fs.openSync(this.logPath, 'a');
      this.proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', log, log] });
      fs.closeSync(log);
      this.exited = new Promise((resolve) => this.proc.once('exit', (code, sig) =>
        resolve({ code, sig })));
      let gone = false;
      this.exited.then(() => { gone = true; });
      const deadline = Date.now() + 20000;
      while (Date.now() < deadline && !gone) {
        if (await canConnect(this.port)) {
          console.log(`# blossomd pid ${this.proc.pid} on 127.0.0.1:${this.port}`);
          return;
        }
        await sleep(50);
      }
      if (!gone) {
        this.kill();
        bail(`blossomd did not accept connections within 20 s\n${this.log()}`);
      }
      console.log(`# blossomd exited during start-up (try ${attempt}):`);
      for (const line of this.log().split('\n')) console.log(`#   ${line}`);
      this.proc = null;
    }
    bail('blossomd did not start');
  }

  // SIGTERM; the exit code, or null if it had to be killed after 30 s.
  async stop() {
    this.proc.kill('SIGTERM');
    const r = await Promise.race([this.exited, sleep(30000).then(() => null)]);
    if (!r) {
      this.kill();
      return null;
    }
    this.proc = null;
    return r.code;
  }

  // SIGKILL to the daemon itself (under a wrapper, the process it started), and wait.
  async kill9() {
    const m = this.log().match(/ready \(pid (\d+)\)/g);
    const pid = m ? Number(m[m.length - 1].match(/\d+/)[0]) : this.proc.pid;
    process.kill(pid, 'SIGKILL');
    if (pid !== this.proc.pid) this.proc.kill('SIGKILL');
    await this.exited;
    this.proc = null;
  }

  kill() {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGKILL');
    }
    this.proc = null;
  }

  cleanup() {
    this.kill();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// ---- the cases ------------------------------------------------------------------------

async function connect(port) {
  const client = redis.createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false } });
  client.on('error', () => {}); // each command's promise reports its own error
  await client.connect();
  return client;
}

// Every key that was acknowledged, by filter.
const acked = new Map();
function ack(filter, key) {
  if (!acked.has(filter)) acked.set(filter, []);
  acked.get(filter).push(key);
}

async function allAckedPresent(client, when) {
  let missing = 0;
  let total = 0;
  for (const [filter, keys] of acked) {
    for (let i = 0; i < keys.length; i += 500) {
      const res = await client.bf.mExists(filter, keys.slice(i, i + 500));
      missing += res.filter((x) => x !== true).length;
      total += res.length;
    }
  }
  is(`${when}: every acknowledged key is present (${total} keys in ${acked.size} filters)`,
     missing, 0);
}

async function run(port) {
  const client = await connect(port);
  const bf = client.bf;

  await group('connection', async () => {
    is('bloom helpers present (client.bf)', typeof bf?.reserve, 'function');
    is('PING', await client.ping(), 'PONG');
    is('FLUSHALL', await client.flushAll(), 'OK');
    is('DBSIZE after FLUSHALL', await client.dbSize(), 0);
  });

  await group('bf.reserve/add/mAdd/exists/mExists/info/card', async () => {
    is('bf.reserve', await bf.reserve('f', 0.01, 1000), 'OK');
    await rejects('bf.reserve of an existing name', () => bf.reserve('f', 0.01, 1000),
                  'ERR item exists');
    is('bf.reserve with EXPANSION', await bf.reserve('e', 0.001, 100, { EXPANSION: 4 }), 'OK');
    is('bf.reserve NONSCALING', await bf.reserve('ns', 0.01, 2, { NONSCALING: true }), 'OK');
    is('bf.add new', await bf.add('f', 'a'), true);
    is('bf.add again', await bf.add('f', 'a'), false);
    is('bf.mAdd', await bf.mAdd('f', ['a', 'b', 'c']), [false, true, true]);
    for (const k of ['a', 'b', 'c']) ack('f', k);
    is('bf.add a Buffer with NUL and 0xff', await bf.add('f', Buffer.from([0, 255, 0])), true);
    is('bf.exists present', await bf.exists('f', 'b'), true);
    is('bf.exists absent', await bf.exists('f', 'never-added'), false);
    is('bf.exists binary', await bf.exists('f', Buffer.from([0, 255, 0])), true);
    is('bf.exists of a missing filter', await bf.exists('missing', 'x'), false);
    is('bf.mExists', await bf.mExists('f', ['a', 'c', 'never-added']), [true, true, false]);
    is('bf.mExists of a missing filter', await bf.mExists('missing', ['x', 'y']), [false, false]);
    is('bf.info', await bf.info('f'), {
      capacity: 1000, size: (await bf.info('f')).size, numberOfFilters: 1,
      numberOfInsertedItems: 4, expansionRate: 2,
    });
    is('bf.info size is a positive integer', Number.isInteger((await bf.info('f')).size) &&
       (await bf.info('f')).size > 0, true);
    is('bf.info expansion of e', (await bf.info('e')).expansionRate, 4);
    is('bf.card', await bf.card('f'), 4);
    is('bf.card of a missing filter', await bf.card('missing'), 0);
    await rejects('bf.info of a missing filter', () => bf.info('missing'), 'ERR not found');
    is('bf.mAdd into a full non-scaling filter: two acknowledged',
       await bf.mAdd('ns', ['n1', 'n2']), [true, true]);
    await rejects('bf.add into a full non-scaling filter', () => bf.add('ns', 'n3'),
                  'ERR non scaling filter is full');
    is('bf.insert creates with CAPACITY and ERROR',
       await bf.insert('ins', ['x', 'y', 'x'], { CAPACITY: 500, ERROR: 0.001 }),
       [true, true, false]);
    is('bf.insert: the capacity is the filter\'s', (await bf.info('ins')).capacity, 500);
    await rejects('bf.insert NOCREATE on a missing filter',
                  () => bf.insert('nope', ['x'], { NOCREATE: true }), 'ERR not found');
    await rejects('BF.ADD wrong arity', () => client.sendCommand(['BF.ADD', 'f']),
                  'ERR wrong number of arguments for \'bf.add\' command');
    is('TYPE', await client.type('f'), 'MBbloom--');
    is('EXISTS', await client.exists(['f', 'e', 'missing']), 2);
  });

  await group('rename/renamenx', async () => {
    await bf.reserve('rn:a', 0.0001, 1000);
    is('bf.mAdd rn:a', await bf.mAdd('rn:a', ['a1', 'a2', 'a3']), [true, true, true]);
    is('rename', await client.rename('rn:a', 'rn:b'), 'OK');
    is('the old name is gone', await client.exists('rn:a'), 0);
    is('the new name holds the keys', await bf.mExists('rn:b', ['a1', 'a2', 'a3', 'zz']),
       [true, true, true, false]);
    is('the new name\'s info', (await bf.info('rn:b')).capacity, 1000);
    await rejects('rename of a missing key', () => client.rename('rn:a', 'rn:c'),
                  'ERR no such key');
    await rejects('renameNX of a missing key', () => client.renameNX('rn:a', 'rn:c'),
                  'ERR no such key');
    is('rename to its own name', await client.rename('rn:b', 'rn:b'), 'OK');
    is('renameNX to its own name', await client.renameNX('rn:b', 'rn:b'), false);
    is('renameNX to a free name', await client.renameNX('rn:b', 'rn:c'), true);
    await bf.reserve('rn:t', 0.0001, 500);
    await bf.add('rn:t', 't1');
    is('renameNX to a taken name', await client.renameNX('rn:c', 'rn:t'), false);
    is('renameNX refused: both unchanged',
       [await bf.exists('rn:c', 'a1'), await bf.exists('rn:t', 't1'), await bf.exists('rn:t', 'a1')],
       [true, true, false]);
    is('rename over an existing filter', await client.rename('rn:c', 'rn:t'), 'OK');
    is('the target is the renamed filter',
       [await bf.mExists('rn:t', ['a1', 't1']), (await bf.info('rn:t')).capacity,
        await client.exists('rn:c')],
       [[true, false], 1000, 0]);
    await rejects('rename to a name with a space', () => client.rename('rn:t', 'rn x'),
                  'ERR bad filter name');
    // A swap in one pipeline (node-redis sends the commands of one tick together).
    const [added, renamed, fresh, old] = await Promise.all([
      bf.add('rn:new', 'fresh'), client.rename('rn:new', 'rn:t'), bf.exists('rn:t', 'fresh'),
      bf.exists('rn:t', 'a1')]);
    is('a pipelined swap', [added, renamed, fresh, old], [true, 'OK', true, false]);
    ack('rn:t', 'fresh');
    is('KEYS rn:*', (await client.keys('rn:*')).sort(), ['rn:t']);
  });

  await group('expire/ttl/persist', async () => {
    await bf.reserve('ex', 0.0001, 1000);
    is('bf.mAdd ex', await bf.mAdd('ex', ['e1', 'e2']), [true, true]);
    ack('ex', 'e1');
    ack('ex', 'e2');
    is('ttl without a time / of a missing filter', [await client.ttl('ex'), await client.ttl('nope')],
       [-1, -2]);
    is('pTTL without a time / of a missing filter',
       [await client.pTTL('ex'), await client.pTTL('nope')], [-1, -2]);
    is('expireTime without a time / of a missing filter',
       [await client.expireTime('ex'), await client.expireTime('nope')], [-1, -2]);
    is('expire of a missing filter', await client.expire('nope', 100), false);
    is('persist without a time', await client.persist('ex'), false);
    is('expire', await client.expire('ex', 100), true);
    is('ttl', await client.ttl('ex'), 100);
    const pttl = await client.pTTL('ex');
    is('pTTL within the second', pttl > 99000 && pttl <= 100000, true);
    is('expire NX with a time set', await client.expire('ex', 200, 'NX'), false);
    is('expire XX with a time set', await client.expire('ex', 200, 'XX'), true);
    is('ttl after XX', await client.ttl('ex'), 200);
    is('expire GT with an earlier time', await client.expire('ex', 100, 'GT'), false);
    is('expire GT with a later time', await client.expire('ex', 300, 'GT'), true);
    is('expire LT with a later time', await client.expire('ex', 400, 'LT'), false);
    is('expire LT with an earlier time', await client.expire('ex', 50, 'LT'), true);
    is('ttl after LT', await client.ttl('ex'), 50);
    is('pExpire', await client.pExpire('ex', 70000), true);
    is('ttl after pExpire', await client.ttl('ex'), 70);
    const at = Math.floor(Date.now() / 1000) + 5000;
    is('expireAt', await client.expireAt('ex', at), true);
    is('expireTime is the time given', await client.expireTime('ex'), at);
    const pat = Date.now() + 6000123;
    is('pExpireAt', await client.pExpireAt('ex', pat), true);
    is('pExpireTime is the time given', await client.pExpireTime('ex'), pat);
    is('expireAt with a Date', await client.expireAt('ex', new Date((at + 1) * 1000)), true);
    is('expireTime after the Date', await client.expireTime('ex'), at + 1);
    is('persist', await client.persist('ex'), true);
    is('ttl after persist', await client.ttl('ex'), -1);
    await rejects('expire with an unknown option',
                  () => client.sendCommand(['EXPIRE', 'ex', '10', 'SOON']),
                  'ERR Unsupported option SOON');
    await rejects('expire NX and XX', () => client.sendCommand(['EXPIRE', 'ex', '10', 'NX', 'XX']),
                  'ERR NX and XX, GT or LT options at the same time are not compatible');
    await rejects('expire of a word', () => client.sendCommand(['EXPIRE', 'ex', 'soon']),
                  'ERR value is not an integer or out of range');
    await rejects('expire past the largest time',
                  () => client.expire('ex', '9223372036854775807'),
                  'ERR invalid expire time in \'expire\' command');
    is('the filter is unchanged by the errors',
       [await client.ttl('ex'), await bf.mExists('ex', ['e1', 'e2'])], [-1, [true, true]]);
    is('rename keeps the time',
       [await client.expire('ex', 500), await client.rename('ex', 'ex2'),
        await client.ttl('ex2'), await client.ttl('ex')],
       [true, 'OK', 500, -2]);
    await client.rename('ex2', 'ex');
    is('persist again', await client.persist('ex'), true);
    is('expire with a time past drops the filter',
       [await bf.add('past', 'x'), await client.expire('past', -1), await client.exists('past')],
       [true, true, 0]);

    // A short time runs out: the filter and its keys are gone.
    await bf.reserve('short', 0.0001, 1000);
    is('bf.mAdd short', await bf.mAdd('short', ['s1', 's2']), [true, true]);
    const t0 = Date.now();
    is('pExpire 300 ms', await client.pExpire('short', 300), true);
    const there = [await client.exists('short'), await bf.exists('short', 's1')];
    const early = Date.now() - t0 < 250; // else the machine stalled: nothing to say
    is('there before its time', early ? there : [1, true], [1, true]);
    while ((await client.exists('short')) && Date.now() - t0 < 5000) await sleep(10);
    const elapsed = Date.now() - t0;
    is(`gone at its time, not before (${elapsed} ms)`, elapsed >= 298 && elapsed < 2000, true);
    is('ttl of the gone filter', await client.ttl('short'), -2);
    is('bf.exists on the gone filter', await bf.exists('short', 's1'), false);
    is('bf.add makes it anew, without its keys',
       [await bf.add('short', 's3'), await bf.exists('short', 's1'), await client.ttl('short')],
       [true, false, -1]);
    ack('short', 's3');
    is('the other filters are untouched', [await client.ttl('ex'), await bf.card('f')], [-1, 4]);
  });

  await group('many clients, many keys', async () => {
    // Four clients adding at once, each its own keys, through node-redis's pipelining.
    const clients = await Promise.all([0, 1, 2, 3].map(() => connect(port)));
    await bf.reserve('load', 0.001, 20000);
    const results = await Promise.all(clients.map(async (c, ci) => {
      const singles = [];
      for (let i = 0; i < 1000; i++) singles.push(c.bf.add('load', `c${ci}:k${i}`));
      const multi = [];
      for (let i = 0; i < 10; i++) {
        multi.push(c.bf.mAdd('load', Array.from({ length: 50 }, (_, j) => `c${ci}:m${i}:${j}`)));
      }
      return [await Promise.all(singles), await Promise.all(multi)];
    }));
    let acknowledged = 0;
    results.forEach(([singles, multi], ci) => {
      singles.forEach((r, i) => {
        if (r === true) { ack('load', `c${ci}:k${i}`); acknowledged++; }
      });
      multi.forEach((rs, i) => rs.forEach((r, j) => {
        if (r === true) { ack('load', `c${ci}:m${i}:${j}`); acknowledged++; }
      }));
    });
    is('every add of a new key answered true (6000 keys)', acknowledged, 6000);
    is('bf.card counts them', await bf.card('load'), 6000);
    await Promise.all(clients.map((c) => c.quit()));
    await allAckedPresent(client, 'before the restart');
  });

  await group('multi/exec, watch', async () => {
    is('client.multi()...exec(): one reply per command',
       await client.multi().bf.add('tx', 'a').bf.mAdd('tx', ['a', 'b']).bf.exists('tx', 'b')
         .exec(),
       [true, [false, true], true]);
    await rejects('a command refused at queue time: EXECABORT',
                  () => client.multi().bf.add('tx:abort', 'a').addCommand(['BF.ADD', 'tx:abort'])
                    .exec(),
                  'EXECABORT Transaction discarded because of previous errors.');
    is('nothing of the aborted transaction applied', await client.exists('tx:abort'), 0);
    try {
      await client.multi().bf.reserve('tx', 0.01, 10).bf.add('tx', 'z').exec();
      notOk('a run-time error inside EXEC', 'no error');
    } catch (e) {
      is('a run-time error inside EXEC: its error in its place, the other applied',
         [e.constructor.name, e.errorIndexes, e.replies[0].message, e.replies[1]],
         ['MultiErrorReply', [0], 'ERR item exists', true]);
    }
    const other = client.duplicate();
    const watcher = client.duplicate();
    await Promise.all([other.connect(), watcher.connect()]);
    is('WATCH', await watcher.watch('tx:w'), 'OK');
    await other.bf.add('tx:w', 'x');
    await rejects('a WATCHed filter changed: WatchError',
                  () => watcher.multi().bf.add('tx:w', 'y').exec(),
                  'One (or more) of the watched keys has been changed');
    is('the transaction did not run', await client.bf.exists('tx:w', 'y'), false);
    is('WATCH again, no change: it runs',
       [await watcher.watch('tx:w'), await watcher.multi().bf.add('tx:w', 'y').exec()],
       ['OK', [true]]);
    ack('tx:w', 'y');
    await Promise.all([other.quit(), watcher.quit()]);
  });

  await client.quit();
}

async function main() {
  const d = new Daemon();
  const onSignal = () => { d.cleanup(); process.exit(143); };
  process.on('SIGTERM', onSignal);
  try {
    await d.start();
    try {
      await run(d.port);
    } catch (e) {
      notOk('cases ran to the end', e.stack || String(e));
    }
    // SIGKILL: what was acknowledged is in the log.
    await d.kill9();
    await d.start();
    try {
      const client = await connect(d.port);
      await allAckedPresent(client, 'after SIGKILL and a restart');
      is('the short time did not come back', await client.ttl('short'), -1);
      is('the persisted filter has no time', await client.ttl('ex'), -1);
      await client.quit();
    } catch (e) {
      notOk('the restart', e.stack || String(e));
    }
    const code = await d.stop();
    if (code === 0) ok('blossomd exits 0 on SIGTERM');
    else notOk('blossomd exits 0 on SIGTERM', `code ${code} (null: killed after 30 s)\n${d.log()}`);
    console.log(`1..${n}`);
    if (failed) {
      console.log('# daemon log:');
      for (const line of d.log().split('\n')) console.log(`#   ${line}`);
    }
  } finally {
    d.cleanup();
  }
  process.exit(failed ? 1 : 0);
}

main();
