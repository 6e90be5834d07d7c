// The MCP App page viewer (ui://nib/page-viewer) in headless Chromium, inside the small host of
// host.html, fed real results of a running `nib serve` over MCP.
//
// Usage: node viewer.mjs MCP_URL WRITE_TOKEN READ_TOKEN [SCREENSHOT_DIR]
//
// Checks what a person would: the page image loaded (through the resource's CSP), the text is
// there, ticking a box changes the task over MCP (list_tasks says done), the older/newer
// buttons and the keyboard move between pages, a read-only grant shows no live checkboxes,
// unsure OCR lines are marked, the layout stacks at phone width and follows the host's theme.
// Prints one line per check and `viewer: N passed, M failed`; exits 1 on any failure.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openBrowser } from '../oauth/browser.mjs';

const [url, writeToken, readToken, shots] = process.argv.slice(2);
const HERE = dirname(fileURLToPath(import.meta.url));
const HOST_HTML = readFileSync(join(HERE, 'host.html'), 'utf8');
const TIMEOUT = 15000;

let passed = 0;
let failed = 0;
function check(name, ok, detail = '') {
  if (ok) { passed++; console.log(`ok   - ${name}`); } else { failed++; console.log(`FAIL - ${name}${detail ? ': ' + detail : ''}`); }
  return ok;
}

let nextId = 1;
async function mcp(token, method, params) {
  const r = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  const body = await r.json();
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}
const call = (token, name, args) => mcp(token, 'tools/call', { name, arguments: args });

// The host page, from its own origin (as a real host's is not the server's).
const hostServer = createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(HOST_HTML);
});
await new Promise((resolve) => hostServer.listen(0, '127.0.0.1', resolve));
const hostUrl = `http://127.0.0.1:${hostServer.address().port}/`;

/** Opens the viewer in the host with `token`'s grant, showing `toolResult`. */
async function openViewer(context, token, { toolName, toolArguments, toolResult, theme = 'light', viewport }) {
  const view = await mcp(token, 'resources/read', { uri: 'ui://nib/page-viewer' });
  const content = view.contents[0];
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.log(`       (console: ${m.text()})`); });
  if (viewport) await page.setViewportSize(viewport);
  const tools = [];
  await page.exposeFunction('nibCallTool', async (name, args) => {
    tools.push({ name, args });
    return call(token, name, args);
  });
  const setup = { html: content.text, csp: content._meta.ui.csp, theme, toolName, toolArguments, toolResult };
  await page.addInitScript((s) => { window.nibHostSetup = s; }, setup);
  await page.goto(hostUrl);
  const frame = page.frameLocator('iframe');
  return { page, frame, tools };
}

async function imageLoaded(frame) {
  const img = frame.locator('#image');
  await img.waitFor({ state: 'attached', timeout: TIMEOUT });
  // Resolves once the browser has the picture (or gave up on it).
  return img.evaluate((el) => new Promise((resolve) => {
    const done = () => resolve(el.complete && el.naturalWidth > 0);
    if (el.complete) done(); else { el.addEventListener('load', done); el.addEventListener('error', done); }
  }));
}

const browser = await openBrowser();
try {
  const pages = (await call(writeToken, 'list_pages', {})).structuredContent.pages;
  const day = pages.find((p) => p.date === '2026-06-19' && p.has_ink);
  const args = { page_id: day.page_id };
  const result = await call(writeToken, 'get_page', args);
  const task = result.structuredContent.structure_json.lines.find((l) => l.text === 'Draft the quarterly budget');

  // 1. Write grant, desktop width, light theme.
  {
    const { page, frame, tools } = await openViewer(browser.context, writeToken, {
      toolName: 'get_page', toolArguments: args, toolResult: result, viewport: { width: 1000, height: 700 },
    });
    await frame.locator('#title').filter({ hasText: 'Page of 2026-06-19' }).waitFor({ timeout: TIMEOUT });
    check('the view shows the page of the tool result', true);
    check('the page image loaded through the declared CSP', await imageLoaded(frame),
      `png_url ${result.structuredContent.png_url}, resourceDomains ${JSON.stringify((await mcp(writeToken, 'resources/read', { uri: 'ui://nib/page-viewer' })).contents[0]._meta.ui.csp.resourceDomains)}`);
    const text = await frame.locator('#lines').innerText();
    check('the OCR text is there, line by line', text.includes('Call the printer about the cover stock') && text.includes('Reading'), text);
    const box = frame.locator('label', { hasText: 'Draft the quarterly budget' }).locator('xpath=..').locator('input[type=checkbox]');
    check('an open task has a live, unticked checkbox', (await box.isEnabled()) && !(await box.isChecked()));
    const migrated = frame.locator('label', { hasText: 'Follow up on API spec' }).locator('xpath=..').locator('input[type=checkbox]');
    check('a migrated task cannot be ticked', await migrated.isDisabled());
    // Side by side at desktop width.
    const [fig, sec] = await Promise.all([frame.locator('#ink').boundingBox(), frame.locator('section').boundingBox()]);
    check('image and text side by side at desktop width', fig && sec && sec.x > fig.x + fig.width - 1 && Math.abs(sec.y - fig.y) < 5, JSON.stringify({ fig, sec }));

    // Ticking by keyboard: focus the box, press Space.
    await box.focus();
    await page.keyboard.press('Space');
    await frame.locator('#status').filter({ hasText: 'Done: Draft the quarterly budget' }).waitFor({ timeout: TIMEOUT });
    const calls = tools.filter((t) => t.name === 'update_task_status');
    check('ticking calls update_task_status through the host', calls.length === 1 && calls[0].args.task_link_id === task.task_link_id && calls[0].args.status === 'done', JSON.stringify(calls));
    const done = (await call(writeToken, 'list_tasks', { status: 'done' })).structuredContent.tasks;
    check('the task is done over MCP', done.some((t) => t.task_link_id === task.task_link_id), JSON.stringify(done.map((t) => t.text)));

    // Older and newer, by button and by keyboard.
    const older = frame.locator('#prev');
    await older.waitFor({ state: 'visible' });
    await frame.locator('#prev:not([disabled])').waitFor({ timeout: TIMEOUT });
    await older.focus();
    await page.keyboard.press('Enter');
    const expectOlder = pages[pages.findIndex((p) => p.page_id === day.page_id) + 1];
    await frame.locator('#title').filter({ hasText: `Page of ${expectOlder.date}` }).waitFor({ timeout: TIMEOUT });
    check('the older-page button (keyboard Enter) opens the previous page', true);
    await frame.locator('body').press('ArrowRight');
    await frame.locator('#title').filter({ hasText: 'Page of 2026-06-19' }).waitFor({ timeout: TIMEOUT });
    check('ArrowRight goes back to the newer page', true);
    // Untick again, so the next run of the notebook is as before.
    await call(writeToken, 'update_task_status', { task_link_id: task.task_link_id, status: 'todo' });
    await page.close();
  }

  // 2. Read-only grant: the same page, no live checkboxes, nothing changes.
  {
    const roResult = await call(readToken, 'get_page', args);
    const { page, frame, tools } = await openViewer(browser.context, readToken, {
      toolName: 'get_page', toolArguments: args, toolResult: roResult, viewport: { width: 1000, height: 700 },
    });
    await frame.locator('#title').filter({ hasText: 'Page of 2026-06-19' }).waitFor({ timeout: TIMEOUT });
    const boxes = frame.locator('input[type=checkbox]');
    const n = await boxes.count();
    let live = 0;
    for (let i = 0; i < n; i++) if (await boxes.nth(i).isEnabled()) live++;
    check('a read-only grant shows no live checkboxes', n >= 3 && live === 0, `${live} of ${n} enabled`);
    await boxes.nth(1).click({ force: true });
    check('clicking one there calls nothing', !tools.some((t) => t.name === 'update_task_status'));
    await page.close();
  }

  // 3. Phone width, dark theme, a search_pages result (the view opens its top hit), and an
  //    unsure OCR line (the sample is typed, so one line's confidence is lowered in the result).
  {
    const search = await call(writeToken, 'search_pages', { query: 'Designing' });
    const { page, frame } = await openViewer(browser.context, writeToken, {
      toolName: 'search_pages', toolArguments: { query: 'Designing' }, toolResult: search,
      theme: 'dark', viewport: { width: 390, height: 844 },
    });
    await frame.locator('#title').filter({ hasText: /Page of / }).waitFor({ timeout: TIMEOUT });
    const top = search.structuredContent.results[0];
    check('a search_pages result opens its top page', (await frame.locator('#title').innerText()) === `Page of ${top.date}`);
    const bg = await frame.locator('body').evaluate((el) => getComputedStyle(el).backgroundColor);
    check('the view follows the host theme (dark)', bg === 'rgb(28, 25, 23)', bg);
    const [fig, sec] = await Promise.all([frame.locator('#ink').boundingBox(), frame.locator('section').boundingBox()]);
    check('image above text at phone width', fig && sec && sec.y >= fig.y + fig.height - 1 && sec.width > 300, JSON.stringify({ fig, sec }));
    const wide = await frame.locator('html').evaluate((el) => el.scrollWidth <= el.clientWidth);
    check('nothing overflows sideways at phone width', wide);
    await page.close();

    const unsure = structuredClone(result);
    unsure.structuredContent.structure_json.lines[2].ocr_confidence = 0.41;
    const view = await openViewer(browser.context, writeToken, { toolName: 'get_page', toolArguments: args, toolResult: unsure });
    await view.frame.locator('li.unsure').waitFor({ timeout: TIMEOUT });
    const marked = await view.frame.locator('li.unsure').innerText();
    check('an unsure OCR line is highlighted and says so', marked.includes(unsure.structuredContent.structure_json.lines[2].text) && marked.includes('unsure reading'), marked);
    await view.page.close();
  }

  // 4. Screenshots for docs/user-guide.md: the handwritten page run.sh imported, desktop and phone.
  if (shots) {
    const hand = pages.find((p) => p.date === '2025-03-17');
    const handArgs = { page_id: hand.page_id };
    const handResult = await call(writeToken, 'get_page', handArgs);
    for (const [file, theme, viewport] of [
      ['viewer-desktop.png', 'light', { width: 1000, height: 720 }],
      ['viewer-phone.png', 'dark', { width: 390, height: 844 }],
    ]) {
      const { page, frame } = await openViewer(browser.context, writeToken, {
        toolName: 'get_page', toolArguments: handArgs, toolResult: handResult, theme, viewport,
      });
      await frame.locator('#title').filter({ hasText: 'Page of 2025-03-17' }).waitFor({ timeout: TIMEOUT });
      await imageLoaded(frame);
      await page.screenshot({ path: join(shots, file) });
      await page.close();
    }
    console.log(`       (screenshots in ${shots})`);
  }
} catch (e) {
  check('the viewer run', false, e && e.stack || String(e));
} finally {
  await browser.close();
  hostServer.close();
}
console.log(`viewer: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
