'use strict';
// The leafd dashboard: polls api/state and updates the page in place. Plain
// JavaScript, no build step, nothing fetched from anywhere else.
(() => {
  const params = new URLSearchParams(location.search);
  // ?poll=ms changes the refresh interval (250 ms to 10 s; default 1 s).
  const POLL = Math.min(10000, Math.max(250, Number(params.get('poll')) || 1000));
  const HISTORY = 90; // sparkline points kept per series
  const $ = (id) => document.getElementById(id);
  const nf = new Intl.NumberFormat('en-US');

  // IDs may pass 2^53, where a JavaScript number loses digits: keep the
  // exact decimal text of such numbers, where the browser offers it.
  function reviver(key, value, ctx) {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && Number.isInteger(value) &&
        ctx && typeof ctx.source === 'string' && /^-?\d+$/.test(ctx.source)) {
      return BigInt(ctx.source);
    }
    return value;
  }

  // ---- formatting ---------------------------------------------------------
  const fmtNum = (v) => (typeof v === 'bigint' ? v.toLocaleString('en-US') : nf.format(v));
  // The last ID of a range that ends (exclusive) at v with IDs step apart
  // (1, or S with store.shards); v may be a BigInt past 2^53.
  const lastID = (v, step) => (typeof v === 'bigint' ? v - BigInt(step || 1) : v - (step || 1));

  // domainOf sums up an opaque tag's domain, or a dated tag's current
  // period (null for a sequential tag): its label, its size, the fractions
  // used and reserved, the IDs left (a BigInt: a domain of 18 digits passes
  // 2^53) and a tone once most of it is gone.
  function domainOf(t) {
    let label, size, gone, reserved;
    if (t.domain) {
      [label, size, gone, reserved] = ['Opaque domain', t.domain, t.domain_used, t.domain_reserved];
    } else if (t.period) {
      [label, size, gone, reserved] = ['Period ' + t.period, t.period_capacity, t.period_used, 0];
    } else {
      return null;
    }
    const n = Number(size), used = Number(gone) / n, res = Number(reserved) / n;
    const left = BigInt(size) - BigInt(gone) - BigInt(reserved);
    return { label, size, used, reserved: res, left, tone: used + res >= 0.99 ? 'bad' : used + res >= 0.8 ? 'warn' : '' };
  }
  const fmtPct = (f) => (f > 0 && f < 0.001 ? '<0.1' : (f * 100).toFixed(1)) + '%';

  function fmtDur(ms) {
    ms = Math.max(0, ms);
    if (ms < 1000) return Math.round(ms) + ' ms';
    const s = ms / 1000;
    if (s < 60) return (s < 10 && !Number.isInteger(s) ? s.toFixed(1) : Math.floor(s)) + ' s';
    const m = Math.floor(s / 60), sec = Math.floor(s % 60);
    if (m < 60) return sec ? `${m}m ${String(sec).padStart(2, '0')}s` : `${m}m`;
    const h = Math.floor(m / 60);
    if (h < 48) return m % 60 ? `${h}h ${String(m % 60).padStart(2, '0')}m` : `${h}h`;
    return `${Math.floor(h / 24)}d ${h % 24}h`;
  }

  // fmtAgo is fmtDur's short form, for a narrow column: one unit.
  function fmtAgo(ms) {
    const s = Math.max(0, ms) / 1000;
    if (s < 1) return 'just now';
    if (s < 60) return Math.floor(s) + 's ago';
    if (s < 3600) return Math.floor(s / 60) + 'm ago';
    if (s < 48 * 3600) return Math.floor(s / 3600) + 'h ago';
    return Math.floor(s / 86400) + 'd ago';
  }

  function fmtTime(ms, now) {
    const iso = new Date(ms).toISOString();
    const sameDay = iso.slice(0, 10) === new Date(now).toISOString().slice(0, 10);
    return (sameDay ? '' : iso.slice(0, 10) + ' ') + iso.slice(11, 19) + ' UTC';
  }

  function fmtRate(r) {
    if (r == null || !isFinite(r)) return '–';
    if (r < 10) return (Math.round(r * 10) / 10).toFixed(r === 0 ? 0 : 1);
    if (r < 10000) return nf.format(Math.round(r));
    return (Math.round(r / 100) / 10).toFixed(1) + 'k';
  }

  function setRate(el, r) {
    el.replaceChildren(fmtRate(r));
    const unit = document.createElement('small');
    unit.textContent = '/s';
    el.append(unit);
  }

  function tone(el, t) {
    if (t) el.dataset.tone = t; else delete el.dataset.tone;
  }

  // ---- rates, measured from successive polls ------------------------------
  const series = new Map();

  // track records the issued counter of key at server time now and returns
  // the rate since the previous poll (null on the first).
  function track(key, now, issued) {
    let s = series.get(key);
    if (!s || issued < s.n) {
      series.set(key, { t: now, n: issued, rates: [] });
      return null;
    }
    const dt = (now - s.t) / 1000;
    if (dt <= 0) return s.rates.length ? s.rates[s.rates.length - 1] : null;
    const r = (issued - s.n) / dt;
    s.t = now;
    s.n = issued;
    s.rates.push(r);
    if (s.rates.length > HISTORY) s.rates.shift();
    return r;
  }

  // grew reports whether the counter key rose within the last minute that
  // this page watched: waits and errors then stand out, while the counts
  // of long ago (every tag's first request waits) stay calm.
  const changes = new Map();
  function grew(key, now, value) {
    const c = changes.get(key);
    if (!c || value < c.value) {
      changes.set(key, { value, at: -Infinity });
      return false;
    }
    if (value > c.value) changes.set(key, { value, at: now });
    return now - changes.get(key).at < 60000;
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function spark(svg, key) {
    const rates = (series.get(key) || { rates: [] }).rates;
    // Right-aligned; until a third of the history has been seen, the
    // points spread wider so that a new page does not show a sliver.
    const W = 120, H = 28, step = W / (Math.max(rates.length, HISTORY / 3) - 1);
    const max = Math.max(1, ...rates);
    const pts = rates.map((r, i) => [W - (rates.length - 1 - i) * step, H - 1 - (r / max) * (H - 3)]);
    if (pts.length === 1) pts.unshift([pts[0][0] - step, pts[0][1]]);
    if (pts.length === 0) pts.push([W - step, H - 1], [W, H - 1]);
    const line = pts.map((p) => p[0].toFixed(1) + ',' + p[1].toFixed(1)).join(' ');
    const area = document.createElementNS(SVG, 'polygon');
    area.setAttribute('class', 'area');
    area.setAttribute('points', `${pts[0][0].toFixed(1)},${H} ${line} ${W},${H}`);
    const poly = document.createElementNS(SVG, 'polyline');
    poly.setAttribute('class', 'line');
    poly.setAttribute('points', line);
    svg.replaceChildren(area, poly);
  }

  // ---- store ---------------------------------------------------------------
  function renderStore(store, now) {
    const chip = $('store-chip');
    chip.hidden = !store;
    $('store-banner').hidden = !store || store.ok;
    document.body.dataset.store = store ? (store.ok ? 'ok' : 'down') : 'none';
    if (!store) return;
    chip.dataset.ok = String(store.ok);
    let text = `${store.driver} · ${store.ok ? 'healthy' : 'unreachable'}`;
    if (store.shards) {
      // store.shards: how many databases serve, and each one's slots in
      // the chip's tooltip.
      const up = store.shards.filter((s) => s.up).length;
      text += ` · ${up} of ${store.shards.length} shard databases up`;
      chip.dataset.fallback = String(up < store.shards.length);
      $('store-text').textContent = text;
      chip.title = store.shards.map((s) =>
        `#${s.index} ${s.address} ${s.up ? 'up' : 'passed over'}: slots ${s.slots.join(',') || 'none'}`).join('\n');
    } else if (store.address) {
      // A MySQL store: which address of store.dsn + store.fallback_dsns it
      // uses, and how often it moved between them.
      text += ` · ${store.address}`;
      if (store.addresses > 1) {
        text += store.address_index === 0 ? ' (first of ' + store.addresses + ')'
          : ` (fallback ${store.address_index} of ${store.addresses - 1})`;
      }
      if (store.switches) {
        const ago = store.last_switch ? ` ${fmtDur(now - Date.parse(store.last_switch))} ago` : '';
        text += ` · ${store.switches} switch${store.switches === 1 ? '' : 'es'}, last${ago}`;
      }
    }
    if (!store.shards) {
      $('store-text').textContent = text;
      chip.title = store.last_switch_reason ? 'last switch: ' + store.last_switch_reason : '';
      chip.dataset.fallback = String(!!store.address_index);
    }
    if (!store.ok) {
      const age = store.checked_at ? now - Date.parse(store.checked_at) : -1;
      const checked = age < 0 ? '' : age < 1000 ? ' (checked just now)' : ` (checked ${fmtDur(age)} ago)`;
      $('store-error').textContent = (store.error || 'the ping failed') + checked;
    }
  }

  // ---- snowflake -------------------------------------------------------------
  function renderSnowflake(sf, now) {
    const panel = $('snowflake');
    $('sf-off').hidden = !!sf;
    $('sf-facts').hidden = !sf;
    panel.querySelector('.rate').hidden = !sf;
    if (!sf) { $('sf-error').hidden = true; return; }
    const f = (name) => panel.querySelector(`[data-field="${name}"]`);

    const worker = f('worker_id');
    const ids = sf.worker_ids || [];
    f('worker_label').textContent = ids.length > 1 ? 'Worker ids' : 'Worker id';
    worker.textContent = sf.worker_id == null ? 'none' : ids.length > 1 ? ids.join(', ') : String(sf.worker_id);
    tone(worker, sf.worker_id == null ? 'bad' : '');
    f('worker_source').textContent = sf.worker_source === 'lease' ? 'leased from the store' : 'static (snowflake.worker_id)';

    const lease = f('lease');
    if (sf.lease_until) {
      const until = Date.parse(sf.lease_until), left = until - now;
      lease.textContent = left > 0 ? `expires in ${fmtDur(left)}` : `expired ${fmtDur(-left)} ago`;
      tone(lease, left <= 0 ? 'bad' : left < 5000 ? 'warn' : 'ok');
      f('lease_at').textContent = 'until ' + fmtTime(until, now);
    } else {
      lease.textContent = sf.worker_source === 'lease' ? 'not held' : 'no lease';
      tone(lease, sf.worker_source === 'lease' ? 'bad' : '');
      f('lease_at').textContent = sf.worker_source === 'lease' ? 'waiting for a free worker id' : 'a fixed worker id is not leased';
    }

    if (sf.last_ms > 0) {
      f('last').textContent = fmtTime(sf.last_ms, now);
      f('last_ago').textContent = fmtDur(now - sf.last_ms) + ' ago';
    } else {
      f('last').textContent = 'none yet';
      f('last_ago').textContent = '';
    }
    const back = f('backward_events');
    back.textContent = fmtNum(sf.backward_events);
    tone(back, grew('backward', now, sf.backward_events) ? 'bad' : sf.backward_events > 0 ? 'warn' : '');
    f('issued').textContent = fmtNum(sf.issued);
    f('renewals').textContent = fmtNum(sf.renewals);

    // Borrowing (snowflake.max_borrow): how far the last ID is ahead of the
    // clock now, the milliseconds borrowed in all and the largest lead.
    const lead = f('lead');
    if (!sf.max_borrow_ms) {
      lead.textContent = 'off';
      f('borrowed').textContent = 'snowflake.max_borrow is 0';
      tone(lead, '');
    } else {
      lead.textContent = `${fmtNum(sf.lead_ms)} ms ahead`;
      f('borrowed').textContent = `${fmtNum(sf.borrowed_ms)} ms borrowed · peak ${fmtNum(sf.max_lead_ms)} of ${fmtNum(sf.max_borrow_ms)} ms`;
      tone(lead, sf.lead_ms >= sf.max_borrow_ms ? 'warn' : '');
    }

    const err = $('sf-error');
    err.hidden = !sf.error;
    err.textContent = sf.error ? 'lease: ' + sf.error : '';

    const r = track('snowflake', now, sf.issued);
    setRate($('sf-rate'), r);
    spark($('sf-spark'), 'snowflake');
  }

  // ---- segment: the card of one tag ----------------------------------------------

  function bufferState(b) {
    if (b.loading) return 'loading';
    if (b.ready) return 'ready';
    return b.size > 0 ? 'used' : 'empty';
  }
  const bufferLabel = { ready: 'ready', loading: 'loading…', used: 'used up', empty: 'empty' };

  // cause words a tag's last load failure: a rewound tag (error_code
  // tag_rewound, whose message gives the UPDATE that repairs it) and a row
  // lock that outlasted the database's lock wait are named as such; any
  // other failure is "last load failed".
  function cause(t) {
    if (!t.error) return null;
    if (t.error_code === 'tag_rewound') return { kind: 'rewound', short: 'rewound', text: 'rewound: ' + t.error };
    if (/lock wait timeout|lock_timeout|row is locked/i.test(t.error)) {
      return { kind: 'locked', short: 'row locked', text: 'row locked (lock wait timeout): ' + t.error };
    }
    return { kind: 'failed', short: 'load failing', text: 'last load failed: ' + t.error };
  }

  function tagStatus(t) {
    const hasIDs = t.buffers[0].ready || t.buffers[1].ready;
    const why = cause(t);
    if (hasIDs) {
      if (why) return ['degraded', 'serving · ' + why.short];
      if (t.loading) return ['loading', 'serving · loading next'];
      return ['serving', t.buffers[1 - t.current].ready ? 'serving · next ready' : 'serving'];
    }
    if (why && why.kind !== 'failed') return ['failing', 'empty · ' + why.short];
    if (why) return ['failing', t.loading ? 'empty · load failing' : 'empty · failed'];
    if (t.loading) return ['loading', 'loading first range'];
    if (t.loads === 0) return ['idle', 'idle · loads on first request'];
    return ['empty', 'empty'];
  }

  function newCard(name) {
    const el = $('tag-template').content.firstElementChild.cloneNode(true);
    el.dataset.tag = name;
    el.querySelector('.tag-name').textContent = name;
    return el;
  }

  // position maps a duration onto the lifetime scale: a log scale from a
  // tenth of the window's start to three times its end.
  function position(ms, lo, hi) {
    const a = Math.log(lo / 10), b = Math.log(hi * 3);
    return Math.min(1, Math.max(0, (Math.log(Math.max(ms, 1)) - a) / (b - a)));
  }

  function renderTag(el, t, seg, now) {
    const [status, label] = tagStatus(t);
    const chip = el.querySelector('.tag-status');
    chip.dataset.status = status === 'degraded' ? 'failing' : status;
    chip.textContent = label;
    el.dataset.status = status;

    const lowNext = !t.buffers[1 - t.current].ready;
    t.buffers.forEach((b, i) => {
      const row = el.querySelector(`[data-buffer="${i}"]`);
      const state = bufferState(b);
      const current = i === t.current;
      row.dataset.state = state;
      row.dataset.current = String(current);
      row.querySelector('.buf-state').textContent = bufferLabel[state];
      const frac = b.size > 0 ? b.used / b.size : 0;
      const bar = row.querySelector('.bar');
      bar.setAttribute('aria-valuenow', String(Math.round(frac * 100)));
      bar.setAttribute('aria-label', `buffer ${i ? 'B' : 'A'}: ${Math.round(frac * 100)}% used`);
      row.querySelector('.fill').style.width = (frac * 100).toFixed(2) + '%';
      row.dataset.low = String(current && b.ready && frac > 0.9 && lowNext);
      const range = row.querySelector('.range');
      if (b.size > 0) {
        range.textContent = `${fmtNum(b.start)} – ${fmtNum(lastID(b.end, b.stride))}`;
        range.title = `[${b.start}, ${b.end}): ${fmtNum(b.size)} IDs` + (b.stride > 1 ? `, every ${b.stride}th` : '');
      } else {
        range.textContent = state === 'loading' ? 'range on its way' : 'no range';
        range.title = '';
      }
      const next = row.querySelector('.next');
      next.textContent = b.ready ? `next ${fmtNum(b.next)}` : '';
      next.dataset.value = b.ready ? String(b.next) : '';
      row.querySelector('.pct').textContent = b.size > 0 ? `${(frac * 100).toFixed(frac < 0.1 && frac > 0 ? 2 : 1)}% used` : '';
    });

    // How long the last range lasted against the refill window.
    const lo = seg.refill_min_ms, hi = seg.refill_max_ms, p = t.last_period_ms;
    const lasted = el.querySelector('.lasted');
    const mark = el.querySelector('.mark');
    const verdict = el.querySelector('.verdict');
    if (p > 0) {
      lasted.textContent = `Last range lasted ${fmtDur(p)}`;
      verdict.textContent = p < lo ? 'shorter: the step grows' : p > hi ? 'longer: the step shrinks' : 'inside';
      tone(verdict, p < lo || p > hi ? 'warn' : 'ok');
      mark.hidden = false;
      mark.style.left = (position(p, lo, hi) * 100).toFixed(1) + '%';
      tone(mark, p < lo || p > hi ? 'warn' : '');
    } else {
      lasted.textContent = t.loads > 0 ? 'One range loaded so far' : 'No range loaded yet';
      verdict.textContent = '';
      mark.hidden = true;
    }
    el.querySelector('.window-range').textContent = `refill window ${fmtDur(lo)} – ${fmtDur(hi)}`;
    const band = el.querySelector('.band');
    const b0 = position(lo, lo, hi), b1 = position(hi, lo, hi);
    band.style.left = (b0 * 100).toFixed(1) + '%';
    band.style.width = ((b1 - b0) * 100).toFixed(1) + '%';

    const f = (name) => el.querySelector(`[data-field="${name}"]`);
    f('step').textContent = t.step > 0 ? fmtNum(t.step) : '–';
    const ratio = t.step > 0 && t.min_step > 0 && t.step !== t.min_step ? ` (×${fmtRate(t.step / t.min_step)})` : '';
    f('min_step').textContent = `table ${fmtNum(t.min_step)}${ratio}`;
    const last = f('last_load');
    if (t.last_load) {
      const at = Date.parse(t.last_load);
      last.textContent = fmtDur(now - at) + ' ago';
      last.title = fmtTime(at, now);
    } else {
      last.textContent = 'never';
      last.title = '';
    }
    f('issued').textContent = fmtNum(t.issued);
    const waits = f('waits');
    waits.textContent = fmtNum(t.waits);
    tone(waits, grew('waits:' + t.tag, now, t.waits) ? 'warn' : '');
    const errors = f('errors');
    const refused = t.token_refusals || 0; // requests refused for their access token
    errors.textContent = fmtNum(t.errors) + (t.load_errors > 0 ? ` · ${fmtNum(t.load_errors)} loads` : '') +
      (refused > 0 ? ` · ${fmtNum(refused)} token refusals` : '');
    errors.title = `${t.errors} failed requests, ${t.load_errors} failed range loads` +
      (refused > 0 ? `, ${refused} requests refused for their access token` : '');
    const fresh = grew('errors:' + t.tag, now, t.errors + t.load_errors);
    tone(errors, fresh && t.errors > 0 ? 'bad' : fresh || t.errors > 0 ? 'warn' : '');

    const dom = el.querySelector('.domain');
    const d = domainOf(t);
    dom.hidden = !d;
    if (d) dom.querySelector('.dom-label').textContent = d.label;
    if (d && t.period) {
      const full = t.period_full_at ? ` · full at ${new Date(t.period_full_at).toLocaleTimeString()} at this rate` : '';
      f('domain').textContent = `${fmtPct(d.used)} used · ${fmtNum(d.left)} of ${fmtNum(d.size)} left${full}`;
      f('domain').title = `${t.period_used} numbers of ${t.period} gone (issued, or given up by servers that stopped), ` +
        `of ${t.period_capacity}; the period ends ${new Date(t.period_end).toLocaleString()}`;
    } else if (d) {
      f('domain').textContent = `${fmtPct(d.used)} used · ${fmtPct(d.reserved)} reserved · ${fmtNum(d.left)} of ${fmtNum(t.domain)} left`;
      f('domain').title = `${t.domain_used} IDs gone (issued, or given up by servers that stopped), ` +
        `${t.domain_reserved} in this server's buffers, of IDs 1 to ${t.domain}`;
    }
    if (d) {
      const bar = dom.querySelector('.dom-bar');
      bar.setAttribute('aria-label', `${d.label}: ${fmtPct(d.used)} used, ${fmtPct(d.reserved)} reserved`);
      tone(bar, d.tone);
      bar.querySelector('.dom-used').style.width = (d.used * 100).toFixed(2) + '%';
      bar.querySelector('.dom-res').style.width = (d.reserved * 100).toFixed(2) + '%';
    }

    const err = el.querySelector('.tag-error');
    const why = cause(t);
    err.hidden = !why;
    err.textContent = why ? why.text : '';
    err.dataset.cause = why ? why.kind : '';

    const r = track('tag:' + t.tag, now, t.issued);
    setRate(el.querySelector('.rate-num'), r == null ? t.rate : r);
    spark(el.querySelector('.spark'), 'tag:' + t.tag);
    return r == null ? t.rate : r;
  }

  // ---- the table of tags -----------------------------------------------------
  // Only the page in view is fetched (api/state?offset=&limit=) and in the
  // DOM, so that ten thousand tags cost what fifty do. The server filters,
  // sorts and counts; the page keeps its view in the URL, so that a link to
  // "the failing tags" works.
  const STATES = ['failing', 'waiting', 'loading', 'serving', 'idle'];
  const SORTS = ['problems', 'name', 'rate'];
  const PER = [25, 50, 100, 200];
  const view = {
    q: params.get('q') || '',
    state: STATES.includes(params.get('state')) ? params.get('state') : '',
    sort: SORTS.includes(params.get('sort')) ? params.get('sort') : 'problems',
    per: PER.includes(Number(params.get('per'))) ? Number(params.get('per')) : 50,
    page: Math.max(0, (parseInt(params.get('page'), 10) || 1) - 1),
    // The tag whose card is open; chosen is false while the page chose it
    // (the first row), which then follows the view.
    tag: params.get('tag') || '',
    chosen: !!params.get('tag'),
    closed: false, // the card was closed: open none until a row is clicked
  };
  let gen = 0; // bumped by every change of view: answers to an older one are dropped

  function pageQuery() {
    const p = new URLSearchParams();
    p.set('sort', view.sort);
    if (view.q) p.set('q', view.q);
    if (view.state) p.set('state', view.state);
    p.set('offset', String(view.page * view.per));
    p.set('limit', String(view.per));
    return p.toString();
  }

  // syncURL writes the view into the address bar, defaults left out.
  function syncURL() {
    const p = new URLSearchParams();
    if (params.get('poll')) p.set('poll', params.get('poll'));
    if (view.q) p.set('q', view.q);
    if (view.state) p.set('state', view.state);
    if (view.sort !== 'problems') p.set('sort', view.sort);
    if (view.per !== 50) p.set('per', String(view.per));
    if (view.page > 0) p.set('page', String(view.page + 1));
    if (view.tag && view.chosen) p.set('tag', view.tag);
    const qs = p.toString();
    history.replaceState(null, '', qs ? '?' + qs : location.pathname);
  }

  // change applies a change of view and fetches it at once.
  function change(fn) {
    fn();
    if (!view.chosen) view.tag = ''; // the first row of the new view
    gen++;
    syncURL();
    renderControls();
    refresh();
  }

  function filterLink(a) {
    a.addEventListener('click', (e) => {
      if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return; // a new tab: let it go
      e.preventDefault();
      const f = a.dataset.filter;
      // A count clicked again shows every tag again.
      change(() => { view.state = view.state === f ? '' : f; view.page = 0; });
    });
  }

  function renderControls() {
    for (const a of document.querySelectorAll('#filters [data-filter], #head-counts [data-filter]')) {
      a.setAttribute('aria-current', String(a.dataset.filter === view.state));
    }
    $('head-clear').hidden = !view.state;
    const search = $('search');
    if (document.activeElement !== search) search.value = view.q;
    $('sort').value = view.sort;
    $('per-page').value = String(view.per);
  }

  function setupControls() {
    document.querySelectorAll('[data-filter]').forEach(filterLink);
    let debounce = 0;
    $('search').addEventListener('input', (e) => {
      clearTimeout(debounce);
      const v = e.target.value.trim();
      debounce = setTimeout(() => change(() => { view.q = v; view.page = 0; }), 200);
    });
    $('search').addEventListener('keydown', (e) => {
      if (e.key === 'Escape') { e.target.value = ''; clearTimeout(debounce); change(() => { view.q = ''; view.page = 0; }); }
    });
    $('sort').addEventListener('change', (e) => change(() => { view.sort = e.target.value; view.page = 0; }));
    $('per-page').addEventListener('change', (e) => change(() => {
      const first = view.page * view.per;
      view.per = Number(e.target.value);
      view.page = Math.floor(first / view.per);
    }));
    $('prev').addEventListener('click', () => change(() => { view.page = Math.max(0, view.page - 1); }));
    $('next').addEventListener('click', () => change(() => { view.page++; }));
    $('clear').addEventListener('click', () => change(() => { view.q = ''; view.state = ''; view.page = 0; }));
    const rows = $('rows');
    const pick = (tr) => { if (tr) select(tr.dataset.tag || tr.dataset.for); };
    rows.addEventListener('click', (e) => pick(e.target.closest('tr')));
    rows.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); pick(e.target.closest('tr')); }
    });
    renderControls();
  }

  // select opens the card of tag.
  function select(tag) {
    if (tag !== view.tag) forget(view.tag);
    view.tag = tag;
    view.chosen = true;
    view.closed = false;
    syncURL();
    markSelected();
    const row = lastSeg && lastSeg.tags.find((t) => t.tag === tag);
    if (row) renderDetail(lastSeg, row, lastNow); // at once, from the page's data
    refresh();
  }

  function closeCard() {
    forget(view.tag);
    view.tag = '';
    view.chosen = false;
    view.closed = true;
    syncURL();
    $('detail').replaceChildren();
    markSelected();
  }

  function forget(tag) {
    if (!tag) return;
    series.delete('tag:' + tag);
    changes.delete('waits:' + tag);
    changes.delete('errors:' + tag);
  }

  function markSelected() {
    for (const tr of $('rows').children) tr.setAttribute('aria-selected', String((tr.dataset.tag || tr.dataset.for) === view.tag));
    document.body.dataset.card = view.tag ? 'open' : 'closed';
  }

  const rowEls = new Map();
  const stateLabel = { failing: 'failing', waiting: 'waiting', loading: 'loading', serving: 'serving', idle: 'idle' };

  function renderRow(tr, t, now) {
    tr.dataset.status = t.state;
    const why = cause(t);
    tr.dataset.cause = why ? why.kind : '';
    const st = tr.querySelector('.st');
    // A rewound tag says so in place of its state; a tag that fails for a
    // row lock says that under it.
    st.textContent = why && why.kind === 'rewound' && t.state === 'failing' ? 'rewound' : stateLabel[t.state] || t.state;
    st.dataset.status = t.state;
    st.title = why ? `${t.state}: ${why.text}` : '';
    const wh = tr.querySelector('.why');
    const showWhy = !!why && why.kind !== 'failed' && st.textContent !== why.short;
    wh.hidden = !showWhy;
    wh.textContent = showWhy ? why.short : '';
    // The rate right now, from this page's polls, as the card has it; the
    // server's (since the last load, which sort=rate orders by) until
    // there are two.
    const rate = tr.querySelector('.c-rate');
    const r = track('row:' + t.tag, now, t.issued);
    setRate(rate, r == null ? t.rate : r);
    rate.title = `${fmtRate(t.rate)}/s since the last load`;

    // An opaque tag says under its name how much of its domain is gone, a
    // dated tag how much of its period.
    const dom = tr.querySelector('.dom');
    const d = domainOf(t);
    dom.hidden = !d;
    dom.textContent = d ? `${t.period ? 'period ' + t.period : 'domain'} ${fmtPct(d.used + d.reserved)} taken` : '';
    dom.title = d ? `${fmtPct(d.used)} used, ${fmtPct(d.reserved)} reserved in this server's buffers, ${fmtNum(d.left)} of ${fmtNum(d.size)} left` : '';
    tone(dom, d ? d.tone : '');

    const cur = t.buffers[t.current], next = t.buffers[1 - t.current];
    const frac = cur.size > 0 ? cur.used / cur.size : 0;
    const bars = tr.querySelector('.mini');
    const curBar = bars.querySelector('.cur');
    curBar.dataset.state = bufferState(cur);
    curBar.dataset.low = String(cur.ready && frac > 0.9 && !next.ready);
    curBar.firstChild.style.width = (frac * 100).toFixed(1) + '%';
    const nextBar = bars.querySelector('.nxt');
    nextBar.dataset.state = bufferState(next);
    nextBar.firstChild.style.width = next.ready ? '100%' : '0';
    bars.title = `current: ${cur.size > 0 ? (frac * 100).toFixed(1) + '% of ' + fmtNum(cur.size) + ' used' : bufferLabel[bufferState(cur)]}` +
      ` · next: ${bufferLabel[bufferState(next)]}${next.ready ? ' (' + fmtNum(next.size) + ' IDs)' : ''}`;

    const step = tr.querySelector('.c-step');
    step.textContent = t.step > 0 ? fmtNum(t.step) : '–';
    if (t.step !== t.min_step) {
      // The table step beside this server's, when they differ.
      const table = document.createElement('small');
      table.textContent = '/ ' + fmtNum(t.min_step);
      step.append(table);
    }
    step.title = `step ${t.step > 0 ? fmtNum(t.step) : 'none yet'}, table step ${fmtNum(t.min_step)}`;

    const last = tr.querySelector('.c-last');
    if (t.last_load) {
      const at = Date.parse(t.last_load);
      last.textContent = fmtAgo(now - at);
      last.title = fmtTime(at, now);
    } else {
      last.textContent = 'never';
      last.title = '';
    }
    const we = tr.querySelector('.c-waits');
    we.textContent = `${fmtNum(t.waits)} · ${fmtNum(t.errors + t.load_errors)}`;
    we.title = `${t.waits} requests waited, ${t.errors} failed requests, ${t.load_errors} failed range loads`;
    tone(we, t.errors + t.load_errors > 0 ? (t.state === 'failing' ? 'bad' : 'warn') : '');
  }

  function renderTable(seg, now) {
    const tbody = $('rows');
    const seen = new Set();
    for (const t of seg.tags) {
      seen.add(t.tag);
      let tr = rowEls.get(t.tag);
      if (!tr) {
        tr = $('row-template').content.firstElementChild.cloneNode(true);
        tr.dataset.tag = t.tag;
        tr.querySelector('.tname').textContent = t.tag;
        rowEls.set(t.tag, tr);
      }
      renderRow(tr, t, now);
      tbody.append(tr); // the server's order
      // A failing tag's last error, in full, on a line of its own below.
      if (t.error) {
        if (!tr.errRow) {
          tr.errRow = document.createElement('tr');
          tr.errRow.className = 'err-row';
          tr.errRow.dataset.for = t.tag;
          tr.errRow.append(document.createElement('td'));
          tr.errRow.firstChild.colSpan = 7;
        }
        const why = cause(t);
        tr.errRow.firstChild.textContent = why.text;
        tr.errRow.dataset.cause = why.kind;
        tr.errRow.title = t.error;
        tbody.append(tr.errRow);
      } else if (tr.errRow) {
        tr.errRow.remove();
        tr.errRow = null;
      }
    }
    for (const [name, tr] of rowEls) {
      if (!seen.has(name)) {
        tr.remove();
        if (tr.errRow) tr.errRow.remove();
        rowEls.delete(name);
        series.delete('row:' + name);
      }
    }
    markSelected();

    const first = seg.total ? view.page * view.per + 1 : 0;
    const lastN = view.page * view.per + seg.tags.length;
    $('page-range').textContent = seg.total
      ? `${fmtNum(first)}–${fmtNum(lastN)} of ${fmtNum(seg.total)}`
      : '0 of ' + fmtNum(seg.counts.all);
    $('prev').disabled = view.page === 0;
    $('next').disabled = lastN >= seg.total;
    const none = seg.total === 0;
    $('no-match').hidden = !none;
    if (none) {
      const what = [view.state && `is ${view.state}`, view.q && `has “${view.q}” in its name`].filter(Boolean).join(' and ');
      $('no-match-text').textContent = `No tag ${what || 'matches'}.`;
    }
  }

  function renderCounts(seg) {
    const c = seg ? seg.counts : null;
    for (const el of document.querySelectorAll('[data-count]')) {
      const n = c ? c[el.dataset.count] || 0 : 0;
      el.textContent = fmtNum(n);
      el.closest('.filter').dataset.zero = String(n === 0);
    }
    // The header's counts: each state that some tag is in, a link that
    // filters the table to it (and, clicked again, shows every tag).
    for (const a of document.querySelectorAll('#head-counts [data-status]')) {
      const s = a.dataset.status, n = c ? c[s] || 0 : 0;
      a.hidden = n === 0 && view.state !== s;
      a.textContent = `${fmtNum(n)} ${s}`;
      a.title = view.state === s ? 'Show every tag' : `Show the ${s} tags`;
    }
    $('seg-summary').textContent = c ? `${fmtNum(c.all)} ${c.all === 1 ? 'tag' : 'tags'}` : '';
  }

  // renderDetail draws t in the card, or empties it when no tag is open.
  // A tag chosen while a poll was in flight has no data yet: its card
  // stays as it is until the next.
  function renderDetail(seg, t, now) {
    const box = $('detail');
    if (!view.tag) { box.replaceChildren(); return; }
    if (!t) return;
    let el = box.firstElementChild;
    if (!el || el.dataset.tag !== t.tag) {
      el = newCard(t.tag);
      el.querySelector('.close').addEventListener('click', closeCard);
      box.replaceChildren(el);
    }
    renderTag(el, t, seg, now);
  }

  let lastSeg = null, lastNow = 0; // the last page, to open a card before the next poll

  function renderSegment(seg, detail, now) {
    lastSeg = seg;
    lastNow = now;
    $('seg-off').hidden = !!seg;
    const empty = !seg || seg.counts.all === 0;
    $('seg-empty').hidden = !seg || !empty;
    $('seg-body').hidden = empty;
    renderCounts(seg);
    if (empty) {
      $('detail').replaceChildren();
      return;
    }
    renderTable(seg, now);
    renderDetail(seg, detail, now);
  }

  // ---- polling ---------------------------------------------------------------
  let lastOK = 0;
  let polls = 0;

  function tick() {
    const updated = $('updated');
    if (!lastOK) return;
    const ago = Date.now() - lastOK;
    updated.textContent = document.body.dataset.state === 'live' ? 'live' : `last update ${fmtDur(ago)} ago`;
    updated.title = 'last update ' + new Date(lastOK).toLocaleTimeString();
  }

  // getState fetches api/state?query and decodes it.
  async function getState(query, signal) {
    const res = await fetch('api/state?' + query, { cache: 'no-store', signal, headers: { Accept: 'application/json' } });
    const text = await res.text();
    if (!res.ok) {
      let msg = `HTTP ${res.status}`;
      try { msg += ': ' + JSON.parse(text).error.message; } catch (_) { /* not the error model */ }
      throw new Error(msg);
    }
    return JSON.parse(text, reviver);
  }

  // One poll is in flight at a time; a change of view meanwhile asks for
  // the next one at once.
  let timer = 0, inflight = false, again = false;
  function refresh() {
    if (inflight) { again = true; return; }
    clearTimeout(timer);
    poll();
  }

  async function poll() {
    inflight = true;
    const g = gen;
    const ctrl = new AbortController();
    const timeout = setTimeout(() => ctrl.abort(), Math.max(2000, 2 * POLL));
    try {
      // The page of rows, and the open card's tag on its own: it may be on
      // another page, or on none of the filter's.
      const wanted = view.tag;
      const [st, one] = await Promise.all([
        getState(pageQuery(), ctrl.signal),
        wanted ? getState('tag=' + encodeURIComponent(wanted), ctrl.signal) : null,
      ]);
      if (g !== gen) return; // the view changed meanwhile: its own poll follows
      const now = Date.parse(st.time);
      const seg = st.segment;
      if (seg && seg.total > 0 && seg.tags.length === 0 && view.page > 0) {
        // The page went past the end (fewer tags match now): the last one.
        view.page = Math.max(0, Math.ceil(seg.total / view.per) - 1);
        gen++;
        syncURL();
        again = true;
        return;
      }
      let detail = one && one.segment && one.segment.tags[0];
      if (wanted && wanted === view.tag && !detail) {
        // The tag is gone (deleted, or not served any more).
        forget(view.tag);
        view.tag = '';
        view.chosen = false;
        syncURL();
      }
      if (!view.tag && !view.closed && seg && seg.tags.length) {
        // Nothing chosen: the first row (the most urgent, by default) is open.
        view.tag = seg.tags[0].tag;
        detail = seg.tags[0];
      }
      if (detail && detail.tag !== view.tag) detail = null; // chosen meanwhile: next poll
      renderStore(st.store, now);
      renderSnowflake(st.snowflake, now);
      renderSegment(seg, detail, now);
      lastOK = Date.now();
      polls++;
      document.body.dataset.polls = String(polls);
      document.body.dataset.state = 'live';
      $('conn-banner').hidden = true;
      // Restart the pulse animation: one beat per update.
      const pulse = document.querySelector('.pulse');
      pulse.style.animation = 'none';
      void pulse.offsetWidth;
      pulse.style.animation = '';
    } catch (e) {
      if (g !== gen) return;
      document.body.dataset.state = lastOK ? 'lost' : 'connecting';
      $('conn-banner').hidden = false;
      const reason = e.name === 'AbortError' ? 'no answer within ' + fmtDur(Math.max(2000, 2 * POLL)) : e.message;
      $('conn-text').textContent = lastOK
        ? `The page shows the state of ${fmtDur(Date.now() - lastOK)} ago (${reason}). Retrying…`
        : `No state yet (${reason}). Retrying…`;
    } finally {
      clearTimeout(timeout);
      tick();
      inflight = false;
      clearTimeout(timer);
      timer = setTimeout(poll, again || g !== gen ? 0 : POLL);
      again = false;
    }
  }

  setupControls();
  $('poll-every').textContent = fmtDur(POLL);
  setInterval(tick, 1000);
  syncURL();
  poll();
})();
