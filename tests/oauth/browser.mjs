// Headless Chromium (Debian's /usr/bin/chromium) driven by playwright-core, for the OAuth tests:
// opens nib's consent page, checks what it shows, signs in and approves. Shared by e2e.mjs and
// conformance.mjs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
// Without the background-networking flags Chromium keeps trying hosts this machine cannot reach.
const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A fresh browser profile; call close() when done. */
export async function openBrowser() {
  const profile = mkdtempSync(join(tmpdir(), 'nib-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 720, height: 860 },
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Opens `authUrl` (nib's /oauth/authorize), checks the page names `expectName`, optionally
 * saves a screenshot, signs in and approves. Resolves when the browser has been sent on to the
 * client's redirect URI (whose server must answer it).
 */
export async function approve(context, authUrl, { user, password, expectName, screenshot }) {
  const page = await context.newPage();
  try {
    const response = await page.goto(String(authUrl));
    if (!response || response.status() !== 200) {
      throw new Error(`consent page answered HTTP ${response && response.status()}: ${(await page.content()).slice(0, 400)}`);
    }
    const text = await page.locator('main').innerText();
    if (expectName && !text.includes(expectName)) {
      throw new Error(`consent page does not name the client ${expectName}: ${text.slice(0, 400)}`);
    }
    await page.fill('#username', user);
    await page.fill('#password', password);
    if (screenshot) {
      // The password field shows only dots; the screenshot is for the README.
      await page.screenshot({ path: screenshot, fullPage: true });
    }
    await Promise.all([
      page.waitForURL((u) => !u.pathname.startsWith('/oauth/authorize'), { timeout: 20000 }),
      page.click('button[value=approve]'),
    ]);
    return page.url();
  } finally {
    await page.close();
  }
}

