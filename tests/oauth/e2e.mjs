// The whole OAuth flow with a real client: the official TypeScript SDK's OAuth client provider
// (@modelcontextprotocol/sdk) against a running `nib serve`, the consent form filled in headless
// Chromium. The SDK discovers the metadata from the 401, registers (RFC 7591), sends the browser
// to the consent page, exchanges the code (PKCE S256, resource), calls tools, and refreshes
// when its access token stops working. Then a few checks the SDK does not make itself: the
// rotated refresh token is dead, and a write with a read-only grant asks to step up.
//
// Usage: node e2e.mjs MCP_URL PASSWORD [SCREENSHOT.png]
// Prints "ok - ..." / "FAIL - ..." lines and "e2e: N passed, M failed"; exits 1 on a failure.
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { approve, openBrowser } from './browser.mjs';

const [mcpUrl, password, screenshot] = process.argv.slice(2);
if (!mcpUrl || !password) {
  console.error('usage: node e2e.mjs MCP_URL PASSWORD [SCREENSHOT.png]');
  process.exit(2);
}
const CLIENT_NAME = 'nib e2e (TypeScript SDK)';

let passed = 0;
let failed = 0;
function check(name, ok, detail = '') {
  if (ok) {
    passed++;
    console.log(`ok   - ${name}`);
  } else {
    failed++;
    console.log(`FAIL - ${name}${detail ? `: ${detail}` : ''}`);
  }
  return ok;
}

/** A loopback redirect URI and a promise of the next code delivered to it. */
async function callbackServer() {
  let deliver;
  let codes = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (url.pathname !== '/callback') {
      // The browser also asks for /favicon.ico.
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('nib e2e: you can close this window');
    const item = { code: url.searchParams.get('code'), error: url.searchParams.get('error'), iss: url.searchParams.get('iss'), state: url.searchParams.get('state') };
    if (deliver) {
      const d = deliver;
      deliver = undefined;
      d(item);
    } else {
      codes.push(item);
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/callback`,
    next: () => (codes.length ? Promise.resolve(codes.shift()) : new Promise((r) => (deliver = r))),
    close: () => server.close(),
  };
}

/** An in-memory OAuthClientProvider, as an app would keep in its settings. */
class MemoryProvider {
  constructor(redirectUrl) {
    this._redirectUrl = redirectUrl;
    this.authUrls = [];
  }
  get redirectUrl() { return this._redirectUrl; }
  get clientMetadata() {
    return {
      client_name: CLIENT_NAME,
      redirect_uris: [this._redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  redirectToAuthorization(url) { this.authUrls.push(new URL(url)); }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
}

/**
 * Connects, running the browser sign-in when the server asks for it. `scope` replaces the scope
 * the SDK asks for (it takes the server's suggestion, `read write`), as a client asking for
 * less would.
 */
async function connect(provider, callback, browser, { shot, scope } = {}) {
  const client = new Client({ name: 'nib-oauth-e2e', version: '1.0.0' });
  let transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  try {
    await client.connect(transport);
    return { client, transport };
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  const authUrl = provider.authUrls.at(-1);
  if (authUrl && scope) authUrl.searchParams.set('scope', scope);
  check('the SDK was sent to the authorization endpoint with PKCE S256 and resource',
    authUrl && authUrl.pathname === '/oauth/authorize'
      && authUrl.searchParams.get('code_challenge_method') === 'S256'
      && authUrl.searchParams.get('resource') === mcpUrl, String(authUrl));
  check('the SDK registered dynamically and got the refresh_token grant',
    provider.clientInformation()?.client_id?.startsWith('nib_client_')
      && (provider.clientInformation().grant_types || []).includes('refresh_token'),
    JSON.stringify(provider.clientInformation()));
  const delivered = callback.next();
  await approve(browser.context, authUrl, { user: 'default', password, expectName: CLIENT_NAME, screenshot: shot });
  const back = await delivered;
  check('the browser came back with a code, the state it sent (if any) and iss',
    back.code && back.state === authUrl.searchParams.get('state') && back.iss === new URL(mcpUrl).origin, JSON.stringify(back));
  await transport.finishAuth(back.code);
  check('the code was exchanged for an access and a refresh token',
    provider.tokens()?.access_token && provider.tokens()?.refresh_token, JSON.stringify(provider.tokens()));
  transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  await client.connect(transport);
  return { client, transport };
}

async function main() {
  const callback = await callbackServer();
  const browser = await openBrowser();
  try {
    // 1. Connect with the default scopes, call tools.
    const provider = new MemoryProvider(callback.url);
    const { client } = await connect(provider, callback, browser, { shot: screenshot });
    const tools = await client.listTools();
    check('tools/list with the OAuth token lists the write tools too',
      tools.tools.some((t) => t.name === 'create_task'), tools.tools.map((t) => t.name).join(','));
    const pages = await client.callTool({ name: 'list_pages', arguments: { limit: 3 } });
    check('tools/call list_pages returns pages', !pages.isError && Array.isArray(pages.structuredContent?.pages), JSON.stringify(pages).slice(0, 300));

    // 2. The access token stops working (as when it expires): the SDK refreshes on the 401.
    const before = provider.tokens();
    provider.saveTokens({ ...before, access_token: 'expired.token.value' });
    const again = await client.callTool({ name: 'list_tasks', arguments: {} });
    const after = provider.tokens();
    check('after a 401 the SDK refreshed and the call went through',
      !again.isError && after.access_token !== 'expired.token.value', JSON.stringify(again).slice(0, 200));
    check('the refresh token rotated', after.refresh_token && after.refresh_token !== before.refresh_token);

    // 3. The rotated refresh token is dead, and presenting it revokes the grant.
    const meta = await (await fetch(new URL('/.well-known/oauth-authorization-server', mcpUrl))).json();
    const reuse = await fetch(meta.token_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: before.refresh_token, client_id: provider.clientInformation().client_id }),
    });
    check('reusing a rotated refresh token is invalid_grant', reuse.status === 400 && (await reuse.json()).error === 'invalid_grant');
    const revoked = await fetch(mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${after.access_token}`, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    check('...and the grant is revoked: the newest access token gets 401 with the challenge',
      revoked.status === 401 && (revoked.headers.get('www-authenticate') || '').includes('invalid_token'), String(revoked.status));
    await client.close();

    // 4. A read-only grant: a write tool asks to step up (403 insufficient_scope).
    const reader = new MemoryProvider(callback.url);
    const { client: readClient } = await connect(reader, callback, browser, { scope: 'read' });
    check('a read grant gets the read scope', reader.tokens()?.scope === 'read', JSON.stringify(reader.tokens()));
    const write = await fetch(mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${reader.tokens().access_token}`, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'create_task', arguments: { target_date: '2026-06-20', text: 'e2e' } } }),
    });
    const challenge = write.headers.get('www-authenticate') || '';
    check('a changing tool with a read token is 403 insufficient_scope naming edit',
      write.status === 403 && challenge.includes('insufficient_scope') && challenge.includes('scope="edit"'), `${write.status} ${challenge}`);
    await readClient.close();
  } finally {
    await browser.close();
    callback.close();
  }
}

try {
  await main();
} catch (e) {
  check('the flow ran to the end', false, e && e.stack ? e.stack : String(e));
}
console.log(`e2e: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
