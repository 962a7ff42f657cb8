// agentrt web UI. No framework; no inline script anywhere (the CSP forbids it).
// Agent text is only ever inserted with textContent while it streams; the
// finished reply is HTML rendered (and sanitized by construction) on the server.
"use strict";

(function () {
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;

  async function post(url, body) {
    const res = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrf() },
      body: body === undefined ? "{}" : JSON.stringify(body),
      credentials: "same-origin",
    });
    let data = {};
    try { data = await res.json(); } catch (e) { data = {}; }
    return { ok: res.ok, status: res.status, data: data };
  }

  // A live stream that resumes where the page left off: the page was drawn at data-last,
  // the server replays what came after it, and the browser's own reconnects send
  // Last-Event-ID.  When the server cannot replay (restarted, or we fell too far behind)
  // it says "reload" and the page redraws from the server.
  function live(url, onMessage) {
    const last = document.body.dataset.last || "";
    const es = new EventSource(url + (last ? "?last=" + encodeURIComponent(last) : ""));
    es.onmessage = onMessage;
    es.addEventListener("reload", () => { es.close(); window.location.reload(); });
    es.onerror = () => {
      // CONNECTING: the browser retries by itself.  CLOSED: it gave up (e.g. 401).
      if (es.readyState === EventSource.CLOSED) window.setTimeout(() => window.location.reload(), 2000);
    };
    return es;
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // ---- threads sidebar ---------------------------------------------------
  function initSidebar() {
    // The agent of a new thread (as a chat app picks a model): the last one picked in this browser.
    const pick = document.getElementById("new-agent");
    if (pick) {
      let remembered = null;
      try { remembered = window.localStorage.getItem("agentrt.newAgent"); } catch (e) { remembered = null; }
      if (remembered !== null && [...pick.options].some((o) => o.value === remembered)) pick.value = remembered;
      pick.addEventListener("change", () => {
        try { window.localStorage.setItem("agentrt.newAgent", pick.value); } catch (e) { /* private mode */ }
      });
    }
    const btn = document.getElementById("new-thread");
    if (btn) {
      btn.addEventListener("click", async () => {
        const r = await post("/api/threads", pick && pick.value ? { agent: pick.value } : undefined);
        if (r.ok) window.location.assign(r.data.url);
        else window.alert("Could not start a thread: " + ((r.data.error && r.data.error.detail) || r.status));
      });
    }
    const search = document.getElementById("thread-search");
    if (search) {
      search.addEventListener("input", () => {
        const q = search.value.trim().toLowerCase();
        document.querySelectorAll("#thread-list li[data-name]").forEach((li) => {
          const hit = !q || li.dataset.title.includes(q) || li.dataset.name.toLowerCase().includes(q);
          li.hidden = !hit;
        });
      });
    }
    document.querySelectorAll("#thread-list button.rename").forEach((b) => {
      b.addEventListener("click", async (ev) => {
        ev.preventDefault();
        const name = b.dataset.name;
        const fresh = window.prompt("New name for this thread (letters, digits, . _ -):", name);
        if (fresh === null || !fresh.trim() || fresh.trim() === name) return;
        const r = await post("/api/threads/" + encodeURIComponent(name) + "/rename", { name: fresh.trim() });
        if (!r.ok) {
          const err = (r.data && r.data.error) || { code: "http_" + r.status, detail: "" };
          window.alert("Could not rename the thread: " + (err.detail || err.code));
        } else if (document.body.dataset.thread === name) {
          window.location.assign(r.data.url);
        } else {
          window.location.reload();
        }
      });
    });
    // On a narrow screen the thread list is a drawer behind the ☰ button.
    const toggle = document.getElementById("toggle-threads");
    if (toggle) {
      toggle.addEventListener("click", () => {
        const open = document.body.classList.toggle("threads-open");
        toggle.setAttribute("aria-expanded", String(open));
      });
    }
    document.querySelectorAll("#thread-list button.delete").forEach((b) => {
      b.addEventListener("click", async (ev) => {
        ev.preventDefault();
        const name = b.dataset.name;
        if (!window.confirm("Delete this thread and its history?")) return;
        const r = await post("/api/threads/" + encodeURIComponent(name) + "/delete");
        if (r.ok) {
          if (document.body.dataset.thread === name) window.location.assign("/");
          else b.closest("li").remove();
        }
      });
    });
  }

  // ---- one conversation ---------------------------------------------------
  // A streaming reply is drawn as the Markdown the server rendered of it so far (an "md"
  // message, at most a few a second) plus, as plain text, whatever arrived after it.
  // The finished reply is the server's rendering of the whole.
  const FLOW_INTO = /^(P|LI|UL|OL|BLOCKQUOTE|PRE|CODE|H[1-6])$/;

  function drawStreaming(bubble) {
    const text = bubble.dataset.text || "";
    const upto = Number(bubble.dataset.upto || 0);
    let rendered = bubble.querySelector(".rendered");
    if (!rendered) { rendered = el("div", "rendered"); bubble.prepend(rendered); }
    let tail = bubble.querySelector(".stream");
    if (!tail) tail = el("span", "stream");
    // The rendering drops the whitespace it ended with: a blank line starts a new block,
    // anything else continues the last paragraph (or list item, or code block) in place.
    const done = text.slice(0, upto);
    const newBlock = upto === 0 || /\n[ \t]*\n[ \t]*$/.test(done);
    tail.textContent = (!newBlock && /\s$/.test(done) ? " " : "") + text.slice(upto);
    let host = rendered;
    if (!newBlock) {
      while (host.lastElementChild && FLOW_INTO.test(host.lastElementChild.tagName)) host = host.lastElementChild;
    }
    if (tail.parentNode !== host || tail !== host.lastChild) host.appendChild(tail);
  }

  // A tool step reads its label while it runs ("Running: git status"), then what it was about and how
  // it ended ("git status — done", "— failed", "— stopped"); the mark before it is the CSS's.
  const STEP_WORDS = { done: "done", error: "failed", stopped: "stopped" };
  function drawStep(li, state) {
    li.className = "step " + state;
    const word = STEP_WORDS[state];
    li.textContent = word ? (li.dataset.subject || li.dataset.label || "") + " — " + word : (li.dataset.label || "");
  }

  function initChat() {
    const thread = document.body.dataset.thread;
    if (!thread) return;
    const messages = document.getElementById("messages");
    const form = document.getElementById("composer");
    const prompt = document.getElementById("prompt");
    const stopBtn = document.getElementById("stop");
    const sendBtn = document.getElementById("send");
    const modelName = document.getElementById("agent-model");
    let current = document.getElementById("live-turn");
    let lastPrompt = "";
    if (current) {
      const bubble = current.querySelector(".reply");
      bubble.dataset.upto = String(bubble.dataset.text.length);
      drawStreaming(bubble);
    }

    // Follow the reply only while the reader is at the bottom: scrolling up to read
    // stops the page from jumping; scrolling back down resumes following.
    let stick = true;
    const atBottom = () => messages.scrollHeight - messages.scrollTop - messages.clientHeight < 40;
    messages.addEventListener("scroll", () => { stick = atBottom(); }, { passive: true });
    function scroll(force) {
      if (force) stick = true;
      if (stick) messages.scrollTop = messages.scrollHeight;
    }

    // While a turn runs the composer queues: Enter (or Send) adds the message to a queue shown under
    // the reply, and each is sent, in order, when the turn before it ends.  The queue lives in the page,
    // and in the tab's sessionStorage: a reload (or a crash of the page) keeps it.
    const queue = [];
    const QUEUE_KEY = "agentrt.queue:" + thread;
    function saveQueue() {
      try {
        if (queue.length) sessionStorage.setItem(QUEUE_KEY, JSON.stringify(queue.map((q) => q.text)));
        else sessionStorage.removeItem(QUEUE_KEY);
      } catch (e) {
        // Storage full or switched off: the queue lives in the page only.
      }
    }
    function storedQueue() {
      try {
        const texts = JSON.parse(sessionStorage.getItem(QUEUE_KEY) || "[]");
        return Array.isArray(texts) ? texts.filter((t) => typeof t === "string" && t.trim()) : [];
      } catch (e) {
        return [];
      }
    }
    let sending = null;
    const isBusy = () => document.body.classList.contains("busy");

    function busy(on) {
      stopBtn.hidden = !on;
      sendBtn.title = on ? "Queue this message: it is sent when the reply ends" : "Send";
      document.body.classList.toggle("busy", on);
    }
    busy(!!current);

    function actions(a, promptText, canCopy) {
      const box = a.querySelector(".meta .actions");
      box.textContent = "";
      if (canCopy) {
        const copy = el("button", "copy", "Copy");
        copy.type = "button";
        copy.title = "Copy the reply";
        box.appendChild(copy);
      }
      const regen = el("button", "regenerate", "Regenerate");
      regen.type = "button";
      regen.title = "Send the last message again";
      regen.dataset.prompt = promptText;
      box.appendChild(regen);
    }

    function newTurn(promptText) {
      // A new turn goes before the queued messages: they are sent after it.
      const queued = messages.querySelector(".msg.queued");
      const user = el("div", "msg user");
      user.appendChild(el("div", "bubble", promptText));
      messages.insertBefore(user, queued);
      const a = el("div", "msg assistant streaming");
      a.appendChild(el("ul", "steps"));
      const bubble = el("div", "bubble reply");
      bubble.dataset.text = "";
      bubble.dataset.upto = "0";
      bubble.appendChild(el("div", "rendered"));
      a.appendChild(bubble);
      a.appendChild(el("div", "status"));
      const meta = el("div", "meta");
      meta.appendChild(el("span", "figures"));
      meta.appendChild(el("span", "actions"));
      a.appendChild(meta);
      messages.insertBefore(a, queued);
      a.dataset.prompt = promptText;
      current = a;
      scroll(true);
      return a;
    }

    function ensureTurn() { return current || newTurn(lastPrompt); }

    // A new thread is listed under its name until its first message gives it a title.
    function retitle(promptText) {
      const title = document.querySelector("#thread-list li.current .title");
      const first = (promptText || "").trim().split("\n")[0].trim();
      if (title && title.textContent === thread && first && /^[a-z]+-\d{8}-\d{6}-[0-9a-f]+$/.test(thread)) {
        title.textContent = first.length > 60 ? first.slice(0, 59) + "…" : first;
        title.closest("li").dataset.title = first.toLowerCase();
      }
    }

    function meta(node, m) {
      const parts = [];
      if (m.usage && m.usage.input_tokens !== undefined) {
        parts.push(m.usage.input_tokens + " in · " + (m.usage.output_tokens || 0) + " out");
      }
      if (m.duration !== null && m.duration !== undefined) parts.push(m.duration.toFixed(2) + " s");
      node.querySelector(".meta .figures").textContent = parts.join(" · ");
    }

    function finish(m) {
      const a = ensureTurn();
      a.classList.remove("streaming");
      a.querySelector(".status").textContent = "";
      // Steps the agent never reported a result for end with the turn.
      const open = new Set(m.steps || []);
      a.querySelectorAll(".steps li.running").forEach((li) => {
        if (!m.steps || open.has(li.dataset.id)) drawStep(li, m.step_state || "stopped");
      });
      const bubble = a.querySelector(".bubble");
      const hasText = !!(m.html && m.html.trim());
      if (m.k === "done") {
        // Server-rendered Markdown: markdown-it with raw HTML disabled and its link validator.
        bubble.innerHTML = m.html;
        actions(a, lastPrompt, hasText);
      } else if (m.code === "turn_cancelled") {
        bubble.innerHTML = m.html;
        bubble.appendChild(el("p", "stopped", "Stopped."));
        actions(a, lastPrompt, hasText);
      } else {
        a.classList.add("failed");
        bubble.className = "bubble error-bubble";
        bubble.setAttribute("role", "alert");
        bubble.innerHTML = m.html;
        const code = el("p", "error-code");
        code.appendChild(el("code", "", m.code));
        if (m.message) {
          code.appendChild(document.createTextNode(" "));
          code.appendChild(el("span", "error-message", m.message));
        }
        bubble.appendChild(code);
        const retry = el("button", "retry", "Retry");
        retry.type = "button";
        retry.dataset.prompt = lastPrompt;
        bubble.appendChild(retry);
        if (hasText) actions(a, lastPrompt, true);
        a.querySelectorAll(".meta .regenerate").forEach((b) => b.remove());
      }
      delete bubble.dataset.text;
      delete bubble.dataset.upto;
      meta(a, m);
      a.removeAttribute("id");
      current = null;
      busy(false);
      scroll();
      pump();
    }

    function enqueue(text, first) {
      const node = el("div", "msg user queued");
      node.appendChild(el("div", "bubble", text));
      const note = el("div", "queued-note", "Queued: sent when the reply ends ");
      const drop = el("button", "unqueue", "Remove");
      drop.type = "button";
      drop.title = "Do not send this message";
      note.appendChild(drop);
      node.appendChild(note);
      const item = { text: text, node: node };
      drop.addEventListener("click", () => {
        const i = queue.indexOf(item);
        if (i >= 0) queue.splice(i, 1);
        node.remove();
        saveQueue();
      });
      if (first) {
        queue.unshift(item);
        messages.insertBefore(node, messages.querySelector(".msg.queued"));
      } else {
        queue.push(item);
        messages.appendChild(node);
      }
      saveQueue();
      scroll(true);
    }

    function pump() {
      if (isBusy() || !queue.length) return;
      const next = queue.shift();
      next.node.remove();
      saveQueue();
      send(next.text);
    }

    function submitText(text) {
      if (!text.trim()) return;
      if (isBusy()) enqueue(text, false);
      else send(text);
    }

    // Tool approval: a card with Approve / Deny; approval_done (any page's answer,
    // or the server's timeout) closes it, with the decision and any note.
    function approvalCard(m) {
      const card = el("div", "approval");
      card.dataset.id = m.id;
      card.setAttribute("role", "alertdialog");
      card.appendChild(el("div", "question", "Allow " + m.label + "?"));
      if (m.summary) card.appendChild(el("code", "summary", m.summary));
      const buttons = el("div", "buttons");
      const always = "Approve, and approve " + (m.always || "the same request") + " in this thread without asking";
      for (const [decision, text, title] of [["allow", "Approve", "Approve this once"], ["always", "Always", always],
                                             ["deny", "Deny", "Refuse this tool call"]]) {
        const b = el("button", decision, text);
        b.type = "button";
        b.title = title;
        b.addEventListener("click", async () => {
          buttons.querySelectorAll("button").forEach((x) => { x.disabled = true; });
          const res = await post("/api/threads/" + encodeURIComponent(thread) + "/approvals/" +
                                 encodeURIComponent(m.id), { decision: decision });
          if (!res.ok) buttons.querySelectorAll("button").forEach((x) => { x.disabled = false; });
        });
        buttons.appendChild(b);
      }
      card.appendChild(buttons);
      card.appendChild(el("div", "note", "Denied automatically in " + Math.round(m.timeout) + " s"));
      const a = ensureTurn();
      a.insertBefore(card, a.querySelector(".bubble"));
      scroll();
    }

    function approvalDone(m) {
      messages.querySelectorAll(".approval").forEach((card) => {
        if (card.dataset.id !== m.id) return;
        card.classList.add("answered", m.decision === "deny" ? "denied" : "allowed");
        card.querySelectorAll("button").forEach((b) => b.remove());
        card.querySelector(".note").textContent = (m.decision === "deny" ? "Denied" : "Approved") +
          (m.decision === "always" ? " (always, in this thread)" : "") + (m.note ? ": " + m.note : "");
      });
    }

    // "Waiting for the model" ends when the model's words (or a tool step) arrive.
    function settle() {
      const status = current && current.querySelector(".status");
      if (status && status.dataset.transient) {
        status.textContent = "";
        delete status.dataset.transient;
      }
    }

    function apply(m) {
      switch (m.k) {
        case "approval":
          approvalCard(m);
          break;
        case "approval_done":
          approvalDone(m);
          break;
        case "turn_started":
          lastPrompt = m.prompt;
          // This page's own message takes its turn; another page's gets a turn of its own.
          if (!current || current.dataset.turn || current.dataset.prompt !== m.prompt) newTurn(m.prompt);
          current.dataset.turn = String(m.turn);
          if (m.key) current.dataset.key = m.key;
          busy(true);
          retitle(m.prompt);
          break;
        case "text": {
          settle();
          const bubble = ensureTurn().querySelector(".reply");
          if (bubble && bubble.dataset.text !== undefined) {
            bubble.dataset.text += m.text;
            drawStreaming(bubble);
          }
          scroll();
          break;
        }
        case "md": {
          const bubble = ensureTurn().querySelector(".reply");
          if (bubble && bubble.dataset.text !== undefined) {
            const tail = bubble.querySelector(".stream");
            if (tail) tail.remove();
            bubble.querySelector(".rendered").innerHTML = m.html; // rendered safely on the server
            bubble.dataset.upto = String(m.n);
            drawStreaming(bubble);
          }
          scroll();
          break;
        }
        case "tool": {
          const steps = ensureTurn().querySelector(".steps");
          let li = [...steps.children].find((n) => m.id && n.dataset.id === m.id);
          if (!li) {
            li = el("li", "step running");
            li.dataset.id = m.id;
            steps.appendChild(li);
          }
          li.dataset.label = m.label;
          li.dataset.subject = m.subject || m.label;
          drawStep(li, li.classList.contains("running") ? "running" : li.className.replace("step ", ""));
          settle();
          scroll();
          break;
        }
        case "tool_result":
          ensureTurn().querySelectorAll(".steps li").forEach((li) => {
            if (li.dataset.id === m.id) drawStep(li, m.state);
          });
          break;
        case "status": {
          const status = ensureTurn().querySelector(".status");
          status.textContent = m.label;
          if (m.transient && m.label) status.dataset.transient = "1";
          else delete status.dataset.transient;
          break;
        }
        case "session":
          if (modelName && m.model) modelName.textContent = m.model;
          break;
        case "done":
        case "failed":
          finish(m);
          break;
        default:
          break;
      }
    }

    live("/events/threads/" + encodeURIComponent(thread), (ev) => {
      const data = JSON.parse(ev.data);
      for (const m of data.m) apply(m);
    });

    async function send(text) {
      if (!text.trim()) return;
      lastPrompt = text;
      const a = newTurn(text);
      busy(true);
      sending = post("/api/threads/" + encodeURIComponent(thread) + "/messages", { text: text });
      const r = await sending;
      sending = null;
      if (r.ok) {
        if (r.data.turn && !a.dataset.key) a.dataset.key = r.data.turn;
        return;
      }
      const err = (r.data && r.data.error) || { code: "http_" + r.status, detail: "the server answered " + r.status };
      if (err.code === "turn_in_progress" && !a.dataset.turn) {
        // Another page's turn runs: this message waits for it, first in the queue.
        if (a.previousElementSibling) a.previousElementSibling.remove();
        a.remove();
        if (current === a) current = null;
        enqueue(text, true);
        if (!current) window.setTimeout(() => { if (!current) { busy(false); pump(); } }, 1500);
        return;
      }
      current = a;
      finish({ k: "failed", html: "", code: err.code, message: err.detail, usage: null, duration: null });
    }

    // A Stop names the turn it was pressed for (its key, from the server): one that arrives after
    // that turn ended never stops a later one.
    async function stop() {
      stopBtn.disabled = true;
      if (sending) await sending;
      const key = current && current.dataset.key;
      if (key) await post("/api/threads/" + encodeURIComponent(thread) + "/cancel", { turn: key });
      stopBtn.disabled = false;
    }

    async function copyText(text, button) {
      try {
        await navigator.clipboard.writeText(text);
      } catch (e) {
        // No clipboard API (an insecure origin): copy through a selection instead.
        const area = el("textarea", "offscreen");
        area.value = text;
        document.body.appendChild(area);
        area.select();
        document.execCommand("copy");
        area.remove();
      }
      button.textContent = "Copied";
      window.setTimeout(() => { button.textContent = "Copy"; }, 1500);
    }

    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const text = prompt.value;
      prompt.value = "";
      submitText(text);
    });
    prompt.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey) {
        ev.preventDefault();
        form.requestSubmit();
      }
    });
    stopBtn.addEventListener("click", stop);
    // Esc stops the turn in flight, wherever the focus is (dialogs handle their own Esc).
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && !stopBtn.hidden && !stopBtn.disabled) {
        ev.preventDefault();
        stop();
      }
    });
    messages.addEventListener("click", (ev) => {
      const t = ev.target;
      if (!(t instanceof HTMLButtonElement)) return;
      if (t.classList.contains("retry")) submitText(t.dataset.prompt || lastPrompt);
      else if (t.classList.contains("regenerate") && !isBusy()) {
        send(t.dataset.prompt || lastPrompt);
      } else if (t.classList.contains("copy")) {
        // The reply as the reader sees it, without the page's own notes (Stopped, error code, Retry).
        const bubble = t.closest(".msg").querySelector(".bubble");
        const parts = [...bubble.children].filter((n) => !n.matches(".error-code, .retry, .stopped"));
        copyText(parts.map((n) => n.innerText.trim()).filter(Boolean).join("\n\n"), t);
      }
    });
    // Messages queued before a reload: queued again, in order; sent now if no turn runs any more.
    for (const text of storedQueue()) enqueue(text, false);
    pump();
    scroll(true);
  }

  // ---- bots -----------------------------------------------------------------
  function initConfirmForms() {
    document.addEventListener("submit", (ev) => {
      const f = ev.target;
      if (f instanceof HTMLFormElement && f.classList.contains("confirm")) {
        if (!window.confirm(f.dataset.confirm || "Are you sure?")) ev.preventDefault();
      }
    });
  }

  function initBots() {
    if (!document.body.classList.contains("bots-page")) return;
    live("/events/bots", (ev) => {
      const data = JSON.parse(ev.data);
      const b = data.bot;
      if (!b) return;
      const row = document.querySelector('#bot-table tr[data-bot="' + CSS.escape(b.bot_id) + '"]');
      if (!row) { window.location.reload(); return; }
      const badge = row.querySelector('[data-field="status"]');
      badge.textContent = b.status;
      badge.className = "badge " + b.status;
      row.querySelector('[data-field="desired_state"]').textContent = b.desired_state;
      row.querySelector('[data-field="restart_count"]').textContent = String(b.restart_count);
      row.querySelector('[data-field="last_error_code"]').textContent = b.last_error_code || "";
      recount();
    });
  }

  function recount() {
    const counts = {};
    document.querySelectorAll('#bot-table [data-field="status"]').forEach((n) => {
      counts[n.textContent] = (counts[n.textContent] || 0) + 1;
    });
    const p = document.getElementById("bot-counts");
    p.textContent = "";
    Object.keys(counts).sort().forEach((s) => {
      const span = el("span", "badge " + s, counts[s] + " " + s);
      span.dataset.state = s;
      p.appendChild(span);
      p.appendChild(document.createTextNode(" "));
    });
  }

  function initBot() {
    const id = document.body.dataset.bot;
    if (!id) return;
    let pending = null;
    async function refresh() {
      // The body is rendered (and escaped) on the server; the fragment replaces the old one.
      const res = await fetch("/bots/" + encodeURIComponent(id) + "?fragment=1", { credentials: "same-origin" });
      if (!res.ok) return;
      const html = await res.text();
      const tpl = document.createElement("template");
      tpl.innerHTML = html;
      const fresh = tpl.content.getElementById("bot-body");
      const old = document.getElementById("bot-body");
      if (fresh && old) old.replaceWith(fresh);
    }
    live("/events/bots/" + encodeURIComponent(id), () => {
      if (pending) return;
      pending = window.setTimeout(async () => { pending = null; await refresh(); }, 50);
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    initSidebar();
    initChat();
    initConfirmForms();
    initBots();
    initBot();
  });
})();
