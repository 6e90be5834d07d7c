// nib's web app: small enhancements only; every screen works without this script.
'use strict';

// The copy button beside a token shown once.
document.querySelectorAll('button.copy[data-copy]').forEach((button) => {
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  button.hidden = false;
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      button.textContent = 'Copied';
    } catch (e) {
      button.textContent = 'Select and copy it';
    }
  });
});

// Upload: drag and drop, one request per file with its progress bar and its own result.
// Without this script the form posts every chosen file at once (locally) and the answer
// lists the results, or (on AWS) one file straight to storage, which sends the browser back
// to a page of ours that shows its result.
(function () {
  const form = document.getElementById('upload-form');
  if (!form || !window.FormData || !window.XMLHttpRequest) return;
  const mode = form.dataset.mode;
  const input = document.getElementById('files');
  const list = document.getElementById('upload-results');
  const drop = document.getElementById('drop');
  const token = form.dataset.csrf;
  drop.querySelector('.drop-hint').hidden = false;
  // Without the script the form on AWS sends one file; with it every chosen file goes.
  input.multiple = true;

  function row(file) {
    const li = document.createElement('li');
    li.className = 'upload sending';
    li.dataset.name = file.name;
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = file.name;
    const bar = document.createElement('progress');
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute('aria-label', `Uploading ${file.name}`);
    const outcome = document.createElement('span');
    outcome.className = 'outcome';
    outcome.textContent = 'sending';
    li.append(name, ' ', bar, ' ', outcome);
    list.prepend(li);
    return { li, bar, outcome };
  }

  function finish(r, result) {
    r.li.className = `upload ${result.outcome}`;
    r.bar.value = 100;
    r.outcome.textContent = result.outcome === 'refused' ? `refused: ${result.message}` : result.message;
    if (result.page_id) {
      const a = document.createElement('a');
      a.className = 'open';
      a.href = `/app/pages/${result.page_id}`;
      a.textContent = 'open the page';
      r.li.append(' ', a);
    }
  }

  function reading(r) {
    r.li.className = 'upload reading';
    r.outcome.textContent = 'reading';
  }

  // `readsHere`: the server answers once it has read the file (locally, where the request
  // waits for the work pool and the OCR engine), so the row says "reading" once it is sent.
  function send(url, body, r, accept, readsHere) {
    return new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', url);
      if (accept) xhr.setRequestHeader('Accept', accept);
      xhr.upload.onprogress = (e) => { if (e.lengthComputable) r.bar.value = Math.round((100 * e.loaded) / e.total); };
      if (readsHere) xhr.upload.onload = () => reading(r);
      xhr.onload = () => resolve({ status: xhr.status, text: xhr.responseText });
      xhr.onerror = () => resolve({ status: 0, text: '' });
      xhr.send(body);
    });
  }

  async function sendHere(file, r) {
    const body = new FormData();
    body.append('csrf_token', token);
    body.append('back', '/app/upload');
    body.append('files', file);
    const answer = await send('/app/upload', body, r, 'application/json', true);
    try {
      finish(r, JSON.parse(answer.text).files[0]);
    } catch (e) {
      finish(r, { outcome: 'refused', message: `the server answered HTTP ${answer.status}` });
    }
  }

  // The pages of `date` and, with `name`, what the ingest function recorded for that file's
  // upload since `since` (a refusal with its reason, or the page it made).
  async function statusOf(date, name, since) {
    const q = new URLSearchParams();
    if (date) q.set('date', date);
    if (name) { q.set('name', name); q.set('since', String(since)); }
    const r = await fetch(`/app/upload/status?${q}`, { credentials: 'same-origin' });
    return r.ok ? await r.json() : { pages: [], result: null };
  }

  async function pagesOf(date) {
    return (await statusOf(date)).pages;
  }

  // The first bytes a page file of each kind starts with (storage cannot look inside; the
  // ingest function would refuse a mislabelled file later, out of sight).
  const SIGNATURES = {
    png: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
    jpg: [0xff, 0xd8, 0xff],
    jpeg: [0xff, 0xd8, 0xff],
    pdf: [0x25, 0x50, 0x44, 0x46, 0x2d],
  };
  const KINDS = { png: 'a PNG image', jpg: 'a JPEG image', jpeg: 'a JPEG image', pdf: 'a PDF' };

  async function mislabelled(file) {
    const ext = (file.name.split('.').pop() || '').toLowerCase();
    const want = SIGNATURES[ext];
    if (!want) return null;
    const head = new Uint8Array(await file.slice(0, want.length).arrayBuffer());
    return want.every((b, i) => head[i] === b) ? null : `its contents are not ${KINDS[ext]}`;
  }

  async function sendToStorage(file, r) {
    const wrong = await mislabelled(file);
    if (wrong) return finish(r, { outcome: 'refused', message: wrong });
    const date = (file.name.match(/^(\d{4}-\d{2}-\d{2})/) || [])[1];
    const before = date ? await pagesOf(date) : [];
    const signed = await fetch('/app/upload/sign', {
      method: 'POST',
      credentials: 'same-origin',
      body: new URLSearchParams({ csrf_token: token, back: '/app/upload', name: file.name, size: String(file.size) }),
    }).then((x) => x.json()).catch(() => ({ error: 'the upload could not be prepared' }));
    if (signed.error) return finish(r, { outcome: 'refused', message: signed.error });
    const body = new FormData();
    for (const [k, v] of signed.fields) body.append(k, v);
    body.append('file', file);
    const answer = await send(signed.url, body, r);
    if (answer.status < 200 || answer.status >= 300) {
      return finish(r, { outcome: 'refused', message: `storage refused the file (HTTP ${answer.status})` });
    }
    reading(r);
    const seen = new Map(before.map((p) => [p.page_id, p.revision]));
    for (let i = 0; i < 300; i++) {
      await new Promise((ok) => setTimeout(ok, 1000));
      const now = await statusOf(date, file.name, signed.signed_at);
      if (now.result) return finish(r, now.result);
      const page = now.pages.find((p) => !seen.has(p.page_id) || seen.get(p.page_id) !== p.revision);
      if (page) {
        const outcome = seen.has(page.page_id) ? 'updated' : 'new';
        return finish(r, { outcome, message: outcome === 'new' ? 'new page' : 'page updated', page_id: page.page_id });
      }
    }
    finish(r, { outcome: 'reading', message: 'still being read: look for it in your pages later' });
  }

  async function upload(files) {
    for (const file of files) {
      const r = row(file);
      await (mode === 's3' ? sendToStorage(file, r) : sendHere(file, r));
    }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    upload(Array.from(input.files));
    input.value = '';
  });
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    upload(Array.from(e.dataTransfer.files));
  });
})();
