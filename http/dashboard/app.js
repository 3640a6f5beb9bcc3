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
  const minus1 = (v) => (typeof v === 'bigint' ? v - 1n : v - 1);

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
    if (store.address) {
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
    $('store-text').textContent = text;
    chip.title = store.last_switch_reason ? 'last switch: ' + store.last_switch_reason : '';
    chip.dataset.fallback = String(!!store.address_index);
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
    worker.textContent = sf.worker_id == null ? 'none' : String(sf.worker_id);
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

    const err = $('sf-error');
    err.hidden = !sf.error;
    err.textContent = sf.error ? 'lease: ' + sf.error : '';

    const r = track('snowflake', now, sf.issued);
    setRate($('sf-rate'), r);
    spark($('sf-spark'), 'snowflake');
  }

  // ---- segment ---------------------------------------------------------------
  const cards = new Map();

  function bufferState(b) {
    if (b.loading) return 'loading';
    if (b.ready) return 'ready';
    return b.size > 0 ? 'used' : 'empty';
  }
  const bufferLabel = { ready: 'ready', loading: 'loading…', used: 'used up', empty: 'empty' };

  function tagStatus(t) {
    const hasIDs = t.buffers[0].ready || t.buffers[1].ready;
    if (hasIDs) {
      if (t.error) return ['degraded', 'serving · load failing'];
      if (t.loading) return ['loading', 'serving · loading next'];
      return ['serving', t.buffers[1 - t.current].ready ? 'serving · next ready' : 'serving'];
    }
    if (t.error) return ['failing', t.loading ? 'empty · load failing' : 'empty · failed'];
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
        range.textContent = `${fmtNum(b.start)} – ${fmtNum(minus1(b.end))}`;
        range.title = `[${b.start}, ${b.end}): ${fmtNum(b.size)} IDs`;
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
    errors.textContent = fmtNum(t.errors) + (t.load_errors > 0 ? ` · ${fmtNum(t.load_errors)} loads` : '');
    errors.title = `${t.errors} failed requests, ${t.load_errors} failed range loads`;
    const fresh = grew('errors:' + t.tag, now, t.errors + t.load_errors);
    tone(errors, fresh && t.errors > 0 ? 'bad' : fresh || t.errors > 0 ? 'warn' : '');

    const err = el.querySelector('.tag-error');
    err.hidden = !t.error;
    err.textContent = t.error ? 'last load failed: ' + t.error : '';

    const r = track('tag:' + t.tag, now, t.issued);
    setRate(el.querySelector('.rate-num'), r == null ? t.rate : r);
    spark(el.querySelector('.spark'), 'tag:' + t.tag);
    return r == null ? t.rate : r;
  }

  function renderSegment(seg, now) {
    const list = $('tags');
    $('seg-off').hidden = !!seg;
    const tags = seg ? seg.tags : [];
    $('seg-empty').hidden = !seg || tags.length > 0;
    const seen = new Set();
    let total = 0;
    const counts = {};
    for (const t of tags) {
      seen.add(t.tag);
      let el = cards.get(t.tag);
      if (!el) {
        el = newCard(t.tag);
        cards.set(t.tag, el);
      }
      list.append(el); // keeps the server's order (by name)
      total += renderTag(el, t, seg, now) || 0;
      const s = el.dataset.status;
      counts[s] = (counts[s] || 0) + 1;
    }
    for (const [name, el] of cards) {
      if (!seen.has(name)) {
        el.remove();
        cards.delete(name);
        series.delete('tag:' + name);
        changes.delete('waits:' + name);
        changes.delete('errors:' + name);
      }
    }
    const parts = [];
    if (seg) {
      parts.push(`${tags.length} ${tags.length === 1 ? 'tag' : 'tags'}`);
      for (const s of ['loading', 'degraded', 'failing', 'empty', 'idle']) {
        if (counts[s]) parts.push(`${counts[s]} ${s}`);
      }
      if (tags.length) parts.push(`${fmtRate(total)} IDs/s`);
    }
    $('seg-summary').textContent = parts.join(' · ');
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

  async function poll() {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), Math.max(2000, 2 * POLL));
    try {
      const res = await fetch('api/state', { cache: 'no-store', signal: ctrl.signal, headers: { Accept: 'application/json' } });
      const text = await res.text();
      if (!res.ok) {
        let msg = `HTTP ${res.status}`;
        try { msg += ': ' + JSON.parse(text).error.message; } catch (_) { /* not the error model */ }
        throw new Error(msg);
      }
      const st = JSON.parse(text, reviver);
      const now = Date.parse(st.time);
      renderStore(st.store, now);
      renderSnowflake(st.snowflake, now);
      renderSegment(st.segment, now);
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
      document.body.dataset.state = lastOK ? 'lost' : 'connecting';
      $('conn-banner').hidden = false;
      const reason = e.name === 'AbortError' ? 'no answer within ' + fmtDur(Math.max(2000, 2 * POLL)) : e.message;
      $('conn-text').textContent = lastOK
        ? `The page shows the state of ${fmtDur(Date.now() - lastOK)} ago (${reason}). Retrying…`
        : `No state yet (${reason}). Retrying…`;
    } finally {
      clearTimeout(timer);
      tick();
      setTimeout(poll, POLL);
    }
  }

  $('poll-every').textContent = fmtDur(POLL);
  setInterval(tick, 1000);
  poll();
})();
