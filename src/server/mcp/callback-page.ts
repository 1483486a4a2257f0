/**
 * The page an authorization server sends the browser back to. It carries the
 * authorization response in a form that posts to POST /oauth/mcp/callback;
 * its script (a file of its own: the page allows no inline script) posts it at
 * once and shows the answer, and without JavaScript a button does the same.
 */
import { createHash } from 'node:crypto';

const escape = (value: string): string =>
  value.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const STYLE = 'body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222;background:#fff}'
  + '@media (prefers-color-scheme:dark){body{color:#eee;background:#111}}button{font:inherit;padding:.5rem 1rem}.bad{color:#b00}@media (prefers-color-scheme:dark){.bad{color:#f77}}';

/** The page's one style element, allowed by its hash (the page allows nothing inline but it). */
export const STYLE_HASH = `sha256-${createHash('sha256').update(STYLE).digest('base64')}`;

const page = (title: string, body: string, script = false): string => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escape(title)}</title><style>${STYLE}</style>
${script ? '<script src="/oauth/mcp/callback.js" defer></script>' : ''}</head>
<body><main>${body}</main></body></html>
`;

export function callbackPage(params: Record<string, string | undefined>): string {
  const fields = Object.entries(params)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `<input type="hidden" name="${escape(name)}" value="${escape(value!.slice(0, 4096))}">`)
    .join('');
  return page('Connecting the MCP server', `<h1>Connecting the MCP server</h1>
<form id="finish" method="post" action="/oauth/mcp/callback">${fields}
<p id="status" role="status" aria-live="polite">Finish the login to connect the gateway to the MCP server.</p>
<button type="submit">Finish connecting</button></form>`, true);
}

export const resultPage = (ok: boolean, message: string): string =>
  page(ok ? 'Connected' : 'Login failed', `<h1>${ok ? 'Connected' : 'The login failed'}</h1><p${ok ? '' : ' class="bad"'} role="status">${escape(message)}</p>`);

/** Posts the form as JSON and shows the answer in place. */
export const CALLBACK_SCRIPT = `'use strict';
(function () {
  var form = document.getElementById('finish');
  if (!form) return;
  var status = document.getElementById('status');
  var button = form.querySelector('button');
  var body = {};
  new FormData(form).forEach(function (value, key) { body[key] = String(value); });
  button.disabled = true;
  status.textContent = 'Connecting...';
  fetch(form.action, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body), credentials: 'omit' })
    .then(function (res) { return res.json().then(function (answer) { return { ok: res.ok, answer: answer }; }); })
    .then(function (result) {
      var h1 = document.querySelector('h1');
      if (result.ok) {
        var server = result.answer.server || {};
        h1.textContent = 'Connected';
        status.textContent = 'MCP server ' + server.name + ' is ' + server.state + (server.state === 'connected' ? ' with ' + server.tools + ' tools' : '') + '. You can close this page.';
      } else {
        h1.textContent = 'The login failed';
        status.className = 'bad';
        status.textContent = result.answer.message || 'The gateway refused the login.';
      }
      button.remove();
    })
    .catch(function () {
      status.className = 'bad';
      status.textContent = 'The gateway did not answer. Is it still running?';
      button.disabled = false;
    });
})();
`;
