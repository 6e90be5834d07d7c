// The official conformance suite's authorization-server checks against nib:
//   conformance authorization --url ISSUER --client-id ID --resource MCP_URL --port PORT -o DIR
// The suite prints an authorization URL and waits for a browser to come back to its callback
// server; this script plays the person: it reads that URL from the suite's output, signs in and
// approves in headless Chromium, then waits for the suite to finish and reports every check.
//
// Usage: node conformance.mjs ISSUER MCP_URL CLIENT_ID PASSWORD PORT RESULTS_DIR
// Prints one line per check and "conformance authorization: N passed, M failed"; exits 1 when a
// check failed (a WARNING is reported but does not fail the run).
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { approve, openBrowser } from './browser.mjs';

const [issuer, mcpUrl, clientId, password, port, results] = process.argv.slice(2);
if (!results) {
  console.error('usage: node conformance.mjs ISSUER MCP_URL CLIENT_ID PASSWORD PORT RESULTS_DIR');
  process.exit(2);
}

const args = ['authorization', '--url', issuer, '--client-id', clientId, '--resource', mcpUrl, '--port', port, '-o', results];
console.log(`conformance ${args.join(' ')}`);
const child = spawn('conformance', args, { stdio: ['ignore', 'pipe', 'pipe'] });
let log = '';
let approving;
const browser = await openBrowser();
const onData = (chunk) => {
  const text = chunk.toString();
  log += text;
  // The authorization request is printed on a line of its own.
  const match = !approving && log.match(/^(https?:\/\/\S+\/oauth\/authorize\?\S+)$/m);
  if (match) {
    approving = approve(browser.context, match[1], { user: 'default', password })
      .catch((e) => console.log(`browser: ${e.message}`));
  }
};
child.stdout.on('data', onData);
child.stderr.on('data', onData);
const code = await new Promise((resolve) => child.on('close', resolve));
if (approving) await approving;
await browser.close();

let passed = 0;
let failed = 0;
let other = 0;
const dirs = existsSync(results) ? readdirSync(results, { recursive: true }) : [];
for (const rel of dirs.filter((p) => String(p).endsWith('checks.json')).sort()) {
  for (const c of JSON.parse(readFileSync(join(results, String(rel)), 'utf8'))) {
    const line = `${c.status.padEnd(7)} ${c.id}${c.errorMessage ? ` - ${c.errorMessage}` : ''}`;
    console.log(line);
    if (c.status === 'SUCCESS') passed++;
    else if (c.status === 'FAILURE') failed++;
    else other++;
  }
}
if (passed + failed === 0) {
  console.log('no checks.json was written; the suite said:');
  console.log(log);
  failed = 1;
}
if (code !== 0 && failed === 0) {
  console.log(`the suite exited ${code}; its output:`);
  console.log(log);
  failed = 1;
}
console.log(`conformance authorization: ${passed} passed, ${failed} failed${other ? ` (${other} warnings or skipped)` : ''}`);
process.exit(failed === 0 ? 0 : 1);
