// The owner's web app (/app) in headless Chromium (Debian's, driven by playwright-core), as a
// person uses it: sign in, the pages, a page's task ticked with the keyboard alone, search,
// a token created and revoked, an OAuth connection revoked with the keyboard alone, the trash,
// sign out everywhere. Run by tests/integration/browser.rs against `nib serve` and against the
// Lambda functions; that test checks the results over MCP (the task, the token, the grant).
//
// Usage: node webapp.cjs walk BASE_URL USER PASSWORD TASK_PAGE_ID TASK_ID TRASHED_PAGE_ID [SCREENSHOT_DIR]
//   Prints one JSON line: {"token": "nib_live_..."} (the token it created, then revoked).
// Usage: node webapp.cjs upload BASE_URL USER PASSWORD FILE... [--shots DIR]
//   Drops the files on the upload page, waits for each one's result, prints one JSON line:
//   {"files": [{"name", "outcome", "text", "href"}]}.
'use strict';

const { chromium } = require('playwright-core');
const { mkdtempSync, readFileSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { basename, join } = require('node:path');

const scenario = process.argv[2];
const [base, user, password, taskPage, taskId, trashedPage, shots] = process.argv.slice(3);
const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

/** Presses Tab until the focused element matches `selector` (at most 60 times). */
async function tabTo(page, selector) {
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((s) => document.activeElement && document.activeElement.matches(s), selector)) {
      return;
    }
  }
  throw new Error(`Tab never reached ${selector}`);
}

/**
 * Space on the focused file field opens the file chooser. Under load (a whole `make test`)
 * Chromium has let a key press go without opening it: press again, up to three times.
 */
async function keyboardFileChooser(page) {
  for (let attempt = 1; ; attempt++) {
    try {
      const [chooser] = await Promise.all([
        page.waitForEvent('filechooser', { timeout: 10000 }),
        page.keyboard.press('Space'),
      ]);
      return chooser;
    } catch (e) {
      if (attempt === 3) throw e;
      check(await page.evaluate(() => document.activeElement.id) === 'files', 'the file field keeps the focus');
    }
  }
}

async function shoot(page, name) {
  if (!shots) return;
  for (const [width, suffix] of [[1280, 'desktop'], [390, 'phone']]) {
    await page.setViewportSize({ width, height: 860 });
    await page.screenshot({ path: join(shots, `app-${name}-${suffix}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 860 });
}

async function signIn(page) {
  await page.goto(`${base}/app`);
  check(page.url().includes('/oauth/signin'), `sent to sign in: ${page.url()}`);
  await page.fill('#username', user);
  await page.fill('#password', password);
  await Promise.all([page.waitForURL(`${base}/app`), page.press('#password', 'Enter')]);
}

/** Drops `paths` on the upload page's drop zone, as a file manager would. */
async function dropFiles(page, paths) {
  const files = paths.map((p) => ({ name: basename(p), data: readFileSync(p).toString('base64') }));
  const transfer = await page.evaluateHandle((files) => {
    const dt = new DataTransfer();
    for (const f of files) {
      const bytes = Uint8Array.from(atob(f.data), (c) => c.charCodeAt(0));
      dt.items.add(new File([bytes], f.name));
    }
    return dt;
  }, files);
  await page.dispatchEvent('#drop', 'dragover', { dataTransfer: transfer });
  await page.dispatchEvent('#drop', 'drop', { dataTransfer: transfer });
}

async function upload(page, errors) {
  const args = process.argv.slice(6);  // after the scenario, BASE_URL, USER, PASSWORD
  const at = args.indexOf('--shots');
  const dir = at >= 0 ? args[at + 1] : null;
  const paths = at >= 0 ? args.slice(0, at) : args;
  await signIn(page);
  await page.goto(`${base}/app/upload`);
  await dropFiles(page, paths);
  // Each file ends new, updated, unchanged or refused (a bar and "reading" until then).
  await page.waitForFunction((n) => {
    const done = [...document.querySelectorAll('#upload-results li')]
      .filter((li) => /\b(new|updated|unchanged|refused)\b/.test(li.className));
    return done.length === n;
  }, paths.length, { timeout: 240000 });
  if (dir) {
    for (const [width, suffix] of [[1280, 'desktop'], [390, 'phone']]) {
      await page.setViewportSize({ width, height: 860 });
      await page.screenshot({ path: join(dir, `app-upload-${suffix}.png`), fullPage: true });
    }
  }
  const files = await page.$$eval('#upload-results li', (lis) => lis.map((li) => ({
    name: li.dataset.name,
    outcome: li.className.replace('upload', '').trim(),
    text: li.querySelector('.outcome').textContent,
    href: li.querySelector('a.open') ? li.querySelector('a.open').getAttribute('href') : null,
  })));
  check(errors.length === 0, `no script or CSP errors: ${errors.join(' | ')}`);
  console.log(JSON.stringify({ files }));
}

async function main() {
  const profile = mkdtempSync(join(tmpdir(), 'nib-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 860 },
  });
  const errors = [];
  try {
    const page = await context.newPage();
    // A CSP violation or a script error is a failure: the app has no inline script or style.
    // (A failed load is reported by its response below, with its URL; browsers ask for
    // /favicon.ico on their own.)
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text());
    });
    page.on('response', (r) => {
      // (The upload scenario sends files that are refused with a 4xx on purpose.)
      if (scenario !== 'upload' && r.status() >= 400 && !r.url().endsWith('/favicon.ico')) errors.push(`${r.status()} ${r.url()}`);
    });
    page.on('pageerror', (e) => errors.push(String(e)));
    if (scenario === 'upload') return await upload(page, errors);

    // Sign in: /app sends to the sign-in form, which comes back to /app.
    await signIn(page);
    check(await page.locator('a.page-link').count() > 0, 'the pages are listed');
    await shoot(page, 'pages');

    // The page with the task: its text beside the image, the task ticked with the keyboard.
    await page.goto(`${base}/app/pages/${taskPage}`);
    const box = `form[action="/app/tasks/${taskId}"] button.check`;
    check(await page.getAttribute(box, 'aria-checked') === 'false', 'the task starts open');
    await tabTo(page, box);
    await page.keyboard.press('Enter');
    await page.waitForSelector(`${box}[aria-checked="true"]`);
    await shoot(page, 'page');

    // Upload with the keyboard alone: Tab to the file field, Space opens the file chooser,
    // Tab to Upload, Enter; the file's result line links its new page.
    const md = join(profile, '2026-08-03.md');
    require('node:fs').writeFileSync(md, '## Monday\n- [ ] Renew the library card\n');
    await page.goto(`${base}/app/upload`);
    await tabTo(page, '#files');
    await (await keyboardFileChooser(page)).setFiles(md);
    await tabTo(page, '#upload-submit');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#upload-results li.new a.open');

    // Tasks: the done one is under Done.
    await page.goto(`${base}/app/tasks?status=done`);
    check(await page.locator(`form[action="/app/tasks/${taskId}"]`).count() === 1, 'listed as done');
    await shoot(page, 'tasks');

    // Search: the words of the task, marked in a snippet.
    const word = (await page.locator(`form[action="/app/tasks/${taskId}"] + .text`).innerText())
      .split(/\s+/).find((w) => /^[A-Za-z]{4,}$/.test(w));
    await page.goto(`${base}/app/search`);
    await page.fill('#q', word);
    await Promise.all([page.waitForURL(/\/app\/search\?q=/), page.press('#q', 'Enter')]);
    check(await page.locator('.results mark').count() > 0, `a highlighted snippet for ${word}`);
    await shoot(page, 'search');

    // A token: created (shown once, with a copy button), then revoked.
    await page.goto(`${base}/app/account`);
    await page.fill('#token-label', 'browser test');
    await page.selectOption('#token-preset', 'read');
    await page.click('#create-token');
    await page.waitForSelector('#new-token');
    const token = (await page.locator('#new-token').innerText()).trim();
    check(token.startsWith('nib_live_'), 'the new token is shown');
    check(await page.locator('button.copy').isVisible(), 'the copy button (the script ran)');
    await shoot(page, 'account');
    await page.goto(`${base}/app/account`);
    check(!(await page.content()).includes(token), 'the token is shown only once');
    await page.click('button[aria-label="Revoke token browser test"]');
    await page.locator('button[aria-label="Revoke token browser test"]').waitFor({ state: 'detached' });

    // The OAuth connection, revoked with the keyboard alone.
    const revoke = 'button[aria-label="Revoke Test Client"]';
    check(await page.locator(revoke).count() === 1, 'the connection is listed');
    await tabTo(page, revoke);
    await page.keyboard.press('Enter');
    await page.locator(revoke).waitFor({ state: 'detached' });
    await page.waitForSelector('#no-grants');

    // Your data: the page the test put in the trash, restored; the export downloaded.
    await page.goto(`${base}/app/data`);
    const trashed = `tr.trashed[data-id="${trashedPage}"]`;
    check(await page.locator(trashed).count() === 1, 'the trashed page is listed with its purge date');
    await shoot(page, 'data');
    await page.click(`${trashed} button`);
    await page.locator(trashed).waitFor({ state: 'detached' });
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-bundle')]);
    const bundle = join(profile, 'export.nib.zip');
    await download.saveAs(bundle);
    const head = readFileSync(bundle).subarray(0, 2).toString('latin1');
    check(head === 'PK', `the export is a ZIP (${download.suggestedFilename()})`);

    // Sign out everywhere: this browser's cookie is refused afterwards.
    await page.goto(`${base}/app/account`);
    await Promise.all([page.waitForURL(/\/oauth\/signout$/), page.click('#signout-everywhere')]);
    check((await page.locator('main').innerText()).includes('every browser'), 'signed out everywhere');
    await page.goto(`${base}/app`);
    check(page.url().includes('/oauth/signin'), 'the old session is refused');

    check(errors.length === 0, `no script or CSP errors: ${errors.join(' | ')}`);
    console.log(JSON.stringify({ token }));
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
