// The translate page: languages from GET /languages, text through POST /translate, clear errors.
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

class HttpError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

async function request(path, options) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), SETTINGS.requestTimeoutMs);
  let response;
  try {
    response = await fetch(path, { ...options, signal: controller.signal });
  } catch (err) {
    const timedOut = err.name === "AbortError";
    throw new HttpError(0, timedOut ? "timeout" : "network",
      timedOut ? "The service did not answer in time." : "Cannot reach the translation service.");
  } finally {
    clearTimeout(timer);
  }
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
        const data = await request("/translate", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify(body),
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
