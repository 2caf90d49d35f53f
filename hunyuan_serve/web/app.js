// The translate page: languages from GET /languages, text through POST /translate (streamed: the text shows
// as it is generated), clear errors.
"use strict";

const SETTINGS = {
  requestTimeoutMs: 120000, // the service's own deadline answers 504 well before this
  maxBusyRetries: 3, // automatic retries of an overload 503 before asking the user
  defaultRetryAfterS: 2, // when a 503 comes without Retry-After
  maxRetryAfterS: 30,
  defaultSource: "en",
  defaultTarget: "zh",
};

const $ = (id) => document.getElementById(id);

// With API keys on (auth.keys_file), open the page as /?token=KEY: it sends the key as a Bearer header.
const API_KEY = new URLSearchParams(window.location.search).get("token");
const withKey = (headers) => (API_KEY ? { ...headers, Authorization: `Bearer ${API_KEY}` } : headers);

class HttpError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

function transportError(err) {
  const timedOut = err.name === "AbortError";
  return new HttpError(0, timedOut ? "timeout" : "network",
    timedOut ? "The service did not answer in time." : "Cannot reach the translation service.");
}

async function request(path, options) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), SETTINGS.requestTimeoutMs);
  let response;
  try {
    response = await fetch(path, { ...options, headers: withKey(options?.headers || {}), signal: controller.signal });
  } catch (err) {
    throw transportError(err);
  } finally {
    clearTimeout(timer);
  }
  return readJson(response);
}

async function readJson(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) {
    const error = (body && body.error) || {};
    const retryAfter = Number.parseFloat(response.headers.get("Retry-After"));
    throw new HttpError(response.status, error.code || `http_${response.status}`,
      error.message || response.statusText || "Request failed", Number.isFinite(retryAfter) ? retryAfter : null);
  }
  return body;
}

function describe(err) {
  switch (err.status) {
    case 400:
    case 422:
      return `Cannot translate this request: ${err.message}`;
    case 413:
      return `The text is too long: ${err.message}`;
    case 429:
    case 503:
      return "The service is busy right now. Please try again in a moment.";
    case 504:
      return "The translation took too long and was stopped. Try a shorter text.";
    case 0:
      return err.message;
    default:
      return `The service failed (${err.status}): ${err.message}`;
  }
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

function setBusy(busy) {
  $("translate").disabled = busy;
  $("translate").textContent = busy ? "Translating…" : "Translate";
  $("form").setAttribute("aria-busy", String(busy));
}

// An error event after the stream began: the status it would have had as a plain answer.
const STREAM_ERROR_STATUS = { deadline_exceeded: 504, overloaded: 503, engine_error: 503 };

function parseEvent(block) {
  const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim());
  if (!data.length) return null;
  try {
    return JSON.parse(data.join("\n"));
  } catch (_) {
    return null;
  }
}

// POST with stream: true; onDelta gets each piece of text as it comes; resolves to the final answer.
// A refusal before the stream starts is a plain JSON error (HttpError), as without streaming.
async function streamRequest(path, body, onDelta) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), SETTINGS.requestTimeoutMs);
  try {
    let response;
    try {
      response = await fetch(path, {
        method: "POST",
        headers: withKey({ "Content-Type": "application/json" }),
        body: JSON.stringify({ ...body, stream: true }),
        signal: controller.signal,
      });
    } catch (err) {
      throw transportError(err);
    }
    if (!response.ok || !(response.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      return await readJson(response);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw transportError(err);
      }
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n/g, "\n");
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const data = parseEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (!data) continue;
        if (data.error) {
          throw new HttpError(STREAM_ERROR_STATUS[data.error.code] || 500, data.error.code, data.error.message, null);
        }
        if (data.done) return data;
        if (typeof data.delta === "string") onDelta(data.delta);
      }
    }
    throw new HttpError(0, "network", "The connection closed before the translation was complete.");
  } finally {
    clearTimeout(timer);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function countdown(seconds, attempt) {
  for (let leftMs = seconds * 1000; leftMs > 0; leftMs -= 1000) {
    const left = Math.ceil(leftMs / 1000);
    showError(`The service is busy. Retrying in ${left} s (attempt ${attempt} of ${SETTINGS.maxBusyRetries})…`);
    await sleep(Math.min(1000, leftMs));
  }
}

async function loadLanguages() {
  const source = $("source");
  const target = $("target");
  let data;
  try {
    data = await request("/languages");
  } catch (err) {
    showError(`Could not load the languages: ${describe(err)} Reload the page to try again.`);
    $("translate").disabled = true;
    return;
  }
  for (const lang of data.languages || []) {
    const label = lang.native_name && lang.native_name !== lang.name ? `${lang.name} — ${lang.native_name}` : lang.name;
    source.add(new Option(label, lang.code));
    target.add(new Option(label, lang.code));
  }
  const codes = (data.languages || []).map((l) => l.code);
  source.value = codes.includes(SETTINGS.defaultSource) ? SETTINGS.defaultSource : codes[0] || "";
  target.value = codes.includes(SETTINGS.defaultTarget) ? SETTINGS.defaultTarget : codes[1] || codes[0] || "";
}

async function translate() {
  const text = $("text").value;
  if (!text.trim()) {
    showError("Type some text to translate first.");
    $("text").focus();
    return;
  }
  const body = { text, source_lang: $("source").value, target_lang: $("target").value };
  if (body.source_lang === body.target_lang) {
    showError("Source and target languages are the same.");
    return;
  }
  showError("");
  setBusy(true);
  $("result").textContent = "";
  $("result").classList.remove("empty");
  $("latency").textContent = "";
  $("copy").hidden = true;
  const started = performance.now();
  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        $("result").textContent = "";
        const data = await streamRequest("/translate", body, (delta) => {
          showError("");
          $("result").textContent += delta;
        });
        showResult(data, performance.now() - started);
        return;
      } catch (err) {
        const busy = err.status === 503 || err.status === 429;
        if (!busy || attempt > SETTINGS.maxBusyRetries) throw err;
        const wait = Math.min(err.retryAfter ?? SETTINGS.defaultRetryAfterS, SETTINGS.maxRetryAfterS);
        await countdown(wait, attempt);
      }
    }
  } catch (err) {
    showError(describe(err));
  } finally {
    setBusy(false);
  }
}

function showResult(data, elapsedMs) {
  showError("");
  $("result").textContent = data.result;
  $("result").classList.toggle("empty", !data.result);
  $("copy").hidden = !data.result;
  const parts = [`${Math.round(elapsedMs)} ms`];
  if (typeof data.latency_ms === "number") parts.push(`server ${Math.round(data.latency_ms)} ms`);
  if (data.cached) parts.push("cached");
  $("latency").textContent = parts.join(" · ");
}

function init() {
  $("form").addEventListener("submit", (event) => {
    event.preventDefault();
    translate();
  });
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      translate();
    }
  });
  $("text").addEventListener("input", () => {
    $("count").textContent = String($("text").value.length);
  });
  $("swap").addEventListener("click", () => {
    const source = $("source").value;
    $("source").value = $("target").value;
    $("target").value = source;
    if ($("result").textContent) {
      $("text").value = $("result").textContent;
      $("result").textContent = "";
      $("latency").textContent = "";
    }
  });
  $("clear").addEventListener("click", () => {
    $("text").value = "";
    $("result").textContent = "";
    $("result").classList.remove("empty");
    $("latency").textContent = "";
    $("count").textContent = "0";
    $("copy").hidden = true;
    showError("");
    $("text").focus();
  });
  $("copy").addEventListener("click", () => navigator.clipboard?.writeText($("result").textContent));
  loadLanguages();
}

init();
