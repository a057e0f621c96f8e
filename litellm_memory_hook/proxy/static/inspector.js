// The memory inspector: a page over the memory API (/memory/v1), no build step.
// Every string that came from a user or a model is put into the page as text (textContent,
// text nodes, input values), never as HTML. The key lives in this tab's sessionStorage only.
"use strict";

(() => {
  const API = document.body.dataset.api || "/memory/v1";
  const KEY_STORE = "litellm-memory-inspector-key";
  const PLACEHOLDER = "(next message)";
  const $ = (id) => document.getElementById(id);
  const state = { key: sessionStorage.getItem(KEY_STORE) || "", user: "", model: "", conversation: "" };

  class ApiError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  // An element with text children (strings become text nodes) and a few safe properties.
  function el(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props)) {
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else if (name === "data") Object.assign(node.dataset, value);
      else if (/html/i.test(name)) throw new Error(`refusing to set ${name}`);
      else node[name] = value; // DOM properties (type, value, title, ...): never markup
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function status(text, kind = "info") {
    const node = $("status");
    node.textContent = text;
    node.dataset.kind = kind;
  }

  function when(ms) {
    if (ms === null || ms === undefined) return "-";
    const date = new Date(ms);
    return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
  }

  function relative(ms, now) {
    const seconds = Math.round((ms - now) / 1000);
    const size = Math.abs(seconds);
    const text = size < 120 ? `${size} s` : size < 7200 ? `${Math.round(size / 60)} min` : `${Math.round(size / 3600)} h`;
    return seconds >= 0 ? `in ${text}` : `${text} ago`;
  }

  async function api(method, path, { query = {}, body } = {}) {
    const url = new URL(API + path, window.location.origin);
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
    }
    const headers = { Authorization: `Bearer ${state.key}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 204) return null;
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      let detail = response.statusText || `HTTP ${response.status}`;
      if (data && data.detail !== undefined) {
        detail = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
      }
      throw new ApiError(response.status, detail);
    }
    return data;
  }

  function target() {
    return { user: state.user, model: state.model, conversation: state.conversation || undefined };
  }

  function failed(error) {
    if (error instanceof ApiError && error.status === 401) {
      status(`Key rejected (401): ${error.message}`, "error");
      $("key").focus();
    } else if (error instanceof ApiError) {
      status(`Error ${error.status}: ${error.message}`, "error");
    } else {
      status(`Error: ${error.message || error}`, "error");
    }
  }

  // -- the key and the choice of user / model / conversation -----------------------------------

  async function loadModels() {
    try {
      const data = await api("GET", "/models");
      const list = $("models");
      clear(list);
      for (const model of data.models) list.append(el("option", { value: model.name }));
      if (!$("model").value && data.models.length) $("model").value = data.models[0].name;
    } catch (error) {
      failed(error);
    }
  }

  // The tenant's users (GET /users: sorted, paged, filtered by a part of the id); picking one
  // fills the user field and loads it.
  async function loadUsers(more = false) {
    const list = $("users");
    const search = $("user-search").value.trim();
    const offset = more ? Number(list.dataset.next || 0) : 0;
    try {
      const data = await api("GET", "/users", { query: { search, offset, limit: 50 } });
      if (!more) clear(list);
      for (const user of data.users) {
        const label = `${user.user} · ${user.conversations} conversation(s) · ${when(user.updated_ms)}`;
        const pick = () => {
          $("user").value = user.user;
          readChoice();
          state.conversation = "";
          loadAll();
        };
        list.append(el("li", {}, el("button", { type: "button", class: "user", text: label, onclick: pick })));
      }
      list.dataset.next = data.next_offset === null ? "" : String(data.next_offset);
      $("users-more").hidden = data.next_offset === null;
      const found = search ? `${data.total} user(s) matching "${search}"` : `${data.total} user(s)`;
      $("users-count").textContent = found;
    } catch (error) {
      failed(error);
    }
  }

  async function loadConversations() {
    const select = $("conversation");
    const keep = state.conversation;
    const data = await api("GET", "/conversations", { query: { user: state.user, model: state.model } });
    clear(select);
    select.append(el("option", { value: "", text: "(default conversation)" }));
    for (const c of data.conversations) {
      const label = `${c.id} · ${c.alias || "?"} · ${c.turns} turns · ${when(c.updated_ms)}`;
      select.append(el("option", { value: c.id, text: label }));
    }
    if (keep && !data.conversations.some((c) => c.id === keep)) {
      select.append(el("option", { value: keep, text: `${keep} (not stored yet)` }));
    }
    select.value = keep;
  }

  function rememberChoice() {
    const params = new URLSearchParams();
    if (state.user) params.set("user", state.user);
    if (state.model) params.set("model", state.model);
    if (state.conversation) params.set("conversation", state.conversation);
    window.history.replaceState(null, "", `${window.location.pathname}?${params}`);
  }

  async function loadAll() {
    if (!state.key) {
      status("Paste a LiteLLM key first (the master key, or a key of the tenant to inspect).", "error");
      $("key").focus();
      return;
    }
    if (!state.user || !state.model) {
      status("Name a user and a model.", "error");
      return;
    }
    rememberChoice();
    status("Loading…");
    try {
      await loadConversations();
      await Promise.all([loadPreview(), loadMemories(), loadSummary(), loadQueue(), loadTurns()]);
      $("panels").hidden = false;
      status(`Showing ${state.user} · ${state.model} · ${state.conversation || "default conversation"}`, "ok");
    } catch (error) {
      failed(error);
    }
  }

  // -- panels ------------------------------------------------------------------------------------

  async function loadPreview() {
    const message = $("next-message").value;
    const data = await api("GET", "/preview", { query: { ...target(), message } });
    const body = $("layers").tBodies[0];
    clear(body);
    const total = data.total_chars || 1;
    for (const [layer, chars] of Object.entries(data.layers)) {
      const meter = el("meter", { min: 0, max: total, value: chars, title: `${chars} of ${data.total_chars}` });
      body.append(
        el(
          "tr",
          { class: chars ? "" : "empty", data: { layer } },
          el("th", { scope: "row", text: layer }),
          el("td", { class: "num", text: chars.toLocaleString() }),
          el("td", {}, meter),
        ),
      );
    }
    $("total-chars").textContent = data.total_chars.toLocaleString();
    const note = data.placeholder
      ? `Built for the placeholder message "${PLACEHOLDER}"; type the next message to see what recall adds.`
      : `Built for the message above; ${data.recalled.length} older line(s) recalled.`;
    $("preview-note").textContent = `${note} ${data.stored_turns} turns stored. Nothing is written by a preview.`;
    const list = $("messages");
    clear(list);
    for (const message of data.messages) {
      list.append(
        el(
          "li",
          { class: `message role-${message.role}` },
          el("span", { class: "role", text: message.role }),
          el("span", { class: "chars", text: `${message.text.length.toLocaleString()} chars` }),
          el("pre", { class: "text", text: message.text }),
        ),
      );
    }
  }

  function itemRow(item, kind) {
    const text = el("span", { class: "text", text: item.text });
    const meta = el("span", { class: "meta", text: when(item.created_ms) });
    const row = el("li", { data: { id: item.id } }, text, meta);
    const edit = el("button", { type: "button", text: "Edit", onclick: () => startEdit(row, item, kind) });
    const remove = el("button", { type: "button", class: "danger", text: "Delete", onclick: () => removeItem(item, kind) });
    row.append(el("span", { class: "actions" }, edit, remove));
    return row;
  }

  function startEdit(row, item, kind) {
    clear(row);
    const input = el("input", { value: item.text, class: "edit", ariaLabel: "memory text" });
    const save = el("button", { type: "submit", text: kind === "pinned" ? "Save" : "Save as pinned" });
    const cancel = el("button", { type: "button", text: "Cancel", onclick: () => loadMemories().catch(failed) });
    const form = el("form", { class: "edit-form" }, input, save, cancel);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        if (kind === "pinned") {
          await api("PATCH", `/pinned/${encodeURIComponent(item.id)}`, { body: { ...target(), text: input.value } });
          status("Pinned memory saved.", "ok");
        } else {
          await api("POST", "/pinned", { body: { ...target(), text: input.value } });
          await api("DELETE", `/memories/${encodeURIComponent(item.id)}`, { query: target() });
          status("Saved as a pinned memory; the extracted one is deleted (and not extracted again).", "ok");
        }
        await Promise.all([loadMemories(), loadPreview()]);
      } catch (error) {
        failed(error);
      }
    });
    row.append(form);
    input.focus();
  }

  async function removeItem(item, kind) {
    const what = kind === "pinned" ? "pinned memory" : "extracted memory";
    if (!window.confirm(`Delete this ${what}?\n\n${item.text}`)) return;
    try {
      const path = kind === "pinned" ? "/pinned/" : "/memories/";
      await api("DELETE", path + encodeURIComponent(item.id), { query: target() });
      status(`The ${what} is deleted.`, "ok");
      await Promise.all([loadMemories(), loadPreview()]);
    } catch (error) {
      failed(error);
    }
  }

  async function loadMemories() {
    const data = await api("GET", "/memories", { query: target() });
    for (const [id, items, kind] of [
      ["pinned", data.pinned, "pinned"],
      ["extracted", data.memories, "extracted"],
    ]) {
      const list = $(id);
      clear(list);
      for (const item of items) list.append(itemRow(item, kind));
      if (!items.length) list.append(el("li", { class: "none", text: "none" }));
    }
  }

  function describe(list, pairs) {
    clear(list);
    for (const [term, value] of pairs) list.append(el("dt", { text: term }), el("dd", { text: value }));
  }

  async function loadSummary() {
    const data = await api("GET", "/summary", { query: target() });
    $("summary").textContent = data.summary || "No summary yet (it is written by the first extraction job).";
    $("summary").classList.toggle("none", !data.summary);
    describe($("summary-state"), [
      ["messages stored through seq", String(data.seq)],
      ["extracted through seq", String(data.cursor)],
      ["waiting for extraction", String(Math.max(0, data.seq - data.cursor))],
    ]);
  }

  async function loadQueue() {
    const data = await api("GET", "/queue", { query: target() });
    const due = data.due_ms === null ? "not scheduled" : `${when(data.due_ms)} (${relative(data.due_ms, data.now_ms)})`;
    const position = data.position === null ? "-" : `${data.position} of ${data.queued}`;
    describe($("queue"), [
      ["due", due],
      ["position in the due queue", position],
      ["conversations due now (all tenants)", String(data.overdue)],
      ["job running (lease held)", data.leased ? "yes" : "no"],
      ["extraction workers alive", data.workers === 0 && data.queued > 0
        ? "0: queued jobs wait until a worker runs"
        : String(data.workers)],
    ]);
  }

  async function loadTurns() {
    const data = await api("GET", "/turns", { query: { ...target(), limit: 30 } });
    const body = $("turns").tBodies[0];
    clear(body);
    for (const turn of data.turns) {
      const text = turn.text || (turn.tool_calls ? `[${turn.tool_calls} tool call(s)]` : "");
      const role = turn.name ? `${turn.role} (${turn.name})` : turn.role;
      body.append(
        el(
          "tr",
          { class: `role-${turn.role}${turn.partial ? " partial" : ""}` },
          el("td", { class: "num", text: String(turn.seq) }),
          el("td", { class: "time", text: when(turn.ts_ms) }),
          el("td", { class: "role", text: turn.partial ? `${role}, cut short` : role }),
          el("td", { class: "text", text }),
        ),
      );
    }
    if (!data.turns.length) body.append(el("tr", {}, el("td", { colSpan: 4, class: "none", text: "no stored turns" })));
    $("turns-count").textContent = `(${data.turns.length} of ${data.total})`;
  }

  // -- wiring ------------------------------------------------------------------------------------

  function readChoice() {
    state.user = $("user").value.trim();
    state.model = $("model").value.trim();
    state.conversation = $("conversation").value;
  }

  function init() {
    const params = new URLSearchParams(window.location.search);
    $("user").value = params.get("user") || "";
    $("model").value = params.get("model") || "";
    state.conversation = params.get("conversation") || "";
    if (state.conversation) {
      $("conversation").append(el("option", { value: state.conversation, text: state.conversation }));
      $("conversation").value = state.conversation;
    }
    $("key").value = state.key;

    $("key-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      state.key = $("key").value.trim();
      sessionStorage.setItem(KEY_STORE, state.key);
      status("Key set for this tab.", "ok");
      await loadModels();
      await loadUsers();
      if ($("user").value.trim()) {
        readChoice();
        loadAll();
      }
    });
    $("users-form").addEventListener("submit", (event) => {
      event.preventDefault();
      loadUsers();
    });
    $("users-more").addEventListener("click", () => loadUsers(true));
    $("forget-key").addEventListener("click", () => {
      sessionStorage.removeItem(KEY_STORE);
      state.key = "";
      $("key").value = "";
      $("panels").hidden = true;
      status("Key forgotten.", "ok");
    });
    $("pick").addEventListener("submit", (event) => {
      event.preventDefault();
      const userChanged = $("user").value.trim() !== state.user;
      readChoice();
      if (userChanged) state.conversation = "";
      loadAll();
    });
    $("user").addEventListener("change", () => {
      $("conversation").value = "";
    });
    $("conversation").addEventListener("change", () => {
      readChoice();
      loadAll();
    });
    $("refresh").addEventListener("click", () => {
      readChoice();
      loadAll();
    });
    $("preview-form").addEventListener("submit", (event) => {
      event.preventDefault();
      loadPreview().catch(failed);
    });
    $("pin-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = $("pin-text").value;
      try {
        await api("POST", "/pinned", { body: { ...target(), text } });
        $("pin-text").value = "";
        status("Pinned.", "ok");
        await Promise.all([loadMemories(), loadPreview()]);
      } catch (error) {
        failed(error);
      }
    });
    $("flush").addEventListener("click", async () => {
      try {
        await api("POST", "/flush", { body: target() });
        status("Extraction requested: a worker runs the job now.", "ok");
        await loadQueue();
      } catch (error) {
        failed(error);
      }
    });

    if (state.key) {
      loadModels().then(() => {
        loadUsers();
        readChoice();
        if (state.user && state.model) loadAll();
      });
    } else {
      status("Paste a LiteLLM key to start.");
      $("key").focus();
    }
  }

  init();
})();
