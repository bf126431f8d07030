// The acemq console's page: plain JavaScript, no build step. Every view
// has its own URL (/, /queues/NAME, /queues/NAME/messages/ID); data comes
// from the JSON API under /api/ and live depths from /api/events.
"use strict";
(function () {
  const guard = document.querySelector('meta[name="acemq-console"]').content;
  const main = document.getElementById("main");
  const statusBox = document.getElementById("status");
  let current = null;      // the view shown: {kind, queue, id}
  let lastList = null;     // the newest queue list
  let acting = false;      // an action is running
  let rendering = false;   // a view is being read and drawn
  let shownView = "";      // the JSON the queue view was last drawn from
  let selected = new Set();
  let openGroups = new Set();
  let filterText = "";

  // h builds an element: h("a", {href: "/"}, "text", child…). Text is
  // always set as text, never parsed as HTML.
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (v === true) el.setAttribute(k, "");
      else el.setAttribute(k, String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === undefined || kid === null || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }

  // put shows the view's parts, leaving out those that are null.
  function put(...kids) {
    main.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
  }

  const enc = encodeURIComponent;
  const queueURL = (q) => "/queues/" + enc(q);
  const messageURL = (q, id) => queueURL(q) + "/messages/" + enc(id);

  async function api(path, opts) {
    const o = Object.assign({ headers: {} }, opts || {});
    o.headers["X-Acemq-Console"] = guard;
    if (o.body !== undefined) o.headers["Content-Type"] = "application/json";
    const r = await fetch(path, o);
    if (o.raw) return r;
    const j = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
    if (!r.ok) throw new Error(j.error || r.statusText);
    return j;
  }

  function say(text, isError) {
    statusBox.hidden = false;
    statusBox.textContent = text;
    statusBox.classList.toggle("error", !!isError);
  }

  function fmtTime(t) {
    if (!t) return "—";
    const d = new Date(t);
    return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }
  function ago(t) {
    if (!t) return "";
    const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
    if (s < 90) return s + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 129600) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }
  const rate = (r) => (r === undefined || r === null ? "—" : (Math.round(r * 10) / 10).toString());

  // --- routing -----------------------------------------------------------
  function parse(path) {
    const m = path.match(/^\/queues\/([^/]+)(?:\/messages\/([^/]+))?\/?$/);
    if (!m) return { kind: "list" };
    const q = decodeURIComponent(m[1]);
    return m[2] ? { kind: "message", queue: q, id: decodeURIComponent(m[2]) } : { kind: "queue", queue: q };
  }
  function go(path, push) {
    if (push) history.pushState(null, "", path);
    const next = parse(location.pathname);
    if (!current || next.kind !== current.kind || next.queue !== current.queue) {
      selected = new Set();
      openGroups = new Set();
    }
    current = next;
    render(true);
  }
  document.addEventListener("click", (e) => {
    const a = e.target.closest("a[data-nav]");
    if (!a || e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    statusBox.hidden = true;
    go(a.getAttribute("href"), true);
  });
  window.addEventListener("popstate", () => go(location.pathname, false));
  const link = (href, ...kids) => h("a", { href, "data-nav": true }, ...kids);

  async function render(focus) {
    rendering = true;
    try {
      if (current.kind === "list") await renderList(lastList || (await api("/api/queues")));
      else if (current.kind === "queue") await renderQueue();
      else await renderMessage();
      if (focus) main.focus();
    } catch (err) {
      put(h("h1", {}, "Something went wrong"), h("p", { class: "reason" }, err.message), h("p", {}, link("/", "Back to the queues")));
    } finally {
      rendering = false;
    }
  }

  // --- the queue list ----------------------------------------------------
  function halfCell(row, label) {
    if (!row) return h("span", { class: "muted" }, "—");
    const cls = row.messages > 0 ? "badge bad" : "badge";
    return link(queueURL(row.name), h("span", { class: cls }, row.messages), " ", label);
  }
  function renderList(l) {
    lastList = l;
    shownView = "";
    document.getElementById("broker").textContent = l.broker + (l.source === "management" ? " · management API" : " · named queues");
    document.title = "Queues · acemq console";
    const filter = h("input", { type: "search", id: "filter", placeholder: "Filter queues (press /)", "aria-label": "Filter queues", value: filterText });
    filter.addEventListener("input", () => { filterText = filter.value; draw(); });
    const body = h("tbody");
    function draw() {
      const f = filterText.toLowerCase();
      const rows = l.queues.filter((q) => !f || [q.name, q.dlq && q.dlq.name, q.parked && q.parked.name].some((n) => n && n.toLowerCase().includes(f)));
      body.replaceChildren(...rows.map((q) => h("tr", { "data-queue": q.name },
        h("td", { "data-label": "Queue" }, q.exists ? link(queueURL(q.name), h("span", { class: "mono" }, q.name)) : h("span", { class: "mono muted", title: "not declared" }, q.name + " (missing)"),
          q.type ? h("span", { class: "meta" }, " " + q.type) : null),
        h("td", { class: "num", "data-label": "Ready" }, q.messages),
        h("td", { class: "num", "data-label": "Unacked" }, q.unacked),
        h("td", { class: "num", "data-label": "Consumers" }, q.consumers),
        h("td", { class: "num", "data-label": "In/s" }, rate(q.publishRate)),
        h("td", { class: "num", "data-label": "Out/s" }, rate(q.deliverRate)),
        h("td", { "data-label": "Dead letters" }, halfCell(q.dlq, ".dlq")),
        h("td", { "data-label": "Parked" }, halfCell(q.parked, ".parked")),
        h("td", { "data-label": "Rungs", class: "mono" }, (q.rungs || []).length ? q.rungs.map((r, i) => [i ? ", " : "", link(queueURL(r.name), r.name.slice(q.name.length + 1)), " ", h("span", { class: "badge" }, r.messages)]) : h("span", { class: "muted" }, "—")))));
      if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 9, class: "muted" }, l.queues.length ? "No queue matches the filter." : "No queues: name them with --queues, or enable the management plugin.")));
    }
    draw();
    const totalDead = l.queues.reduce((n, q) => n + q.deadLetters, 0);
    put(
      h("h1", {}, "Queues"),
      l.error ? h("p", { class: "note" }, "The management API did not answer, so only the named queues are shown: " + l.error) : null,
      h("p", { class: "muted" }, l.queues.length + (l.queues.length === 1 ? " queue; " : " queues; ") + totalDead + (totalDead === 1 ? " dead letter" : " dead letters") + " in all." + (l.source === "management" ? "" : " Rates come from the management API only.")),
      h("div", { class: "toolbar" }, filter),
      h("table", { class: "cards", id: "queues" },
        h("thead", {}, h("tr", {}, h("th", {}, "Queue"), h("th", { class: "num" }, "Ready"), h("th", { class: "num" }, "Unacked"), h("th", { class: "num" }, "Consumers"), h("th", { class: "num" }, "In/s"), h("th", { class: "num" }, "Out/s"), h("th", {}, "Dead letters"), h("th", {}, "Parked"), h("th", {}, "Rungs"))),
        body));
  }

  // --- one queue, grouped by reason -------------------------------------
  function selectionBody(kind) {
    if (kind === "all") return { all: true };
    if (kind === "selected") return { ids: Array.from(selected) };
    return { group: kind };
  }
  async function act(action, queue, sel, what) {
    if (acting) return;
    if (action === "delete") {
      const ok = await confirmDialog("Delete " + what + " from " + queue + "? This cannot be undone.");
      if (!ok) { say("Nothing was deleted."); return; }
      sel = Object.assign({ confirm: true }, sel);
    }
    acting = true;
    try {
      if (action === "export") {
        const r = await api("/api/queues/" + enc(queue) + "/export", { method: "POST", body: JSON.stringify(sel), raw: true });
        if (!r.ok) throw new Error((await r.json()).error);
        // The console streams the lines (its count comes after them, in a
        // trailer a page cannot read): count them as they arrive.
        const chunks = [];
        let n = 0;
        const reader = r.body.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          chunks.push(value);
          for (const b of value) if (b === 10) n++;
        }
        const blob = new Blob(chunks, { type: "application/x-ndjson" });
        const a = h("a", { href: URL.createObjectURL(blob), download: queue + ".jsonl" });
        document.body.append(a); a.click(); a.remove();
        say("Exported " + n + " message" + (n === 1 ? "" : "s") + " from " + queue + " as JSON lines (peeked, not taken).");
      } else {
        const res = await api("/api/queues/" + enc(queue) + "/" + action, { method: "POST", body: JSON.stringify(sel) });
        say(res.message, !!res.error);
        selected = new Set();
      }
    } catch (err) {
      say(err.message, true);
    } finally {
      acting = false;
    }
    if (action !== "export") {
      shownView = ""; // draw again, even if nothing changed: the ticks are gone
      if (current.kind === "message") go(queueURL(queue), true);
      else render(false);
    }
  }
  function confirmDialog(text) {
    const d = document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = text;
    d.returnValue = "";
    d.showModal();
    document.getElementById("confirm-cancel").focus();
    return new Promise((resolve) => d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true }));
  }
  // actionButtons are the replay, export and delete buttons of a
  // selection: kind is "all", "selected", a group id, or a function
  // returning the selection.
  function actionButtons(queue, v, kind, what) {
    const sel = typeof kind === "function" ? kind : () => selectionBody(kind);
    const out = [];
    if (v.actions) out.push(h("button", { class: "primary", "data-action": "replay", onclick: () => act("replay", queue, sel(), what) }, "Replay " + what));
    out.push(h("button", { "data-action": "export", onclick: () => act("export", queue, sel(), what) }, "Export " + what));
    if (v.actions) out.push(h("button", { class: "danger", "data-action": "delete", onclick: () => act("delete", queue, sel(), what) }, "Delete " + what));
    return out;
  }
  let lastView = null;
  async function renderQueue() {
    const q = current.queue;
    const v = await api("/api/queues/" + enc(q));
    lastView = v;
    // A re-read that found the queue as it was drawn leaves the page alone
    // (what is focused, where it is scrolled).
    const same = JSON.stringify(Object.assign({}, v, { readAt: "" }));
    if (same === shownView && main.querySelector("#summary")) return;
    shownView = same;
    document.title = q + " · acemq console";
    const selBar = h("div", { class: "toolbar", id: "selection" });
    function drawSel() {
      const n = selected.size;
      if (n === 0) selBar.replaceChildren(h("span", { class: "muted" }, "Tick messages in a group to act on just those."));
      else selBar.replaceChildren(h("span", { class: "muted" }, n + " selected:"), ...actionButtons(q, v, "selected", n + " selected"));
    }
    drawSel();
    const groups = v.groups.map((g) => {
      const rows = g.messages.map((m) => {
        const box = h("input", { type: "checkbox", "aria-label": "select message " + m.id, checked: selected.has(m.id) });
        box.addEventListener("change", () => { box.checked ? selected.add(m.id) : selected.delete(m.id); drawSel(); });
        return h("tr", { "data-id": m.id },
          h("td", {}, box),
          h("td", { "data-label": "Id", class: "mono" }, link(messageURL(q, m.id), m.id)),
          h("td", { "data-label": "Type", class: "mono" }, m.type),
          h("td", { "data-label": "Attempt", class: "num" }, m.attempt),
          h("td", { "data-label": "Seen", title: (m.deadLetteredAt ? "dead-lettered " : "first seen ") + fmtTime(m.seen) }, ago(m.seen)),
          h("td", { "data-label": "Reason" }, m.reason || h("span", { class: "muted" }, "—")));
      });
      const det = h("details", { open: openGroups.has(g.id) },
        h("summary", {}, "Messages (" + g.count + ")"),
        h("table", { class: "cards" }, h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "Id"), h("th", {}, "Type"), h("th", { class: "num" }, "Attempt"), h("th", {}, "Seen"), h("th", {}, "Reason"))), h("tbody", {}, rows)));
      det.addEventListener("toggle", () => (det.open ? openGroups.add(g.id) : openGroups.delete(g.id)));
      return h("section", { class: "group", "data-group": g.id, "aria-labelledby": "g-" + g.id },
        h("div", { class: "group-head" },
          h("span", { class: "count", "data-count": g.count }, g.count),
          h("h2", { id: "g-" + g.id, class: "mono" }, g.key)),
        h("p", { class: "meta" }, "first seen " + fmtTime(g.firstSeen) + " · last seen " + fmtTime(g.lastSeen) + " (" + ago(g.lastSeen) + ")" + (g.types.length ? " · type " + g.types.join(", ") : "")),
        g.example !== g.key ? h("p", { class: "example meta" }, "e.g. ", h("span", { class: "mono" }, g.example)) : null,
        h("div", { class: "toolbar" }, actionButtons(q, v, g.id, "group (" + g.count + ")")),
        det);
    });
    put(
      h("div", { class: "crumbs" }, link("/", "Queues"), " › ", h("span", { class: "mono" }, q)),
      h("h1", { class: "mono" }, q),
      h("p", { class: "muted", id: "summary" },
        v.peeked + " message" + (v.peeked === 1 ? "" : "s") + " peeked (not taken), in " + v.groups.length + " group" + (v.groups.length === 1 ? "" : "s") + " by reason" +
        (v.actions ? "; replay sends them to " : "") , v.actions ? link(queueURL(v.target), h("span", { class: "mono" }, v.target)) : null, "."),
      v.truncated ? h("p", { class: "note" }, "Only the first " + v.peeked + " messages are shown" + (v.budgetReached ? " (their summaries filled the console's peek budget of " + Math.round(v.peekBudget / 1024) + " KiB)" : "") + "; replay and delete of a group or of all act on every message of the queue.") : null,
      v.groups.length ? h("div", { class: "toolbar" }, actionButtons(q, v, "all", "all (" + v.peeked + (v.truncated ? "+" : "") + ")")) : h("p", {}, "This queue is empty."),
      v.groups.length ? selBar : null,
      ...groups);
  }

  // --- one message -------------------------------------------------------
  async function renderMessage() {
    shownView = "";
    const q = current.queue, id = current.id;
    const d = await api("/api/queues/" + enc(q) + "/messages/" + enc(id));
    const env = d.envelope;
    document.title = id + " · acemq console";
    const kv = (pairs) => h("dl", { class: "kv" }, pairs.filter((p) => p[1] !== undefined && p[1] !== null && p[1] !== "").map(([k, v]) => [h("dt", {}, k), h("dd", { class: "mono" }, v)]));
    const route = env.route && env.route.length ? env.route.map((s, i) => (i === env.routePosition ? "[" + s + "]" : s)).join(" → ") : "";
    const headers = Object.entries(env.headers || {});
    const v = { actions: /\.(dlq|parked)$/.test(q) };
    put(
      h("div", { class: "crumbs" }, link("/", "Queues"), " › ", link(queueURL(q), h("span", { class: "mono" }, q)), " › ", h("span", { class: "mono" }, id)),
      h("h1", { class: "mono" }, env.type || "(untyped)", " ", h("span", { class: "muted" }, id)),
      env.error ? h("p", { class: "reason", id: "reason" }, env.error) : h("p", { class: "muted" }, "No reason recorded."),
      h("div", { class: "toolbar" }, actionButtons(q, v, () => ({ ids: [id] }), "this message")),
      h("h2", {}, "Envelope"),
      kv([["id", env.id], ["type", env.type], ["version", env.version], ["attempt", env.attempt], ["correlation", env.correlationId], ["causation", env.causationId], ["origin", env.origin],
        ["first seen", env.firstSeen ? fmtTime(env.firstSeen) + (d.age ? " (" + d.age + " ago)" : "") : ""], ["dead-lettered", d.deadLetteredAt ? fmtTime(d.deadLetteredAt) : ""],
        ["route", route], ["run", env.routeId], ["claim", env.claim], ["group", d.groupKey]]),
      h("h2", {}, "Delivery"),
      kv([["exchange", d.exchange || "(default)"], ["routing key", d.routingKey], ["content type", d.contentType], ["reply to", d.replyTo], ["redelivered", String(d.redelivered)], ["size", d.size + " bytes"],
        ["same id", d.duplicates ? d.duplicates + " more on this queue" : ""]]),
      h("h2", {}, "Headers (" + headers.length + ")"),
      headers.length ? kv(headers.map(([k, v]) => [k, JSON.stringify(v)])) : h("p", { class: "muted" }, "No application headers."),
      h("h2", {}, "Body"),
      d.claimCheckKey ? h("p", { class: "note" }, "Claim check: the payload is in the producer's store under key ", h("span", { class: "mono", id: "claim-key" }, d.claimCheckKey), "; the body is only the reference.") : null,
      d.claimCheckInline ? h("p", { class: "note" }, "Claim check: an inline payload behind its 3-byte frame (shown without it).") : null,
      d.decoded ? h("p", { class: "note" }, "Decoded (decrypted) with the keyring.") : null,
      d.decodeError ? h("p", { class: "reason" }, "Could not decode the body: " + d.decodeError) : null,
      h("p", { class: "meta" }, (d.bodyKind === "binary" ? "Binary, shown in base64." : d.bodyKind === "json" ? "JSON, indented." : "Text.") + (d.bodyCut ? " Only the first MiB is shown; export the message for all of it." : "")),
      h("pre", { class: "body", id: "body", tabindex: "0" }, d.body));
  }

  // --- live updates ------------------------------------------------------
  function depthOf(l, name) {
    for (const q of l.queues) {
      for (const r of [q, q.dlq, q.parked, ...(q.rungs || [])]) if (r && r.name === name) return r.messages + r.unacked;
    }
    return undefined;
  }
  function connect() {
    const live = document.getElementById("live");
    const es = new EventSource("/api/events");
    es.onopen = () => live.classList.add("on");
    es.onerror = () => live.classList.remove("on");
    es.addEventListener("queues", (e) => {
      const l = JSON.parse(e.data);
      lastList = l;
      document.getElementById("broker").textContent = l.broker + (l.source === "management" ? " · management API" : " · named queues");
      if (acting || rendering || document.getElementById("confirm").open || !current) return;
      if (current.kind === "list") {
        const f = document.activeElement && document.activeElement.id === "filter";
        renderList(l);
        if (f) { const el = document.getElementById("filter"); el.focus(); el.setSelectionRange(el.value.length, el.value.length); }
      } else if (current.kind === "queue" && lastView && lastView.queue === current.queue) {
        // Read the messages again only when the queue's depth is not the
        // one the page was drawn at.
        const d = depthOf(l, current.queue);
        if (d !== undefined && d !== lastView.depth) render(false);
      }
    });
  }

  document.addEventListener("keydown", (e) => {
    if (e.key === "/" && current && current.kind === "list" && document.activeElement.tagName !== "INPUT") {
      e.preventDefault();
      document.getElementById("filter").focus();
    }
  });

  go(location.pathname, false);
  connect();
})();
