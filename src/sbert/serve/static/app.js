// The sbert service's page: search the index and compare sentences through the service's own JSON
// endpoints (/info, /search, /similarity). No framework, no build step. An API key the person gives is
// kept in sessionStorage (this tab only) and sent as "Authorization: Bearer KEY".
"use strict";

const KEY_STORE = "sbert-api-key";
const state = { key: sessionStorage.getItem(KEY_STORE) || "", info: null };
const $ = (id) => document.getElementById(id);

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// GET (no body) or POST JSON to one of the service's endpoints; its JSON answer, or an ApiError.
async function api(path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (state.key) headers.Authorization = "Bearer " + state.key;
  const init = { method: body === undefined ? "GET" : "POST", headers };
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, "The server cannot be reached (" + err.message + "): is sbert serve still running?");
  }
  let payload = null;
  try {
    payload = await response.json();
  } catch {
    // not JSON: a proxy's page, say; the status says enough
  }
  if (!response.ok) {
    const said = payload && payload.error && payload.error.message;
    throw new ApiError(response.status, said || "HTTP " + response.status + " " + response.statusText);
  }
  return payload;
}

function showError(err) {
  let text = err.message;
  if (err.status === 401) {
    text = (state.key ? "The API key was refused" : "This server needs an API key") +
      ": enter it above (401: " + err.message + ").";
    $("key-form").hidden = false;
    $("key").focus();
  } else if (err.status >= 500) {
    text = "The server failed (" + err.status + "): " + err.message;
  } else if (err.status) {
    text = "The server refused the request (" + err.status + "): " + err.message;
  }
  $("error").textContent = text;
  $("error").hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

function plural(n, word) {
  return n + " " + word + (n === 1 ? "" : "s");
}

// The index searched: the only one, or the one chosen where the server serves several by name.
function chosenIndex(info) {
  return info.indexes ? info.indexes[$("index").value] : info.index;
}

// The choice of index, where the server serves several (each by its name).
function listIndexes(info) {
  const names = Object.keys(info.indexes || {});
  const kept = $("index").value;
  $("index").replaceChildren(...names.map((name) => element("option", "", name)));
  if (names.includes(kept)) $("index").value = kept;
  $("index-option").hidden = names.length === 0;
}

// The model and index line of the header, and the search options the index allows.
function describe(info) {
  const index = chosenIndex(info);
  let where = "no index loaded (start sbert serve with --index DIR to search)";
  if (index && index.documents) {
    where = "index of " + plural(index.size, "document") + " (" + plural(index.rows, "passage") + ")";
  } else if (index) {
    where = "index of " + plural(index.size, "text");
  }
  const about = $("about");
  about.replaceChildren();
  const parts = [["model", info.model], ["dim", info.dim + " dimensions"], ["similarity", info.similarity],
    ["index-size", where]];
  parts.forEach(([id, text], i) => {
    if (i) about.append(" · ");
    const span = document.createElement("span");
    span.id = id;
    span.textContent = text;
    about.append(span);
  });
  const lexical = Boolean(index && index.lexical);
  if (lexical && $("hybrid-option").hidden) $("hybrid").checked = true; // as the server searches it by default
  $("hybrid-option").hidden = !lexical;
}

async function loadInfo() {
  try {
    state.info = await api("info");
    clearError();
    $("key-form").hidden = true;
    listIndexes(state.info);
    describe(state.info);
  } catch (err) {
    $("about").textContent = "Not connected.";
    showError(err);
  }
}

function useKey(event) {
  event.preventDefault();
  state.key = $("key").value.trim();
  if (state.key) sessionStorage.setItem(KEY_STORE, state.key);
  else sessionStorage.removeItem(KEY_STORE);
  loadInfo();
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// The text shown under a title: without the title it begins with (the index embeds "title text").
function body(hit) {
  if (hit.title && hit.text && hit.text.startsWith(hit.title + " ")) return hit.text.slice(hit.title.length + 1);
  return hit.text;
}

// One result: its id and score (with a bar; with a lead asked, the top hit's lead), its title (if any), its
// text or, in an index of documents, its best passage. Everything is set as textContent: a title or text is
// never read as HTML.
function hitItem(hit) {
  const item = element("li", "hit");
  const head = element("div", "hit-head");
  head.append(element("span", "hit-id", hit.id));
  if ("lead" in hit) {
    head.append(element("span", "lead", hit.lead === null ? "the only hit" : "leads by " + hit.lead.toFixed(4)));
  }
  head.append(element("span", "score", hit.score.toFixed(4))); // at the right, the lead just before it
  const bar = element("div", "bar");
  bar.style.width = Math.max(0, Math.min(1, hit.score)) * 100 + "%";
  item.append(head, bar);
  if (hit.title) item.append(element("p", "hit-title", hit.title));
  if (hit.text !== null && hit.text !== undefined) item.append(element("p", "hit-text", body(hit)));
  if (hit.span) {
    item.append(element("p", "span", "best passage: characters " + hit.span[0] + "–" + hit.span[1] + " of the document"));
  }
  return item;
}

// A cut-off ("at least", "leads by") is a cosine, so a search with one is dense, as sbert search's is: the
// hybrid box is greyed out while one is set, and says why.
function cutOffs() {
  const set = $("threshold").value.trim() !== "" || $("lead").value.trim() !== "";
  $("hybrid").disabled = set;
  $("hybrid-option").title = set ? "a cut-off is a cosine: the search is dense" : "";
}

async function search(event) {
  event.preventDefault();
  clearError();
  $("results").replaceChildren();
  $("search-status").textContent = ""; // the last search's "10 results for …" belongs to its results
  const query = $("query").value.trim();
  if (!query) {
    showError(new ApiError(0, "Type a query to search the index."));
    return;
  }
  const body = { query, k: Number($("k").value) };
  if (state.info && state.info.indexes) body.index = $("index").value;
  const least = $("threshold").value.trim();
  const lead = $("lead").value.trim();
  if (least !== "") body.threshold = Number(least); // a cosine: the server searches dense, as sbert search does
  if (lead !== "") body.lead = Number(lead); // a cosine margin: dense too, the top hit alone
  if (least === "" && lead === "" && !$("hybrid-option").hidden) body.hybrid = $("hybrid").checked;
  $("search-status").textContent = "Searching…";
  try {
    const hits = (await api("search", body)).results[0].hits;
    $("results").replaceChildren(...hits.map(hitItem));
    const none =
      lead !== ""
        ? "No hit stands out by " + lead + (least !== "" ? " at least " + least + " similar" : "") + ": the top hit is not clearly a duplicate."
        : least !== ""
          ? "Nothing at least " + least + " similar: no hit reaches the threshold."
          : "No results.";
    $("search-status").textContent = hits.length ? plural(hits.length, "result") + " for “" + query + "”" : none;
  } catch (err) {
    $("search-status").textContent = "";
    showError(err);
  }
}

// A cell's colour: cosine from 0 (white) to 1 (dark blue); other similarities scaled to the matrix's range.
function shade(value, low, high) {
  const t = high > low ? (value - low) / (high - low) : 1;
  const clamped = Math.max(0, Math.min(1, t));
  return ["hsl(212, 70%, " + (97 - 60 * clamped) + "%)", clamped > 0.55 ? "#fff" : "#111"];
}

function drawHeatmap(sentences, scores, similarity) {
  const table = $("heatmap");
  const flat = scores.flat();
  const [low, high] = similarity === "cosine" ? [0, 1] : [Math.min(...flat), Math.max(...flat)];
  const caption = element("caption", "", similarity + " similarity of each pair of sentences (darker: more similar)");
  const header = element("tr");
  header.append(element("th"));
  sentences.forEach((_, j) => {
    const th = element("th", "col", String(j + 1));
    th.title = sentences[j];
    header.append(th);
  });
  const rows = scores.map((row, i) => {
    const tr = element("tr");
    tr.append(element("th", "row", i + 1 + ". " + sentences[i]));
    row.forEach((value) => {
      const td = element("td", "cell", value.toFixed(3));
      [td.style.background, td.style.color] = shade(value, low, high);
      td.dataset.value = String(value);
      tr.append(td);
    });
    return tr;
  });
  table.replaceChildren(caption, element("thead"), element("tbody"));
  table.tHead.append(header);
  table.tBodies[0].append(...rows);
}

async function compare(event) {
  event.preventDefault();
  clearError();
  $("heatmap").replaceChildren();
  const sentences = $("sentences").value.split("\n").map((s) => s.trim()).filter(Boolean);
  if (sentences.length < 2) {
    showError(new ApiError(0, "Enter at least two sentences, one per line."));
    return;
  }
  $("similarity-status").textContent = "Comparing…";
  try {
    const answer = await api("similarity", { a: sentences });
    drawHeatmap(sentences, answer.scores, answer.similarity);
    $("similarity-status").textContent = "";
  } catch (err) {
    $("similarity-status").textContent = "";
    showError(err);
  }
}

function selectTab(name) {
  for (const tab of ["search", "similarity"]) {
    $("tab-" + tab).setAttribute("aria-selected", String(tab === name));
    $(tab + "-panel").hidden = tab !== name;
  }
  clearError();
}

$("key-form").addEventListener("submit", useKey);
$("search-form").addEventListener("submit", search);
$("index").addEventListener("change", () => state.info && describe(state.info));
for (const id of ["threshold", "lead"]) {
  for (const kind of ["input", "change"]) $(id).addEventListener(kind, cutOffs);
}
cutOffs(); // a value the browser restored (back, reload) greys the box out too
$("similarity-form").addEventListener("submit", compare);
$("tab-search").addEventListener("click", () => selectTab("search"));
$("tab-similarity").addEventListener("click", () => selectTab("similarity"));
loadInfo();
