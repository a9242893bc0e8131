// Hearth status page: reads /api/v1 with the user's bearer token and
// follows GET /api/v1/events for live updates. Every value from the API
// reaches the DOM through textContent or setAttribute, never as markup:
// device names and states come from outside.
'use strict';

(() => {
  const TOKEN_KEY = 'hearth.token';
  const TERMINAL = new Set(['succeeded', 'failed', 'expired', 'superseded', 'rejected']);
  const FAILED = new Set(['failed', 'expired', 'rejected', 'superseded']);
  const MAX_OPS = 100; // ops the page keeps, pending ones beyond it included
  const POLL_MS = 5000; // polling while the event stream is down
  const BACKOFF_MIN_MS = 1000;
  const BACKOFF_MAX_MS = 30000;
  const STREAM_IDLE_MS = 45000; // three missed keepalives: the stream is dead

  const $ = (sel, root = document) => root.querySelector(sel);

  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  // session counts starts and stops: a loop of an earlier one ends when
  // it sees another number.
  let session = 0;
  let streamAbort = null;
  let pollTimer = 0;
  let refreshTimer = 0;
  let refreshWanted = new Set();
  let backoff = BACKOFF_MIN_MS; // the event stream's next reconnect delay, at most

  const data = {
    devices: new Map(), // id → DeviceStatus, in config order
    breakers: new Map(), // service → BreakerStatus
    ops: new Map(), // op_id → op or result, merged
    deadLetters: [],
    audit: [],
    opsListed: false, // GET /api/v1/ops answered: the server's list is the truth
  };

  class AuthError extends Error {}
  class HTTPError extends Error {
    constructor(status, code, detail) {
      super(code ? `${status} ${code}${detail ? ': ' + detail : ''}` : `HTTP ${status}`);
      this.status = status;
      this.code = code;
    }
  }

  // api fetches path from hearthd with the token; a 401 asks for one.
  // Only a request of the current session changes the page: the answers
  // to the other requests of a refused token find the prompt up already.
  async function api(path, opts = {}) {
    const gen = session;
    const sent = token;
    const headers = new Headers(opts.headers || {});
    if (sent) headers.set('Authorization', 'Bearer ' + sent);
    const resp = await fetch(path, { ...opts, headers, cache: 'no-store', credentials: 'omit' });
    if (resp.status === 401) {
      if (gen === session) {
        const why = resp.headers.get('WWW-Authenticate') || '';
        needToken(sent ? 'That token was refused' + (why.includes('invalid_token') ? ' (unknown token)' : '') + '. Give another.' : '');
      }
      throw new AuthError('unauthorized');
    }
    return resp;
  }

  async function getJSON(path) {
    const resp = await api(path);
    let body = null;
    try { body = await resp.json(); } catch (_) { /* not JSON */ }
    if (!resp.ok) throw new HTTPError(resp.status, body && body.error, body && body.detail);
    return body;
  }

  // el makes an element: el('td', {class: 'x', text: value, label: 'Device'}, child...).
  function el(tag, props = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null) continue;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'class') e.className = v;
      else if (k === 'label') e.setAttribute('data-label', v);
      else e.setAttribute(k, String(v));
    }
    for (const c of children) if (c) e.append(c);
    return e;
  }

  // badge shows value (or text) in a pill whose class is value, which the
  // style sheet colours: succeeded, open, online, ….
  function badge(value, extra, text) {
    const v = value === undefined || value === null || value === '' ? '—' : String(value);
    return el('span', { class: 'badge ' + v.replace(/[^a-z_]/gi, '') + (extra ? ' ' + extra : ''), text: text || v });
  }

  function td(label, content, cls) {
    const cell = el('td', { label, class: cls });
    if (content instanceof Node) cell.append(content);
    else cell.textContent = content === undefined || content === null || content === '' ? '—' : String(content);
    return cell;
  }

  // when shows an RFC 3339 time in local time: 19:00:04 today,
  // 2026-11-29 19:00:04 another day.
  function when(s) {
    if (!s) return '—';
    const d = new Date(s);
    if (isNaN(d) || d.getUTCFullYear() < 1971) return '—';
    const p = (n) => String(n).padStart(2, '0');
    const time = `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
    if (d.toDateString() === new Date().toDateString()) return time;
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${time}`;
  }

  function timeCell(label, s) {
    const c = td(label, when(s));
    if (s) c.setAttribute('title', String(s));
    return c;
  }

  function compact(v) {
    if (v === undefined || v === null) return '';
    if (typeof v === 'string') return v;
    return JSON.stringify(v);
  }

  // section shows or hides a section's "unavailable" and "empty" notes.
  // Only the notes named in notes change.
  function sectionNotes(id, notes) {
    const s = document.getElementById(id);
    const u = $('.unavailable', s);
    if (u && 'error' in notes) {
      u.hidden = !notes.error;
      u.textContent = notes.error ? 'Not available: ' + notes.error.message : '';
    }
    const e = $('.empty', s);
    if (e && 'empty' in notes) {
      e.hidden = !notes.empty;
      const table = $('table', s);
      if (table) table.hidden = !!notes.empty;
    }
  }

  // ---- rendering ----

  function renderBreakers() {
    const body = $('#services tbody');
    body.replaceChildren();
    for (const b of data.breakers.values()) {
      const notes = [];
      if (b.watched) notes.push('watched');
      if (b.notify) notes.push('notify');
      if (b.offline) notes.push('says offline');
      const name = el('span', { text: b.service });
      if (notes.length) name.append(el('span', { class: 'note', text: ' (' + notes.join(', ') + ')' }));
      body.append(el('tr', { 'data-service': b.service },
        td('Service', name),
        td('Breaker', badge(b.state), 'breaker'),
        td('Bridge', badge(b.bridge)),
        td('Trips', b.trips),
        timeCell('Since', b.since),
        timeCell('Until', b.until)));
    }
    sectionNotes('services', { empty: data.breakers.size === 0 });
  }

  function renderDevice(d) {
    const card = el('article', { class: 'card', 'data-device': d.id });
    card.append(el('h3', { text: d.id }));
    card.append(el('div', { class: 'meta', text: [d.class, d.service].filter(Boolean).join(' · ') }));
    const badges = el('div', { class: 'badges' });
    badges.append(el('span', { class: 'availability' }, badge(d.availability || 'unknown')));
    if (d.safety_critical) badges.append(badge('safety-critical', 'safety'));
    if (d.sleepy) {
      const lease = d.lease;
      const awake = lease && lease.awake;
      const b = badge(awake ? 'awake' : 'asleep');
      const span = el('span', { class: 'lease' }, b);
      if (awake && lease.until) span.append(el('span', { class: 'note', text: ' until ' + when(lease.until) }));
      badges.append(span);
    }
    if (d.breaker) badges.append(el('span', { class: 'breaker', title: 'the breaker of ' + (d.service || 'its service') }, badge(d.breaker, '', 'breaker ' + d.breaker)));
    const pending = Number(d.pending) || 0;
    badges.append(el('span', { class: 'pending-count' }, badge(pending ? 'pending' : 'none', '', pending + ' pending')));
    card.append(badges);

    const st = d.state;
    if (st && typeof st === 'object' && Object.keys(st).length) {
      const list = el('ul', { class: 'state' });
      for (const k of Object.keys(st).sort()) {
        list.append(el('li', { 'data-attr': k }, el('span', { class: 'k', text: k }), el('span', { class: 'v', text: compact(st[k]) })));
      }
      card.append(list);
    } else {
      card.append(el('p', { class: 'state none', text: 'no confirmed state yet' }));
    }
    return card;
  }

  function renderDevices() {
    const cards = $('#devices .cards');
    cards.replaceChildren(...[...data.devices.values()].map(renderDevice));
    sectionNotes('devices', { empty: data.devices.size === 0 });
    const list = $('#device-ids');
    list.replaceChildren(...[...data.devices.keys()].map((id) => el('option', { value: id })));
  }

  function updateDevice(id, change) {
    const d = data.devices.get(id);
    if (!d) {
      wantRefresh('devices');
      return;
    }
    change(d);
    // A sleepy device's lease changes with what it sends, and no event
    // says so: ask for it.
    if (d.sleepy) wantRefresh('devices');
    const old = $('#devices .card[data-device="' + CSS.escape(id) + '"]');
    if (old) old.replaceWith(renderDevice(d));
    else renderDevices();
  }

  function opTime(o) {
    const t = Date.parse(o.accepted_at || o.first_at || o.at || '');
    return isNaN(t) ? 0 : t;
  }

  function sortedOps() {
    return [...data.ops.values()].sort((a, b) => {
      const pa = TERMINAL.has(a.status) ? 1 : 0;
      const pb = TERMINAL.has(b.status) ? 1 : 0;
      return pa - pb || opTime(b) - opTime(a);
    });
  }

  function renderOps() {
    const ops = sortedOps();
    // Keep the newest MAX_OPS; a pending op is never dropped.
    for (const o of ops.slice(MAX_OPS)) if (TERMINAL.has(o.status)) data.ops.delete(o.op_id);
    const body = $('#ops tbody');
    body.replaceChildren();
    for (const o of ops) {
      if (!data.ops.has(o.op_id)) continue;
      const pending = !TERMINAL.has(o.status);
      body.append(el('tr', { 'data-op': o.op_id, class: pending ? 'pending' : '' },
        timeCell('Accepted', o.accepted_at || o.first_at),
        td('op_id', o.op_id, 'mono'),
        td('Device', o.device),
        td('Target', compact(o.target), 'mono target'),
        td('Status', badge(o.status), 'status'),
        td('Attempts', o.attempts ?? 0, 'attempts'),
        td('Reason', o.reason ? o.reason + (o.detail ? ': ' + o.detail : '') : ''),
        timeCell('Updated', o.at)));
    }
    sectionNotes('ops', { empty: data.ops.size === 0 });

    const failures = $('#failures tbody');
    failures.replaceChildren();
    const failed = [...data.ops.values()].filter((o) => FAILED.has(o.status))
      .sort((a, b) => (Date.parse(b.at) || 0) - (Date.parse(a.at) || 0)).slice(0, 20);
    for (const o of failed) {
      failures.append(el('tr', { 'data-op': o.op_id },
        timeCell('When', o.at),
        td('Device', o.device),
        td('op_id', o.op_id, 'mono'),
        td('Status', badge(o.status), 'status'),
        td('Reason', o.reason),
        td('Detail', o.detail)));
    }
    sectionNotes('failures', { empty: failed.length === 0 });
  }

  // upsertOp merges an op (GET /api/v1/ops) or a result (events, POST)
  // into the page's list. A result older than the one held is ignored.
  //
  // A stored op waiting for a sleepy device reads accepted where its last
  // result said queued: a status earlier in a command's life (accepted,
  // queued, then terminal) is taken only from a later record.
  function upsertOp(r) {
    if (!r || !r.op_id) return;
    const old = data.ops.get(r.op_id);
    if (old) {
      if (TERMINAL.has(old.status) && !TERMINAL.has(r.status)) return; // late interim result
      const was = Date.parse(old.at);
      const now = Date.parse(r.at);
      if (was > now) return;
      if (was === now && stage(r.status) < stage(old.status)) return;
    }
    const merged = { ...(old || { first_at: r.at }), ...r };
    data.ops.set(r.op_id, merged);
  }

  // stage orders statuses along a command's life.
  function stage(status) {
    if (TERMINAL.has(status)) return 2;
    return status === 'queued' ? 1 : 0;
  }

  function renderDeadLetters() {
    const body = $('#deadletters tbody');
    body.replaceChildren();
    for (const d of data.deadLetters) {
      body.append(el('tr', { 'data-seq': d.seq },
        td('#', d.seq),
        timeCell('Ended', d.updated_at),
        td('Device', d.device),
        td('op_id', d.op_id, 'mono'),
        td('Target', compact(d.target), 'mono target'),
        td('Status', badge(d.status), 'status'),
        td('Reason', d.reason ? d.reason + (d.detail ? ': ' + d.detail : '') : '')));
    }
    sectionNotes('deadletters', { empty: data.deadLetters.length === 0 });
  }

  function auditWhat(e) {
    switch (e.event) {
      case 'check': return `${e.check || 'check'} ${e.passed ? 'passed' : 'failed'} (attempt ${e.attempt || '?'})`;
      case 'sent': return `sent, attempt ${e.attempt || '?'}`;
      case 'ended':
      case 'rejected': return `${e.event}: ${e.status || ''}${e.reason ? ' ' + e.reason : ''}`;
      case 'accepted': return 'accepted' + (e.action ? ': ' + e.action : '');
      default: return e.event || '';
    }
  }

  function renderAudit() {
    const body = $('#audit tbody');
    body.replaceChildren();
    for (const e of data.audit) {
      const what = el('span', { text: auditWhat(e) });
      if (e.event === 'check') what.className = e.passed ? 'ok' : 'bad';
      body.append(el('tr', { 'data-seq': e.seq },
        td('#', e.seq),
        timeCell('When', e.at),
        td('Device', e.device),
        td('op_id', e.op_id, 'mono'),
        td('Principal', e.principal),
        td('Event', what, 'event'),
        td('Detail', e.detail)));
    }
    sectionNotes('audit', { empty: data.audit.length === 0 });
  }

  // ---- loading ----

  const loaders = {
    async devices(gen) {
      const from = heard.begin();
      try {
        const body = await getJSON('/api/v1/devices');
        if (gen !== session) return;
        data.devices = new Map((body.devices || []).map((d) => [d.id, d]));
        for (const e of heard.since(from)) applyToDevices(e.type, e.v);
        renderDevices();
      } finally {
        heard.end();
      }
    },
    async breakers(gen) {
      const from = heard.begin();
      try {
        const body = await getJSON('/api/v1/breakers');
        if (gen !== session) return;
        data.breakers = new Map((body.breakers || []).map((b) => [b.service, b]));
        for (const e of heard.since(from)) applyToBreakers(e.type, e.v);
        renderBreakers();
      } finally {
        heard.end();
      }
    },
    async ops(gen) {
      const [recent, pending] = await Promise.all([
        getJSON('/api/v1/ops?limit=50'),
        getJSON('/api/v1/ops?status=pending&limit=' + MAX_OPS),
      ]);
      if (gen !== session) return;
      data.opsListed = true;
      for (const o of [...(pending.ops || []), ...(recent.ops || [])]) upsertOp(o);
      renderOps();
    },
    async deadletters(gen) {
      const body = await getJSON('/api/v1/deadletters?newest=true&limit=20');
      if (gen !== session) return;
      data.deadLetters = (body.dead_letters || []).slice().reverse();
      renderDeadLetters();
    },
    async audit(gen) {
      const body = await getJSON('/api/v1/audit?newest=true&limit=30');
      if (gen !== session) return;
      data.audit = (body.entries || []).slice().reverse();
      renderAudit();
    },
  };

  // load runs the named loaders; a section whose endpoint fails says so
  // and the others still show. It throws AuthError on a 401.
  async function load(names) {
    const gen = session;
    const results = await Promise.allSettled(names.map((n) => loaders[n](gen)));
    if (gen !== session) return false;
    let ok = false;
    results.forEach((r, i) => {
      const id = names[i] === 'breakers' ? 'services' : names[i];
      if (r.status === 'fulfilled') {
        ok = true;
        sectionNotes(id, { error: null });
      } else if (!(r.reason instanceof AuthError)) {
        sectionNotes(id, { error: r.reason });
      }
    });
    if (results.some((r) => r.reason instanceof AuthError)) throw new AuthError('unauthorized');
    if (ok) showData();
    // Ops the server does not list (GET /api/v1/ops missing): ask for
    // each pending one the page knows.
    if (!data.opsListed) await refreshPendingOps();
    return ok;
  }

  const loadAll = () => load(Object.keys(loaders));

  async function refreshPendingOps() {
    const gen = session;
    const pending = [...data.ops.values()].filter((o) => !TERMINAL.has(o.status));
    await Promise.allSettled(pending.map(async (o) => {
      const r = await getJSON('/api/v1/ops/' + encodeURIComponent(o.op_id));
      if (gen === session) upsertOp(r);
    }));
    if (pending.length && gen === session) renderOps();
  }

  // wantRefresh asks for a reload of some sections soon, once for a burst
  // of events.
  function wantRefresh(...names) {
    for (const n of names) refreshWanted.add(n);
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = 0;
      const names = [...refreshWanted];
      refreshWanted = new Set();
      load(names).catch(() => {});
    }, 300);
  }

  // ---- live updates ----

  // SSEParser reads a text/event-stream (WHATWG HTML, "Server-sent
  // events", 9.2.6) from text chunks and calls onEvent(type, data) for
  // each event; comments (": keepalive") call onComment.
  class SSEParser {
    constructor(onEvent, onComment) {
      this.onEvent = onEvent;
      this.onComment = onComment || (() => {});
      this.buf = '';
      this.type = '';
      this.data = [];
    }
    push(chunk) {
      this.buf += chunk;
      for (;;) {
        const m = /\r\n|\r|\n/.exec(this.buf);
        if (!m) break;
        // A lone \r at the end may be half of \r\n: wait for more.
        if (m[0] === '\r' && m.index === this.buf.length - 1) break;
        const line = this.buf.slice(0, m.index);
        this.buf = this.buf.slice(m.index + m[0].length);
        this.line(line);
      }
    }
    line(line) {
      if (line === '') {
        if (this.data.length) this.onEvent(this.type || 'message', this.data.join('\n'));
        this.type = '';
        this.data = [];
        return;
      }
      if (line[0] === ':') {
        this.onComment(line.slice(1).trim());
        return;
      }
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'event') this.type = value;
      else if (field === 'data') this.data.push(value);
      // id and retry: the page reloads what it missed instead.
    }
  }

  // heard keeps the device and breaker events that arrive while a GET of
  // /api/v1/devices or /api/v1/breakers is out. The answer may have been
  // read before such an event happened, so the loader applies them again
  // on top of it; the stream delivers events in order, so replaying them
  // in order ends at the newest state. Nothing is kept while no read is out.
  const heard = {
    log: [],
    seq: 0,
    reading: 0,
    begin() {
      this.reading++;
      return this.seq;
    },
    note(type, v) {
      this.seq++;
      if (this.reading) this.log.push({ seq: this.seq, type, v });
    },
    since(from) {
      return this.log.filter((e) => e.seq > from);
    },
    end() {
      if (--this.reading === 0) this.log = [];
    },
  };

  // applyToDevices applies a state, availability or breaker event to the
  // devices shown and says whether it changed any.
  function applyToDevices(type, v) {
    if (type === 'breaker') {
      let changed = false;
      for (const d of data.devices.values()) {
        if (d.service === v.service && d.breaker) {
          d.breaker = v.to;
          changed = true;
        }
      }
      return changed;
    }
    const d = data.devices.get(v.device);
    if (!d) return false;
    if (type === 'state') d.state = v.state;
    else if (type === 'availability') d.availability = v.online ? 'online' : 'offline';
    return true;
  }

  // applyToBreakers applies a breaker event to the services shown and
  // says whether it changed one.
  function applyToBreakers(type, v) {
    const b = type === 'breaker' && data.breakers.get(v.service);
    if (!b) return false;
    b.state = v.to;
    b.since = v.at;
    return true;
  }

  function onEvent(type, text) {
    let v;
    try { v = JSON.parse(text); } catch (_) { return; }
    switch (type) {
      case 'result':
        upsertOp(v);
        renderOps();
        wantRefresh('devices', 'deadletters', 'audit');
        break;
      case 'state':
      case 'availability':
        if (!v || !v.device) break;
        heard.note(type, v);
        updateDevice(v.device, () => applyToDevices(type, v));
        break;
      case 'breaker': {
        if (!v || !v.service) break;
        heard.note(type, v);
        if (applyToBreakers(type, v)) renderBreakers();
        if (applyToDevices(type, v)) renderDevices();
        wantRefresh('breakers');
        break;
      }
      default:
        break;
    }
  }

  function setConn(state, text) {
    const c = $('#conn');
    c.setAttribute('data-state', state);
    c.textContent = text;
  }

  // follow reads the event stream until it ends or fails.
  async function follow(gen) {
    streamAbort = new AbortController();
    const abort = streamAbort;
    let idle = 0;
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => abort.abort(), STREAM_IDLE_MS);
    };
    try {
      const resp = await api('/api/v1/events', { signal: abort.signal, headers: { Accept: 'text/event-stream' } });
      const type = resp.headers.get('Content-Type') || '';
      if (!resp.ok || !resp.body || !type.startsWith('text/event-stream')) {
        let body = null;
        try { body = await resp.json(); } catch (_) { /* not JSON */ }
        throw new HTTPError(resp.status, body && body.error, body && body.detail);
      }
      if (gen !== session) return;
      touch();
      setConn('live', 'live');
      stopPolling();
      backoff = BACKOFF_MIN_MS;
      // Catch up on what happened while the stream was down.
      loadAll().catch(() => {});
      const parser = new SSEParser(onEvent);
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done || gen !== session) break;
        touch();
        parser.push(value);
      }
      throw new Error('the event stream ended');
    } finally {
      clearTimeout(idle);
      abort.abort();
    }
  }

  // stream follows the event stream, reconnecting with full-jitter
  // backoff, and polls while it is down.
  async function stream(gen) {
    while (gen === session) {
      try {
        await follow(gen);
      } catch (err) {
        if (err instanceof AuthError || gen !== session) return;
        startPolling();
        const wait = Math.round(BACKOFF_MIN_MS / 2 + Math.random() * backoff);
        setConn(data.opsListed || data.devices.size ? 'polling' : 'offline',
          'polling; stream ' + (err instanceof HTTPError ? err.message : 'down') + ', retry in ' + Math.ceil(wait / 1000) + ' s');
        await new Promise((res) => setTimeout(res, wait));
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      }
    }
  }

  function startPolling() {
    if (pollTimer) return;
    pollTimer = setInterval(() => { loadAll().catch(() => {}); }, POLL_MS);
  }

  function stopPolling() {
    clearInterval(pollTimer);
    pollTimer = 0;
  }

  // ---- sessions: token, data shown or not ----

  function showData() {
    $('#login').hidden = true;
    $('#data').hidden = false;
    $('#signout').hidden = !token;
  }

  function clearData() {
    data.devices = new Map();
    data.breakers = new Map();
    data.ops = new Map();
    data.deadLetters = [];
    data.audit = [];
    data.opsListed = false;
    for (const body of document.querySelectorAll('#data tbody, #data .cards, #device-ids')) body.replaceChildren();
    $('#cmd-result').textContent = '';
    $('#data').hidden = true;
  }

  function stop() {
    session++;
    if (streamAbort) streamAbort.abort();
    stopPolling();
    clearTimeout(refreshTimer);
    refreshTimer = 0;
    refreshWanted = new Set();
  }

  // needToken shows the token prompt and no data.
  function needToken(msg) {
    stop();
    clearData();
    if (token) sessionStorage.removeItem(TOKEN_KEY);
    token = '';
    const m = $('#login-msg');
    m.textContent = msg || loginMsg;
    m.className = msg ? 'refused' : '';
    $('#login').hidden = false;
    $('#signout').hidden = true;
    setConn('signed-out', 'token needed');
    $('#token').focus();
  }

  async function start() {
    stop();
    const gen = session;
    setConn('connecting', 'connecting…');
    try {
      await loadAll();
    } catch (err) {
      if (err instanceof AuthError) return;
    }
    if (gen !== session) return;
    stream(gen);
  }

  // ---- the command form ----

  async function send(ev) {
    ev.preventDefault();
    const out = $('#cmd-result');
    const device = $('#cmd-device').value.trim();
    let payload = $('#cmd-payload').value.trim();
    const opID = $('#cmd-op').value.trim();
    out.className = 'note';
    if (opID) {
      // The op_id is a key of the JSON form; a plain string is the state.
      let obj;
      try { obj = JSON.parse(payload); } catch (_) { obj = { state: payload }; }
      if (!obj || typeof obj !== 'object' || Array.isArray(obj)) obj = { state: payload };
      obj.op_id = opID;
      payload = JSON.stringify(obj);
    }
    let body = null;
    try {
      const resp = await api('/api/v1/devices/' + encodeURIComponent(device) + '/commands', {
        method: 'POST',
        headers: { 'Content-Type': payload.startsWith('{') ? 'application/json' : 'text/plain' },
        body: payload,
      });
      try { body = await resp.json(); } catch (_) { /* not JSON */ }
      if (body && body.op_id && body.status) {
        upsertOp(body);
        renderOps();
        out.setAttribute('data-op', body.op_id);
        out.textContent = `${body.op_id}: ${body.status}${body.reason ? ' (' + body.reason + (body.detail ? ': ' + body.detail : '') + ')' : ''}`;
        if (body.status === 'rejected') out.className = 'note error';
        if (!TERMINAL.has(body.status) && !streamLive()) watchOp(body.op_id, session);
      } else {
        out.removeAttribute('data-op');
        out.className = 'note error';
        out.textContent = body && body.error ? `${resp.status} ${body.error}${body.detail ? ': ' + body.detail : ''}` : 'HTTP ' + resp.status;
      }
    } catch (err) {
      if (err instanceof AuthError) return;
      out.className = 'note error';
      out.textContent = 'not sent: ' + err.message;
    }
  }

  function streamLive() {
    return $('#conn').getAttribute('data-state') === 'live';
  }

  // watchOp follows one op by long polls while the event stream is down.
  async function watchOp(opID, gen) {
    for (let i = 0; i < 30 && gen === session && !streamLive(); i++) {
      let r;
      try {
        r = await getJSON('/api/v1/ops/' + encodeURIComponent(opID) + '?wait=10s');
      } catch (err) {
        if (err instanceof AuthError) return;
        await new Promise((res) => setTimeout(res, POLL_MS));
        continue;
      }
      if (gen !== session) return;
      upsertOp(r);
      renderOps();
      if (TERMINAL.has(r.status)) {
        wantRefresh('devices', 'deadletters', 'audit');
        return;
      }
    }
  }

  let loginMsg = '';

  document.addEventListener('DOMContentLoaded', () => {
    loginMsg = $('#login-msg').textContent;
    $('#login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('#token').value.trim();
      if (!t) return;
      token = t;
      sessionStorage.setItem(TOKEN_KEY, t);
      $('#token').value = '';
      start();
    });
    $('#signout').addEventListener('click', () => needToken('Token forgotten. Give one to see the status again.'));
    $('#cmd-form').addEventListener('submit', send);
    start();
  });

  // For tests in a browser: the parser, alone.
  window.HearthSSEParser = SSEParser;
})();
