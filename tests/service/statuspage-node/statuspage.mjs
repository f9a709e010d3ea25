// SPDX-License-Identifier: MIT
// The status page (GET /, doc/status.html) in a real browser: Debian's chromium, headless,
// driven by playwright-core (pinned by this directory's package-lock.json; scripts/bootstrap
// installs both). Prints TAP.
//
// Each case starts $BLOSSOMD_BIN on free 127.0.0.1 ports with a temporary data directory,
// creates a filter over RESP a moment before the page is opened, and checks that the page
// loads with no console error, no failed request and no request leaving the daemon's origin,
// shows the filter and the server, and that the filter's item count on the page follows adds
// made over RESP. With auth_token_file set: 401 without the token, the same checks with it.
// The daemon's history (GET /v1/metrics/history) holds exactly the traffic made before the page
// is opened, and the page's first refresh shows "Operations / s" and draws the charts from it
// (their lines' pixels counted; a screenshot left in meson-logs/statuspage-first-load.png).
// The daemon is stopped by its PID (SIGTERM) and must exit 0.
//
//   node statuspage.mjs                     the test (meson test statuspage)
//   node statuspage.mjs --screenshot FILE   a PNG of the page with a few filters and some
//                                           traffic (doc/status.png), for the README
//
// $CHROMIUM overrides the browser (default /usr/bin/chromium). A missing browser or
// node_modules is a failure ("Bail out!"), not a skip.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

let n = 0;
let failed = 0;

function bail(msg) {
  console.log(`Bail out! ${msg}`);
  process.exit(1);
}

async function tcase(name, fn) {
  n += 1;
  try {
    await fn();
    console.log(`ok ${n} - ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`not ok ${n} - ${name}`);
    for (const line of String(e && e.stack ? e.stack : e).split('\n')) console.log(`#   ${line}`);
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

// A loopback port that was free a moment ago, never one given before here: the kernel may
// hand the same free port out twice in a row, and the daemon's two ports must differ.
const givenPorts = new Set();

async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const { port: p } = s.address();
        s.close(() => resolve(p));
      });
    });
    if (!givenPorts.has(port)) {
      givenPorts.add(port);
      return port;
    }
  }
}

async function waitPort(port, child, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const up = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1');
      c.once('connect', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (up) return;
    if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode} at start`);
    if (Date.now() > end) throw new Error(`port ${port} not accepting after ${ms} ms`);
    await sleep(20);
  }
}

// blossomd on free loopback ports, its own data directory and config; stopped by its PID.
async function startDaemon(token, extra = ['wal_fsync = no']) {
  const bin = process.env.BLOSSOMD_BIN;
  assert(bin, '$BLOSSOMD_BIN is not set (run this through meson test)');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'blossomd-statuspage-'));
  const conf = ['[blossomd]', ...extra];
  if (token) {
    fs.writeFileSync(path.join(tmp, 'token'), `${token}\n`, { mode: 0o600 });
    conf.push(`auth_token_file = ${path.join(tmp, 'token')}`);
  }
  fs.writeFileSync(path.join(tmp, 'blossomd.conf'), `${conf.join('\n')}\n`);
  const port = await freePort();
  const http = await freePort();
  const log = fs.openSync(path.join(tmp, 'log'), 'w');
  const child = spawn(bin, ['-c', path.join(tmp, 'blossomd.conf'), '--bind', '127.0.0.1',
    '--port', String(port), '--http-port', String(http), '--data-dir', path.join(tmp, 'data'),
    '--log-level', 'err'], { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  const exited = new Promise((resolve) => child.once('exit', (code, sig) => resolve({ code, sig })));
  try {
    await waitPort(port, child);
    await waitPort(http, child);
  } catch (e) {
    child.kill('SIGKILL');
    throw new Error(`${e.message}\n${fs.readFileSync(path.join(tmp, 'log'), 'utf8')}`);
  }
  return {
    port,
    http,
    url: `http://127.0.0.1:${http}/`,
    async stop() {
      if (child.exitCode === null) process.kill(child.pid, 'SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10000);
      const { code, sig } = await exited;
      clearTimeout(t);
      const out = fs.readFileSync(path.join(tmp, 'log'), 'utf8');
      fs.rmSync(tmp, { recursive: true, force: true });
      assert(code === 0, `daemon exit ${code} ${sig}: ${out}`);
    },
  };
}

// One RESP reply from buf at i: [value, next index], or null if incomplete.
function parseReply(buf, i = 0) {
  const eol = buf.indexOf('\r\n', i);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[i]);
  const line = buf.toString('utf8', i + 1, eol);
  if (type === '+' || type === '-' || type === ':') {
    const v = type === ':' ? Number(line) : type === '-' ? new Error(line) : line;
    return [v, eol + 2];
  }
  if (type === '$') {
    const len = Number(line);
    if (len < 0) return [null, eol + 2];
    if (buf.length < eol + 2 + len + 2) return null;
    return [buf.toString('utf8', eol + 2, eol + 2 + len), eol + 4 + len];
  }
  if (type === '*') {
    const out = [];
    let at = eol + 2;
    for (let k = 0; k < Number(line); k++) {
      const r = parseReply(buf, at);
      if (!r) return null;
      out.push(r[0]);
      at = r[1];
    }
    return [out, at];
  }
  throw new Error(`bad RESP reply: ${buf.toString('utf8', i)}`);
}

// A RESP connection: await r.cmd('BF.ADD', 'f', 'k') -> the reply (an -ERR rejects).
async function resp(port) {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject); });
  let buf = Buffer.alloc(0);
  const waiting = [];
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const r = waiting.length ? parseReply(buf) : null;
      if (!r) break;
      buf = buf.subarray(r[1]);
      const w = waiting.shift();
      if (r[0] instanceof Error) w.reject(r[0]);
      else w.resolve(r[0]);
    }
  });
  return {
    cmd(...args) {
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        sock.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`);
      });
    },
    close() { sock.destroy(); },
  };
}

// A page of browser, with everything that must not happen kept in problems.
async function openPage(browser, d, headers) {
  const context = await browser.newContext({
    extraHTTPHeaders: headers || {},
    viewport: { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('request', (r) => {
    if (!r.url().startsWith(d.url) && !r.url().startsWith('data:'))
      problems.push(`request off the daemon's origin: ${r.url()}`);
  });
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`${r.status()} for ${r.url()}`); });
  return { context, page, problems };
}

const rowItems = (page, name) =>
  page.locator(`#filters tr[data-name="${name}"] td.items`).textContent({ timeout: 10000 });

async function waitText(fn, want, ms = 10000) {
  const end = Date.now() + ms;
  let got;
  while (Date.now() < end) {
    got = await fn().catch(() => undefined);
    if (got === want) return;
    await sleep(100);
  }
  throw new Error(`expected ${JSON.stringify(want)}, still ${JSON.stringify(got)} after ${ms} ms`);
}

// The filter created over RESP shows up on the page, and its count follows adds.
async function showsFilterAndFollows(browser, d, r, headers) {
  await r.cmd('BF.RESERVE', 'page-test', '0.01', '1000');
  await r.cmd('BF.MADD', 'page-test', 'a', 'b', 'c');
  const { context, page, problems } = await openPage(browser, d, headers);
  try {
    const res = await page.goto(d.url, { waitUntil: 'load' });
    assert(res.status() === 200, `GET / answered ${res.status()}`);
    assert(res.headers()['content-type'] === 'text/html; charset=utf-8',
      `content-type ${res.headers()['content-type']}`);
    await waitText(() => rowItems(page, 'page-test'), '3');
    await waitText(() => page.locator('#ready').textContent(), 'ready');
    await waitText(() => page.locator('#nfilters').textContent(), '1');
    const cells = await page.locator('#filters tr[data-name="page-test"] td').allTextContents();
    assert(cells[1] === 'bloom' && cells[2] === '1000' && cells[6] === '1.00 %' && cells[7] === '1',
      `row ${JSON.stringify(cells)}`);
    // The estimate and the target in one notation: percent, exponent form only below 0.001 %.
    assert(/^\d\.\d\de-\d+ %$/.test(cells[5]), `estimate ${JSON.stringify(cells[5])}`);
    await r.cmd('BF.RESERVE', 'page-tight', '0.001', '1000');
    await r.cmd('BF.RESERVE', 'page-tighter', '0.00001', '1000');
    await waitText(() => page.locator('#filters tr[data-name="page-tight"] td').nth(6).textContent(),
      '0.100 %');
    await waitText(() => page.locator('#filters tr[data-name="page-tighter"] td').nth(6)
      .textContent(), '0.00100 %');
    const keys = Array.from({ length: 250 }, (_, i) => `key-${i}`);
    await r.cmd('BF.MADD', 'page-test', ...keys);
    const card = Number(await r.cmd('BF.CARD', 'page-test'));
    assert(card > 200, `BF.CARD ${card}`);
    await waitText(() => rowItems(page, 'page-test'), String(card));
    const fill = await page.locator('#filters tr[data-name="page-test"] td.fill span').getAttribute('style');
    assert(/width: 2\d\.\d%/.test(fill), `fill bar style ${fill}`);
    // The chart got its points (two samples make a rate) and the page is still clean.
    await waitText(() => page.locator('#ops').textContent().then((t) => (t === '…' ? t : 'set')), 'set');
    assert(!problems.length, problems.join('\n'));
  } finally {
    await context.close();
  }
}

// Pixels of canvas id in the colour of CSS variable v (a series' line), counted in the page.
const linePixels = (page, id, v) => page.evaluate(([cid, cv]) => {
  const c = document.getElementById(cid);
  const hex = getComputedStyle(document.documentElement).getPropertyValue(cv).trim();
  const want = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < px.length; i += 4)
    if (px[i + 3] > 200 && want.every((w, k) => Math.abs(px[i + k] - w) < 24)) n += 1;
  return n;
}, [id, v]);

const sum = (a) => a.reduce((x, y) => x + y, 0);

// GET /v1/metrics/history, parsed.
async function history(d, headers) {
  const res = await fetch(`${d.url}v1/metrics/history`, { headers: headers || {} });
  assert(res.status === 200, `GET /v1/metrics/history answered ${res.status}`);
  assert(res.headers.get('content-type') === 'application/json',
    `content-type ${res.headers.get('content-type')}`);
  return res.json();
}

// Traffic over RESP for three seconds before any page is open: the daemon's history holds it
// exactly (every command and key, once a sample follows the last one), and the page's first
// refresh (one /metrics request) already shows "Operations / s" and draws the RESP line from it.
async function drawsHistoryAtFirstLoad(browser, d, r) {
  let cmds = 0;
  let keys = 0;
  // Idle samples first, so the lines rise from 0 (drawn pixels) rather than start at the
  // traffic's level at the chart's right edge: a daemon slow to start (ASan) had only the
  // traffic's samples, and a line of 14 pixels.
  for (const end = Date.now() + 10000; Date.now() < end; await sleep(200))
    if ((await history(d)).commands.resp.length >= 3) break;
  await r.cmd('BF.RESERVE', 'hist', '0.01', '10000');
  cmds += 1;
  for (let i = 0; i < 30; i++) {
    await r.cmd('BF.MADD', 'hist', ...Array.from({ length: 10 }, (_, k) => `h${i}-${k}`));
    cmds += 1;
    keys += 10;
    await sleep(100);
  }
  let h;
  const end = Date.now() + 10000;
  do {
    h = await history(d);
    if (sum(h.commands.resp) === cmds) break;
    await sleep(200);
  } while (Date.now() < end);
  const n = h.commands.text.length;
  assert(h.interval_seconds === 1, `interval_seconds ${h.interval_seconds}`);
  assert(sum(h.commands.resp) === cmds && sum(h.keys.added) === keys,
    `history holds ${sum(h.commands.resp)} RESP commands and ${sum(h.keys.added)} keys added, ` +
    `not ${cmds} and ${keys}: ${JSON.stringify(h)}`);
  assert(sum(h.commands.text) === 0 && sum(h.commands.http) === 0 && sum(h.keys.checked) === 0,
    `other columns: ${JSON.stringify(h)}`);
  for (const a of [h.commands.resp, h.commands.http, h.keys.added, h.keys.checked])
    assert(a.length === n, `columns of unequal length: ${JSON.stringify(h)}`);
  assert(n >= 3 && n <= 300 && h.commands.resp.filter((v) => v > 0).length >= 2,
    `samples: ${JSON.stringify(h.commands.resp)}`);
  assert(Math.abs(h.end_ms - Date.now()) < 5000, `end_ms ${h.end_ms}, now ${Date.now()}`);

  const { context, page, problems } = await openPage(browser, d, null);
  let metrics = 0;
  page.on('request', (q) => { if (q.url().endsWith('/metrics')) metrics += 1; });
  try {
    await page.goto(d.url, { waitUntil: 'load' });
    await page.waitForFunction(() => /^updated /.test(document.getElementById('updated').textContent),
      null, { timeout: 10000 });
    const ops = await page.locator('#ops').textContent();
    const blue = await linePixels(page, 'chart-ops', '--a');
    const purple = await linePixels(page, 'chart-keys', '--c');
    const shot = path.join(path.dirname(process.env.BLOSSOMD_BIN), '..', 'meson-logs',
      'statuspage-first-load.png');
    await page.locator('main').screenshot({ path: shot });
    console.log(`# the page at its first refresh: ${shot}`);
    assert(metrics === 1, `${metrics} /metrics requests before the checks: not the first refresh`);
    assert(ops !== '…', `"Operations / s" still ${ops} at the first refresh`);
    assert(blue > 20, `the RESP line of the operations chart has ${blue} pixels`);
    assert(purple > 20, `the added-keys line of the keys chart has ${purple} pixels`);
    assert(!problems.length, problems.join('\n'));
  } finally {
    await context.close();
  }
}

async function runTests(chromium) {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    await tcase('without a token: the page shows a filter made over RESP and follows its adds', async () => {
      const d = await startDaemon(null);
      const r = await resp(d.port);
      try {
        await showsFilterAndFollows(browser, d, r, null);
      } finally {
        r.close();
        await d.stop();
      }
    });

    await tcase('the first load draws the charts from the daemon\'s history', async () => {
      const d = await startDaemon(null);
      const r = await resp(d.port);
      try {
        await drawsHistoryAtFirstLoad(browser, d, r);
      } finally {
        r.close();
        await d.stop();
      }
    });

    await tcase('with auth_token_file: 401 without the token, the page works with it', async () => {
      const token = `statuspage-test-token-${'0123456789abcdef'.repeat(2)}`;
      const d = await startDaemon(token);
      const r = await resp(d.port);
      try {
        await r.cmd('AUTH', token);
        const { context, page } = await openPage(browser, d, null);
        try {
          const res = await page.goto(d.url);
          assert(res.status() === 401, `GET / without the token answered ${res.status()}`);
          assert(res.headers()['www-authenticate'] === 'Bearer', 'no WWW-Authenticate: Bearer');
        } finally {
          await context.close();
        }
        await showsFilterAndFollows(browser, d, r, { Authorization: `Bearer ${token}` });
      } finally {
        r.close();
        await d.stop();
      }
    });
  } finally {
    await browser.close();
  }
  console.log(`1..${n}`);
  process.exit(failed ? 1 : 0);
}

// doc/status.png: a few filters with some fill, a minute of varying traffic on the chart.
async function screenshot(chromium, file) {
  const d = await startDaemon(null, []); // the log as shipped: fsync latency on the page
  const r = await resp(d.port);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    const filters = [
      ['sessions', '0.001', '200000', 0.62], ['users', '0.01', '50000', 0.93],
      ['urls:2026-05-01', '0.01', '20000', 0.35], ['urls:2026-05-02', '0.01', '20000', 1.8],
      ['blocklist', '0.0001', '10000', 0.12],
    ];
    for (const [name, p, cap, fill] of filters) {
      await r.cmd('BF.RESERVE', name, p, cap);
      const total = Math.round(Number(cap) * fill);
      for (let i = 0; i < total; i += 1000) {
        const batch = Array.from({ length: Math.min(1000, total - i) }, (_, k) => `${name}-${i + k}`);
        await r.cmd('BF.MADD', name, ...batch);
      }
    }
    await r.cmd('BF.RESERVE', 'counts', '0.01', '5000', 'COUNTING');
    await r.cmd('BF.MADD', 'counts', ...Array.from({ length: 1200 }, (_, i) => `c${i}`));
    await r.cmd('EXPIRE', 'urls:2026-05-01', String(6 * 86400));
    await r.cmd('EXPIRE', 'urls:2026-05-02', String(7 * 86400));
    const { context, page } = await openPage(browser, d, null);
    await page.goto(d.url);
    // Traffic that rises and falls over a minute and a half: RESP checks, HTTP adds; the
    // picture is taken while it goes on.
    const span = 90000;
    const end = Date.now() + span + 5000;
    let k = 0;
    const shot = sleep(span).then(() => page.screenshot({ path: file, fullPage: true }));
    while (Date.now() < end) {
      const phase = Math.sin(((end - Date.now()) / span) * Math.PI * 3) + 1.2;
      const nres = Math.round(40 * phase);
      const keys = Array.from({ length: 20 }, (_, i) => `k${k + i}`);
      k += 20;
      for (let i = 0; i < nres; i++) await r.cmd('BF.MEXISTS', 'sessions', ...keys);
      for (let i = 0; i < Math.round(10 * (2.2 - phase)); i++) {
        await fetch(`${d.url}v1/filters/users/add`, {
          method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ keys: keys.map((x) => `u${x}-${i}`) }),
        });
      }
      await r.cmd('BF.MADD', 'urls:2026-05-02', ...keys.map((x) => `${x}-url`));
      await sleep(100);
    }
    await shot;
    await context.close();
  } finally {
    await browser.close();
    r.close();
    await d.stop();
  }
}

async function main() {
  if (!fs.existsSync(CHROMIUM)) bail(`${CHROMIUM} not found (scripts/bootstrap installs chromium)`);
  let chromium;
  try {
    ({ chromium } = createRequire(path.join(here, 'package.json'))('playwright-core'));
  } catch (e) {
    bail(`playwright-core missing in tests/service/statuspage-node (run scripts/bootstrap): ${e.message}`);
  }
  const at = process.argv.indexOf('--screenshot');
  if (at >= 0) {
    await screenshot(chromium, process.argv[at + 1] || 'status.png');
    return;
  }
  await runTests(chromium);
}

main().catch((e) => bail(String(e && e.stack ? e.stack : e).split('\n').join(' | ')));
