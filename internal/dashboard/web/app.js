// kubeblade rack view: draws the blades the dashboard server streams
// (GET /api/stream, server-sent events) and toggles identify through it.
// Plain JavaScript, no framework and nothing loaded from elsewhere.
'use strict';

(() => {
  const token = document.querySelector('meta[name="kubeblade-token"]').content;
  const $ = (id) => document.getElementById(id);
  const racksEl = $('racks');

  // What the server told us.
  const blades = new Map(); // name -> blade view
  const members = new Map(); // chassis ('' = pool) -> Set of blade names
  const searchOf = new Map(); // name -> the text the filter looks in
  let status = null;
  // What is drawn. Every chassis has its section, but only those near the
  // screen have their cards in the DOM (a rack of 10 000 blades would be
  // some 300 000 nodes): the others keep their place with an estimated
  // height, and are drawn from the current state when scrolled to.
  const cards = new Map(); // name -> {el, refs, section, slot, pattern: {top, edge}}
  const sections = new Map(); // chassis -> {el, count, parts}
  const near = new Set(); // parts within a screen of the view
  let detailName = null;
  let detailEvents = [];
  let filterTokens = [];
  let viewPending = false; // a snapshot came, what is in view is not drawn yet
  // ---- connection -------------------------------------------------------
  // EventSource reconnects by itself after a network error (the server asks
  // for 1 s); a stream that answered with an error is closed and restarted
  // here. A silent stream (no message or ping for 25 s) counts as lost.
  let es = null;
  let streamUp = false;
  let everConnected = false;
  let lastMessage = 0;

  function connect() {
    if (es) es.close();
    es = new EventSource('/api/stream');
    const on = (type, fn) => es.addEventListener(type, (e) => { alive(); fn(e.data ? JSON.parse(e.data) : null); });
    on('snapshot', onSnapshot);
    on('blades', onBlades);
    on('status', (s) => { status = s; renderStatus(); });
    on('events', onEvents);
    on('ping', () => {});
    es.onerror = () => {
      setStream(false);
      if (es.readyState === EventSource.CLOSED) setTimeout(connect, 2000);
    };
  }
  function alive() {
    lastMessage = Date.now();
    if (!streamUp) setStream(true);
  }
  function setStream(up) {
    streamUp = up;
    if (up) everConnected = true;
    renderBanner();
  }
  setInterval(() => {
    if (streamUp && Date.now() - lastMessage > 25000) {
      setStream(false);
      connect();
    }
  }, 5000);

  // ---- messages ---------------------------------------------------------
  function onSnapshot(m) {
    // User Timing marks (DevTools' Performance panel; test/bench/dashboard
    // reads them): when the snapshot came, when the page's structure was
    // built, and when the blades in view were drawn.
    performance.mark('kubeblade:snapshot-received');
    blades.clear();
    members.clear();
    searchOf.clear();
    for (const b of m.blades) remember(b);
    status = m.status;
    observer.disconnect();
    resized.disconnect();
    racksEl.replaceChildren();
    cards.clear();
    sections.clear();
    near.clear();
    for (const key of members.keys()) relayout(key);
    orderSections();
    racksEl.setAttribute('aria-busy', 'false');
    renderStatus();
    renderEmpty();
    renderSummary();
    applyFilter();
    placeholders();
    viewPending = true;
    if (detailName) renderDetail();
    performance.mark('kubeblade:snapshot-drawn');
  }

  function onBlades(m) {
    const touched = new Set(); // sections whose members changed
    const shown = new Set(); // sections where what the filter keeps may have
    const changed = (before, b) => {
      const key = sectionKey(b);
      if (!before || sectionKey(before) !== key || (before.slot || 0) !== (b.slot || 0)) {
        // New, or moved: its section(s) are laid out again.
        if (before) {
          forget(before);
          touched.add(sectionKey(before));
        }
        const c = cards.get(b.name);
        if (c) {
          c.el.remove();
          cards.delete(b.name);
        }
        remember(b);
        touched.add(key);
        return;
      }
      remember(b);
      const c = cards.get(b.name);
      if (c) fill(c, b);
      if (filterTokens.length) {
        if (c) c.el.hidden = !matches(b.name);
        shown.add(key);
      }
    };
    // Where a blade was, before a patch changes it in place.
    const place = (b) => b && { name: b.name, chassis: b.chassis, slot: b.slot };
    for (const b of m.upsert || []) changed(place(blades.get(b.name)), b);
    for (const p of m.patch || []) {
      const b = blades.get(p.name);
      if (b) changed(place(b), mergePatch(b, p));
    }
    for (const name of m.remove || []) {
      const before = blades.get(name);
      if (!before) continue;
      forget(before);
      const c = cards.get(name);
      if (c) {
        c.el.remove();
        cards.delete(name);
      }
      touched.add(sectionKey(before));
    }
    let order = false;
    for (const key of touched) order = relayout(key) || order;
    if (order) orderSections();
    for (const key of shown) {
      const s = sections.get(key);
      if (s && !touched.has(key)) s.el.hidden = ![...members.get(key)].some(matches);
    }
    if (touched.size) placeholders();
    renderEmpty();
    renderSummary();
    if (detailName) renderDetail();
  }

  // mergePatch applies a JSON merge patch (RFC 7386, section 2) to a
  // blade's view: the server sends what changed of a blade, not all of it.
  function mergePatch(target, patch) {
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete target[k];
      else if (typeof v === 'object' && !Array.isArray(v)) {
        const t = target[k];
        target[k] = mergePatch(t && typeof t === 'object' && !Array.isArray(t) ? t : {}, v);
      } else target[k] = v;
    }
    return target;
  }

  function remember(b) {
    blades.set(b.name, b);
    const key = sectionKey(b);
    if (!members.has(key)) members.set(key, new Set());
    members.get(key).add(b.name);
    searchOf.set(b.name, searchText(b, badgesOf(b)));
  }

  function forget(b) {
    blades.delete(b.name);
    searchOf.delete(b.name);
    const set = members.get(sectionKey(b));
    if (set) set.delete(b.name);
  }

  function onEvents(list) {
    if (!detailName) return;
    for (const e of list) {
      if (e.node !== detailName) continue;
      detailEvents = [e, ...detailEvents.filter((o) => o.id !== e.id)];
    }
    detailEvents.sort((a, b) => Date.parse(b.time) - Date.parse(a.time));
    renderEvents();
  }

  // ---- layout -----------------------------------------------------------
  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });
  const sorted = (it) => [...it].sort((a, b) => collator.compare(a.name, b.name));
  const sectionKey = (b) => b.chassis || '';
  const matches = (name) => filterTokens.every((t) => (searchOf.get(name) || '').includes(t));

  // A section is drawn in parts, each a grid of cards: a chassis is one
  // part, the pool (which can hold every blade of a cluster without rack
  // labels) one part per POOL_PART blades in name order. The parts near
  // the screen (one screen above and below it) are drawn; the others are
  // emptied as they leave it.
  const POOL_PART = 120;
  const partOf = new WeakMap(); // grid -> part
  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const part = partOf.get(e.target);
      if (!part) continue;
      if (e.isIntersecting) near.add(part);
      else near.delete(part);
    }
    drawNear();
  }, { rootMargin: '100% 0px' });
  const allParts = () => [...sections.values()].flatMap((s) => s.parts);

  function drawNear() {
    let drew = false;
    const gone = [];
    for (const part of allParts()) {
      if (near.has(part) && !part.drawn) {
        draw(part);
        drew = true;
      } else if (!near.has(part) && part.drawn && !part.grid.contains(document.activeElement)) {
        gone.push(part);
      }
    }
    // What leaves is measured before any of it is emptied (one layout).
    if (gone.length) placeholders();
    for (const part of gone) undraw(part);
    if (drew) placeholders();
    if (viewPending && (drew || sections.size === 0)) {
      viewPending = false;
      performance.mark('kubeblade:view-drawn');
    }
  }

  function draw(part) {
    part.drawn = true;
    part.grid.style.removeProperty('height');
    layout(part);
    resized.observe(part.grid);
  }

  function undraw(part) {
    const h = part.grid.getBoundingClientRect().height;
    resized.unobserve(part.grid);
    for (const name of part.names) cards.delete(name);
    part.grid.replaceChildren();
    part.drawn = false;
    part.grid.style.height = `${h}px`;
  }

  // A part not drawn keeps the place it would take, so the scroll bar is
  // right and a part drawn as it is scrolled to pushes nothing: the height
  // a drawn part with as many places (slots, or cards) had, or, before one
  // was seen, its rows of cards at a drawn card's height. Heights learned
  // hold for one width and filter.
  const learned = new Map(); // places -> px
  let learnedFor = '';
  let rowHeight = 0;
  const placesOf = (part) => {
    if (filterTokens.length) return part.names.filter(matches).length;
    if (!part.key) return part.names.length;
    let highest = 0;
    let unslotted = 0;
    for (const n of part.names) {
      const slot = blades.get(n).slot || 0;
      if (slot > 0) highest = Math.max(highest, slot);
      else unslotted++;
    }
    return highest + unslotted;
  };
  function learn(part) {
    const h = part.grid.getBoundingClientRect().height;
    if (h > 0) learned.set(placesOf(part), h);
  }
  function placeholders() {
    const now = `${innerWidth} ${filterTokens.join(' ')}`;
    if (now !== learnedFor) {
      learned.clear();
      learnedFor = now;
    }
    const parts = allParts();
    for (const part of parts) if (part.drawn && !part.section.el.hidden) learn(part);
    const drawnCard = racksEl.querySelector('article.blade:not([hidden])');
    if (drawnCard) rowHeight = Math.max(rowHeight, drawnCard.getBoundingClientRect().height);
    const row = rowHeight || 9 * parseFloat(getComputedStyle(document.documentElement).fontSize);
    let gap = 0;
    let cols = 1;
    const anyGrid = racksEl.querySelector('.slots');
    if (anyGrid) {
      const st = getComputedStyle(anyGrid);
      gap = parseFloat(st.rowGap) || 0;
      cols = Math.max(1, st.gridTemplateColumns.split(' ').filter(Boolean).length);
    }
    for (const part of parts) {
      if (part.drawn) continue;
      const places = placesOf(part);
      let h = learned.get(places);
      if (h === undefined) {
        const rows = Math.ceil(places / cols);
        h = rows ? rows * row + (rows - 1) * gap : 0;
      }
      const px = `${h}px`;
      if (part.grid.style.height !== px) part.grid.style.height = px;
    }
  }
  // Drawn parts change height as their blades change (a badge more, a
  // card of a blade that just got its agent): the places kept follow.
  let placeFrame = 0;
  const later = () => {
    cancelAnimationFrame(placeFrame);
    placeFrame = requestAnimationFrame(placeholders);
  };
  const resized = new ResizeObserver(later);
  addEventListener('resize', later);

  function section(key) {
    let s = sections.get(key);
    if (s) return s;
    const el = document.createElement('section');
    el.className = key ? 'chassis' : 'chassis pool';
    el.dataset.chassis = key;
    const h = document.createElement('h2');
    const title = document.createElement('span');
    title.textContent = key ? `Chassis ${key}` : 'Pool (no kubeblade.io/chassis label)';
    const count = document.createElement('span');
    count.className = 'count';
    h.append(title, count);
    el.append(h);
    s = { el, count, parts: [] };
    sections.set(key, s);
    racksEl.append(el);
    return s;
  }

  // parts splits a section's members into its parts' names.
  function partNames(key, names) {
    if (key) return [[...names]];
    const all = sorted([...names].map((n) => blades.get(n))).map((b) => b.name);
    const out = [];
    for (let i = 0; i < all.length; i += POOL_PART) out.push(all.slice(i, i + POOL_PART));
    return out;
  }

  function dropPart(part) {
    observer.unobserve(part.grid);
    resized.unobserve(part.grid);
    near.delete(part);
    part.grid.remove();
  }

  // Chassis in natural order, the pool last.
  function orderSections() {
    const keys = [...sections.keys()].filter((k) => k).sort(collator.compare);
    if (sections.has('')) keys.push('');
    for (const k of keys) racksEl.append(sections.get(k).el);
  }

  // relayout brings one section in line with its members: gone when it has
  // none, its count, whether the filter leaves any of it, its parts, and
  // the cards of those drawn. It reports whether the sections' order may
  // have changed.
  function relayout(key) {
    const names = members.get(key);
    let s = sections.get(key);
    if (!names || names.size === 0) {
      members.delete(key);
      if (!s) return false;
      for (const part of s.parts) dropPart(part);
      s.el.remove();
      sections.delete(key);
      return true;
    }
    const created = !s;
    s = section(key);
    let highest = 0;
    for (const n of names) highest = Math.max(highest, key ? blades.get(n).slot || 0 : 0);
    s.count.textContent = `${names.size} blade${names.size === 1 ? '' : 's'}` + (highest ? ` · ${highest} slots` : '');
    s.el.hidden = filterTokens.length > 0 && ![...names].some(matches);
    const lists = partNames(key, names);
    while (s.parts.length > lists.length) dropPart(s.parts.pop());
    lists.forEach((list, i) => {
      let part = s.parts[i];
      if (!part) {
        const grid = document.createElement('div');
        grid.className = 'slots';
        part = { grid, key, section: s, names: [], drawn: false };
        partOf.set(grid, part);
        s.parts.push(part);
        s.el.append(grid);
        observer.observe(grid);
      }
      part.names = list;
      if (part.drawn) layout(part);
    });
    if (!key) {
      // Blades that moved to a pool part not drawn leave their cards.
      for (const [n, c] of cards) if (!c.el.isConnected) cards.delete(n);
    }
    return created;
  }

  // layout draws a drawn part's cards in order: a chassis shows its slots
  // 1..highest, empty ones as gaps, then blades without a usable slot; the
  // pool is by name.
  function layout(part) {
    const key = part.key;
    const list = sorted(part.names.map((n) => blades.get(n)));
    const bySlot = new Map();
    const unslotted = [];
    for (const b of list) {
      if (key && b.slot > 0) {
        if (!bySlot.has(b.slot)) bySlot.set(b.slot, []);
        bySlot.get(b.slot).push(b);
      } else {
        unslotted.push(b);
      }
    }
    const cardOf = (b) => {
      let c = cards.get(b.name);
      if (!c) {
        c = newCard(b);
        cards.set(b.name, c);
        fill(c, b);
      }
      c.el.hidden = !matches(b.name);
      return c;
    };
    const order = [];
    const highest = bySlot.size ? Math.max(...bySlot.keys()) : 0;
    for (let i = 1; i <= highest; i++) {
      const here = bySlot.get(i);
      if (!here) {
        const gap = document.createElement('div');
        gap.className = 'slot empty';
        gap.dataset.slot = String(i);
        gap.textContent = `slot ${i} · empty`;
        gap.hidden = filterTokens.length > 0;
        order.push(gap);
        continue;
      }
      for (const b of here) {
        const c = cardOf(b);
        c.el.classList.toggle('conflict', here.length > 1);
        order.push(c.el);
      }
    }
    for (const b of unslotted) order.push(cardOf(b).el);
    part.grid.replaceChildren(...order);
    syncBlinks(part.grid);
  }

  // ---- a blade card -----------------------------------------------------
  function newCard(b) {
    const el = document.createElement('article');
    el.className = 'blade';
    el.dataset.name = b.name;
    el.tabIndex = 0;
    el.setAttribute('role', 'button');
    const mk = (tag, cls, parent) => {
      const e = document.createElement(tag);
      if (cls) e.className = cls;
      (parent || el).append(e);
      return e;
    };
    const head = mk('div', 'head');
    const slotno = mk('span', 'slotno', head);
    const leds = mk('span', 'leds', head);
    const top = mk('span', 'led top', leds);
    const edge = mk('span', 'led edge', leds);
    const namerow = mk('div', 'namerow');
    const name = mk('span', 'name', namerow);
    const more = mk('button', 'more', namerow);
    more.type = 'button';
    more.textContent = 'i';
    more.title = 'Details and recent Events';
    more.setAttribute('aria-label', `Details of ${b.name}`);
    const temp = mk('div', 'temp');
    const fan = mk('div', 'fan');
    const rpm = mk('div', 'rpm');
    const meta = mk('div', 'meta');
    const cfg = mk('div', 'meta cfg');
    const badges = mk('div', 'badges');
    return { el, refs: { slotno, top, edge, name, temp, fan, rpm, meta, cfg, badges }, pattern: {} };
  }

  function fill(c, b) {
    const r = c.refs;
    const el = c.el;
    el.dataset.slot = b.slot ? String(b.slot) : '';
    el.dataset.agent = b.agent;
    el.dataset.state = b.state || '';
    r.slotno.textContent = b.slot ? `#${b.slot}` : (b.slotLabel ? `slot "${b.slotLabel}"` : '');
    r.name.textContent = b.name;
    r.name.title = b.name;
    const dark = b.stealth && !b.critical;
    led(c, 'top', r.top, b.leds && b.leds.top, dark);
    led(c, 'edge', r.edge, b.leds && b.leds.edge, dark);

    if (b.temperatureCelsius != null) {
      r.temp.textContent = `${b.temperatureCelsius} °C`;
      r.temp.classList.remove('none');
      r.temp.style.setProperty('background', tempColor(b.temperatureCelsius));
    } else {
      r.temp.textContent = '— °C';
      r.temp.classList.add('none');
      r.temp.style.removeProperty('background');
    }
    r.temp.dataset.celsius = b.temperatureCelsius != null ? String(b.temperatureCelsius) : '';

    if (b.fan) {
      r.fan.replaceChildren();
      const pct = document.createElement('b');
      pct.textContent = `${b.fan.percent} %`;
      // "critical" is also the badge and the red border: short here.
      r.fan.append('fan ', pct, b.fan.mode ? ` · ${b.fan.mode === 'critical' ? 'crit' : b.fan.mode}` : '');
      r.fan.title = `fan ${b.fan.percent} % · ${b.fan.mode || ''}`;
      r.rpm.textContent = b.fan.rpm != null ? `${fmtInt(b.fan.rpm)} rpm` : 'no tach';
    } else {
      r.fan.textContent = b.agent === 'missing' ? 'no agent' : '';
      r.rpm.textContent = '';
    }
    r.meta.textContent = power(b.power);
    r.cfg.textContent = b.config ? `${b.config.name || 'local'} · gen ${b.config.generation || 0}` : '';
    r.cfg.title = b.config ? `applied BladeConfig ${b.config.name || '(local file)'}, generation ${b.config.generation || 0}` : '';

    const bs = badgesOf(b);
    r.badges.replaceChildren(...bs.map(([cls, text, key]) => {
      const s = document.createElement('span');
      s.className = `badge ${cls}`;
      s.dataset.badge = key;
      s.textContent = text;
      return s;
    }));

    el.classList.toggle('critical', !!b.critical);
    el.classList.toggle('identify', identifyOn(b));
    el.classList.toggle('stale', b.agent === 'stale');
    el.classList.toggle('missing', b.agent === 'missing');
    for (const m of ['queued', 'draining', 'drained', 'failed']) el.classList.toggle(`maint-${m}`, b.maintenance === m);
    el.classList.remove('pending');
    el.setAttribute('aria-pressed', String(identifyOn(b)));
    el.setAttribute('aria-label', `${b.name}: ${describe(b)}. Click to ${identifyOn(b) ? 'stop' : 'start'} identify.`);
    el.title = `${b.name} — click to ${identifyOn(b) ? 'stop' : 'start'} identify`;
  }

  // led draws one LED. A blinking LED's animation is started with a delay
  // that puts it in the blade's phase: on for the first half of each
  // wall-clock second (internal/core's ColorAt).
  function led(c, which, el, l, dark) {
    const color = (l && l.color) || '#000000';
    let pattern = (l && l.pattern) || 'off';
    if (dark || color.toLowerCase() === '#000000') pattern = 'off';
    el.dataset.color = color.toLowerCase();
    el.dataset.pattern = pattern;
    if (pattern === 'off') el.style.removeProperty('--c');
    else el.style.setProperty('--c', shown(color));
    if (pattern === 'blink' && c.pattern[which] !== 'blink') syncLed(el, blinkStart());
    c.pattern[which] = pattern;
    el.title = `${which} LED: ${pattern === 'off' ? 'off' : `${color} ${pattern}`}`;
  }

  // Blinking LEDs are on for the first half of every wall-clock second, in
  // step with the blades. A CSS animation starts over whenever its element
  // is inserted, moved or shown again (a layout, the filter, the legend, the
  // details), so its start time is set again after each of those, not only
  // when the LED starts blinking.
  // The document's timeline counts from performance.timeOrigin, so the last
  // wall-clock second began at this time on it, the same for every call
  // within that second.
  const blinkStart = () => {
    const now = performance.now();
    return now - ((performance.timeOrigin + now) % 1000);
  };
  function syncLed(e, start) {
    for (const a of e.getAnimations()) a.startTime = start;
  }
  function syncBlinks(root) {
    const start = blinkStart();
    for (const e of root.querySelectorAll('.led[data-pattern="blink"]')) syncLed(e, start);
  }

  // shown scales a colour to full brightness, keeping its hue: the agent
  // drives WS2812 LEDs dimly (the default idle colour is #001000), which a
  // person still sees as plainly green, but #001000 on a screen is black.
  function shown(hex) {
    const v = parseInt(hex.slice(1), 16);
    if (hex.length !== 7 || Number.isNaN(v)) return hex;
    const rgb = [(v >> 16) & 255, (v >> 8) & 255, v & 255];
    const m = Math.max(...rgb);
    return m === 0 ? hex : `rgb(${rgb.map((c) => Math.round((c * 255) / m)).join(',')})`;
  }

  const identifyOn = (b) => !!b.identify || b.identifyRequested === 'true';

  function badgesOf(b) {
    const out = [];
    if (b.critical) out.push(['b-critical', 'critical', 'critical']);
    if (b.fan && b.fan.stalled) out.push(['b-stalled', 'fan stalled', 'fan-stalled']);
    if (b.identify) out.push(['b-identify', 'identify', 'identify']);
    else if (b.identifyRequested === 'true') out.push(['b-identify', 'identify…', 'identify-requested']);
    switch (b.maintenance) {
      case 'queued': out.push(['b-maint', 'queued', 'maintenance-queued']); break;
      case 'draining': out.push(['b-maint', 'draining', 'maintenance-draining']); break;
      case 'drained': out.push(['b-safe', 'safe to pull', 'maintenance-drained']); break;
      case 'failed': out.push(['b-failed', 'drain failed', 'maintenance-failed']); break;
      case undefined: case '':
        if (b.maintenanceRequested) out.push(['b-maint', 'maintenance…', 'maintenance-requested']);
        break;
      default: out.push(['b-maint', b.maintenance, 'maintenance-other']);
    }
    if (b.agent === 'stale') out.push(['b-stale', 'agent stale', 'stale']);
    if (b.agent === 'missing') out.push(['b-missing', 'no agent', 'no-agent']);
    if (b.nodeNotReady && !b.noNode) out.push(['b-node', 'node not ready', 'node-not-ready']);
    if (b.cordoned) out.push(['b-node', 'cordoned', 'cordoned']);
    if (b.noNode) out.push(['b-node', 'no node', 'no-node']);
    if (b.stealth) out.push(['b-stealth', 'stealth', 'stealth']);
    return out;
  }

  function describe(b) {
    const parts = [];
    if (b.temperatureCelsius != null) parts.push(`${b.temperatureCelsius} °C`);
    if (b.fan) parts.push(`fan ${b.fan.percent} %`);
    for (const [, text] of badgesOf(b)) parts.push(text);
    return parts.join(', ');
  }

  function searchText(b, bs) {
    return [b.name, b.chassis, b.slot ? `slot ${b.slot}` : '', b.state, b.agent, b.power, power(b.power),
      b.config && b.config.name, b.soc, b.maintenance, ...bs.map(([, t, k]) => `${t} ${k}`)]
      .filter(Boolean).join(' ').toLowerCase();
  }

  const power = (p) => ({ 'poe-802.3at': 'PoE+', 'poe-or-usbc': 'PoE/USB-C' })[p] || p || '';
  const fmtInt = (n) => Math.round(n).toLocaleString('en-US');

  // Temperature scale: blue (cool) through green and yellow to red (hot).
  const stops = [[30, [59, 130, 246]], [45, [16, 185, 129]], [60, [234, 179, 8]], [70, [249, 115, 22]], [80, [239, 68, 68]]];
  function tempColor(t) {
    if (t <= stops[0][0]) return `rgb(${stops[0][1].join(',')})`;
    for (let i = 1; i < stops.length; i++) {
      const [t1, c1] = stops[i];
      if (t <= t1) {
        const [t0, c0] = stops[i - 1];
        const f = (t - t0) / (t1 - t0);
        return `rgb(${c0.map((v, j) => Math.round(v + (c1[j] - v) * f)).join(',')})`;
      }
    }
    return `rgb(${stops[stops.length - 1][1].join(',')})`;
  }

  // ---- header, banner, summary -----------------------------------------
  function renderStatus() {
    if (!status) return;
    const where = status.context ? `${status.context} · ${status.server}` : status.server;
    $('cluster').textContent = where;
    const kinds = Object.fromEntries((status.kinds || []).map((k) => [k.kind, k]));
    const b = kinds.blades || {};
    const fatal = !b.ok && (b.problem === 'forbidden' || b.problem === 'notInstalled');
    $('fatal').hidden = !fatal;
    $('fatal').dataset.problem = fatal ? b.problem : '';
    $('fatal-message').textContent = fatal ? b.message : '';
    racksEl.hidden = fatal;
    renderEmpty();
    document.body.dataset.synced = String(!!status.synced);
    renderBanner();
  }

  // renderEmpty says why the rack is empty, or removes that note.
  function renderEmpty() {
    const note = racksEl.querySelector(':scope > .loading');
    if (blades.size > 0) {
      if (note) note.remove();
      return;
    }
    let text = 'Connecting to the cluster…';
    if (status && status.synced) text = 'No blades in this cluster yet: no Blade objects, and no Nodes with kubeblade.io labels.';
    else if (status) text = 'Listing blades…';
    if (note) {
      note.textContent = text;
      return;
    }
    const p = document.createElement('p');
    p.className = 'loading';
    p.textContent = text;
    racksEl.append(p);
  }

  function renderBanner() {
    const el = $('banner');
    let kind = '';
    let text = '';
    const kinds = status ? status.kinds || [] : [];
    const down = kinds.find((k) => !k.ok && k.problem === 'unreachable');
    const other = kinds.find((k) => !k.ok && k.problem && k.kind !== 'blades');
    if (!streamUp && everConnected) {
      kind = 'disconnected';
      text = 'Disconnected from the dashboard server (bladectl dashboard). Showing the last known state; reconnecting…';
    } else if (!streamUp) {
      kind = '';
    } else if (down) {
      kind = 'unreachable';
      text = `Lost the Kubernetes API: ${down.message}. Showing the last known state; retrying…`;
    } else if (other) {
      kind = 'warning';
      text = `Cannot watch ${other.kind}: ${other.message}`;
    }
    el.hidden = !kind;
    el.dataset.kind = kind;
    el.textContent = text;
    document.body.dataset.connected = String(streamUp);
  }

  function renderSummary() {
    const all = [...blades.values()];
    const count = (f) => all.filter(f).length;
    const hottest = all.reduce((m, b) => (b.temperatureCelsius != null && b.temperatureCelsius > m ? b.temperatureCelsius : m), -Infinity);
    const chips = [
      ['', `${all.length} blade${all.length === 1 ? '' : 's'}`, ''],
      ['c-critical', `${count((b) => b.critical)} critical`, 'critical', count((b) => b.critical)],
      ['c-identify', `${count(identifyOn)} identify`, 'identify', count(identifyOn)],
      ['c-maint', `${count((b) => b.maintenance || b.maintenanceRequested)} in maintenance`, 'maintenance', count((b) => b.maintenance || b.maintenanceRequested)],
      ['c-stale', `${count((b) => b.agent === 'stale')} stale`, 'stale', count((b) => b.agent === 'stale')],
      ['c-missing', `${count((b) => b.agent === 'missing')} without agent`, 'no-agent', count((b) => b.agent === 'missing')],
    ].filter((c, i) => i === 0 || c[3] > 0);
    if (hottest > -Infinity) chips.push(['', `hottest ${hottest} °C`, '']);
    if (filterTokens.length) chips.push(['', `showing ${[...blades.keys()].filter(matches).length}`, '']);
    $('summary').replaceChildren(...chips.map(([cls, text, filter]) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = `chip ${cls}`;
      b.textContent = text;
      if (filter) b.addEventListener('click', () => setFilter(filter));
      else b.addEventListener('click', () => setFilter(''));
      return b;
    }));
    const crit = count((b) => b.critical);
    const where = status ? status.context || status.server : '';
    document.title = `${crit ? `⚠ ${crit} critical · ` : ''}kubeblade rack view${where ? ` · ${where}` : ''}`;
  }

  // ---- filter -----------------------------------------------------------
  const filterEl = $('filter');
  function setFilter(v) {
    filterEl.value = v;
    onFilter();
  }
  function onFilter() {
    filterTokens = filterEl.value.toLowerCase().split(/\s+/).filter(Boolean);
    const hash = filterEl.value ? `#filter=${encodeURIComponent(filterEl.value)}` : ' ';
    history.replaceState(null, '', hash === ' ' ? location.pathname : hash);
    applyFilter();
    syncBlinks(racksEl);
    renderSummary();
  }
  // applyFilter shows the sections with blades that match the filter, and
  // in those that are drawn, the cards that match.
  function applyFilter() {
    for (const [key, s] of sections) {
      s.el.hidden = filterTokens.length > 0 && ![...(members.get(key) || [])].some(matches);
      for (const part of s.parts) {
        if (!part.drawn) continue;
        for (const n of part.names) {
          const c = cards.get(n);
          if (c) c.el.hidden = !matches(n);
        }
        part.grid.querySelectorAll('.slot.empty').forEach((g) => { g.hidden = filterTokens.length > 0; });
      }
    }
    placeholders();
  }
  filterEl.addEventListener('input', onFilter);
  if (location.hash.startsWith('#filter=')) filterEl.value = decodeURIComponent(location.hash.slice(8));
  filterTokens = filterEl.value.toLowerCase().split(/\s+/).filter(Boolean);

  // ---- identify ---------------------------------------------------------
  async function toggleIdentify(name) {
    const b = blades.get(name);
    if (!b) return;
    const want = !identifyOn(b);
    const c = cards.get(name);
    if (c) c.el.classList.add('pending');
    try {
      const res = await fetch(`/api/blades/${encodeURIComponent(name)}/identify`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Kubeblade-Token': token },
        body: JSON.stringify({ identify: want }),
      });
      if (!res.ok) {
        const body = await res.json().catch(() => ({}));
        throw new Error(body.error || `HTTP ${res.status}`);
      }
      toast(`${want ? 'Identify started' : 'Identify stopped'} on ${name}`, true);
    } catch (e) {
      if (c) c.el.classList.remove('pending');
      toast(`Could not ${want ? 'start' : 'stop'} identify on ${name}: ${e.message}`, false);
    }
  }

  let toastTimer = 0;
  function toast(text, ok) {
    const t = $('toast');
    t.textContent = text;
    t.classList.toggle('ok', ok);
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, ok ? 2500 : 8000);
  }

  racksEl.addEventListener('click', (e) => {
    const card = e.target.closest('.blade');
    if (!card) return;
    if (e.target.closest('.more')) openDetail(card.dataset.name);
    else toggleIdentify(card.dataset.name);
  });
  racksEl.addEventListener('keydown', (e) => {
    const card = e.target.closest('.blade');
    if (!card || e.target !== card) return;
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      toggleIdentify(card.dataset.name);
    } else if (e.key === 'd') {
      openDetail(card.dataset.name);
    }
  });

  // ---- detail panel -----------------------------------------------------
  async function openDetail(name) {
    detailName = name;
    detailEvents = [];
    $('detail').hidden = false;
    $('detail').dataset.name = name;
    renderDetail();
    renderEvents();
    try {
      const res = await fetch(`/api/blades/${encodeURIComponent(name)}/events`);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const list = await res.json();
      if (detailName !== name) return;
      const seen = new Set(detailEvents.map((e) => e.id));
      detailEvents = [...detailEvents, ...list.filter((e) => !seen.has(e.id))];
      detailEvents.sort((a, b) => Date.parse(b.time) - Date.parse(a.time));
      renderEvents();
    } catch (e) {
      $('detail-events-note').hidden = false;
      $('detail-events-note').textContent = `Could not load Events: ${e.message}`;
    }
  }
  function closeDetail() {
    detailName = null;
    $('detail').hidden = true;
  }
  $('detail-close').addEventListener('click', closeDetail);
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && detailName) closeDetail(); });
  $('detail-identify').addEventListener('click', () => { if (detailName) toggleIdentify(detailName); });

  function renderDetail() {
    const b = blades.get(detailName);
    $('detail-name').textContent = detailName;
    const dl = $('detail-fields');
    if (!b) {
      dl.replaceChildren();
      $('detail-identify').hidden = true;
      return;
    }
    const dark = b.stealth && !b.critical;
    const fake = { pattern: {} };
    led(fake, 'top', $('detail-top'), b.leds && b.leds.top, dark);
    led(fake, 'edge', $('detail-edge'), b.leds && b.leds.edge, dark);
    const ledText = (l) => (l && l.pattern && l.pattern !== 'off' ? `${l.color} ${l.pattern}` : 'off');
    const rows = [
      ['Chassis / slot', b.chassis ? `${b.chassis} / ${b.slot || b.slotLabel || '—'}` : 'pool (no chassis label)'],
      ['State', b.state || '—'],
      ['Agent', b.agent === 'stale' ? `stale: ${b.staleMessage || 'no heartbeat'}` : b.agent === 'missing' ? 'no Blade: no agent reports here' : 'reporting'],
      ['Temperature', b.temperatureCelsius != null ? `${b.temperatureCelsius} °C` : '—'],
      ['Airflow', b.airflowCelsius != null ? `${b.airflowCelsius} °C` : ''],
      ['Fan', b.fan ? `${b.fan.percent} % · ${b.fan.rpm != null ? `${fmtInt(b.fan.rpm)} rpm` : 'no tach'} · ${b.fan.mode || '—'}${b.fan.stalled ? ' · STALLED' : ''}` : '—'],
      ['Power', power(b.power) || '—'],
      ['LEDs', `top ${ledText(b.leds && b.leds.top)}, edge ${ledText(b.leds && b.leds.edge)}${dark ? ' (stealth: dark)' : ''}`],
      ['Identify', b.identify ? 'on' : b.identifyRequested === 'true' ? 'requested' : 'off'],
      ['Stealth', b.stealth ? 'on' : 'off'],
      ['Config', b.config ? `${b.config.name || 'local file'}, generation ${b.config.generation || 0}` : '—'],
      ['Maintenance', b.maintenance || (b.maintenanceRequested ? 'requested' : '—')],
      ['Node', b.noNode ? 'not found' : [b.nodeNotReady ? 'not ready' : 'ready', b.cordoned ? 'cordoned' : ''].filter(Boolean).join(', ')],
      ['Heartbeat', b.heartbeat ? ago(b.heartbeat) : '—'],
      ['Hardware', [b.soc, b.fanUnit && `fan unit ${b.fanUnit}`, b.backend && `${b.backend} backend`].filter(Boolean).join(', ')],
      ['Missing', (b.missingCapabilities || []).join(', ')],
      ['Agent version', b.agentVersion || ''],
    ].filter(([, v]) => v);
    dl.replaceChildren(...rows.flatMap(([k, v]) => {
      const dt = document.createElement('dt');
      dt.textContent = k;
      const dd = document.createElement('dd');
      dd.textContent = v;
      return [dt, dd];
    }));
    const btn = $('detail-identify');
    btn.hidden = false;
    btn.textContent = identifyOn(b) ? 'Stop identify' : 'Start identify';
  }

  function renderEvents() {
    const ol = $('detail-events');
    const note = $('detail-events-note');
    const kinds = status ? Object.fromEntries((status.kinds || []).map((k) => [k.kind, k])) : {};
    const ev = kinds.events;
    if (ev && !ev.ok && ev.problem) {
      note.hidden = false;
      note.textContent = `Events cannot be read: ${ev.message}`;
    } else {
      note.hidden = detailEvents.length > 0;
      note.textContent = 'No recent Events.';
    }
    ol.replaceChildren(...detailEvents.slice(0, 20).map((e) => {
      const li = document.createElement('li');
      li.className = e.type === 'Warning' ? 'warning' : '';
      li.dataset.reason = e.reason;
      const when = document.createElement('div');
      when.className = 'when';
      when.textContent = `${ago(e.time)}${e.count > 1 ? ` · ×${e.count}` : ''}${e.from ? ` · ${e.from}` : ''}`;
      when.title = e.time;
      const reason = document.createElement('span');
      reason.className = 'reason';
      reason.textContent = e.reason;
      li.append(when, reason, e.note ? ` ${e.note}` : '');
      return li;
    }));
  }

  function ago(t) {
    const s = Math.max(0, Math.round((Date.now() - Date.parse(t)) / 1000));
    if (s < 60) return `${s}s ago`;
    if (s < 3600) return `${Math.floor(s / 60)}m ago`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m ago`;
    return `${Math.floor(s / 86400)}d ago`;
  }
  setInterval(() => { if (detailName) { renderDetail(); renderEvents(); } }, 15000);

  // ---- legend -----------------------------------------------------------
  $('legend-toggle').addEventListener('click', () => {
    const l = $('legend');
    l.hidden = !l.hidden;
    // Animations start when shown: put the sample LED in the blades' phase.
    syncBlinks(l);
    $('legend-toggle').setAttribute('aria-expanded', String(!l.hidden));
  });

  connect();
})();
