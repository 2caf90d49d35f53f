// The page's documents: a dropped file goes to DeepL's document API (POST /v2/document), its status is
// polled for progress (segments done of total, seconds left), and the result is offered as a download
// (it can be downloaded once: the server deletes it as it is read, as DeepL does).
"use strict";

const DOCUMENTS = { pollMs: 1000, maxPollErrors: 5 };

function docError(message) {
  const box = $("doc-error");
  box.textContent = message;
  box.hidden = !message;
}

async function deeplCall(path, init) {
  const response = await fetch(path, { method: "POST", ...init, headers: withKey(init.headers || {}) });
  if (response.ok) return response;
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    message = (await response.json()).message || message;
  } catch (_) {
    // not JSON (a proxy's page): the status says enough
  }
  const error = new Error(message);
  error.status = response.status;
  throw error;
}

function showProgress(status) {
  const bar = $("doc-progress");
  const total = status.segments_total || 0;
  bar.hidden = false;
  bar.max = Math.max(total, 1);
  bar.value = Math.min(status.segments_done || 0, bar.max);
  if (status.status === "queued") {
    $("doc-status").textContent = "Queued…";
  } else if (status.status === "translating") {
    const left = status.seconds_remaining ? ` · about ${status.seconds_remaining} s left` : "";
    $("doc-status").textContent = `Translating: ${status.segments_done || 0} of ${total} segments${left}`;
  }
}

async function waitForJob(handle) {
  const body = JSON.stringify({ document_key: handle.document_key });
  const headers = { "Content-Type": "application/json" };
  for (let failures = 0; ; ) {
    try {
      const status = await (await deeplCall(`/v2/document/${handle.document_id}`, { body, headers })).json();
      failures = 0;
      showProgress(status);
      if (status.status === "done" || status.status === "error") return status;
    } catch (err) {
      failures += 1;
      if (failures > DOCUMENTS.maxPollErrors || err.status === 404) throw err;
    }
    await sleep(DOCUMENTS.pollMs);
  }
}

async function translateFile(file) {
  docError("");
  const link = $("doc-download");
  link.hidden = true;
  const form = new FormData();
  form.append("file", file, file.name);
  form.append("target_lang", $("target").value);
  if ($("source").value) form.append("source_lang", $("source").value);
  $("doc-status").textContent = `Uploading ${file.name}…`;
  try {
    const handle = await (await deeplCall("/v2/document", { body: form })).json();
    const status = await waitForJob(handle);
    if (status.status === "error") throw new Error(status.error_message || "the translation failed");
    const body = JSON.stringify({ document_key: handle.document_key });
    const headers = { "Content-Type": "application/json" };
    const result = await deeplCall(`/v2/document/${handle.document_id}/result`, { body, headers });
    link.href = URL.createObjectURL(await result.blob());
    link.download = file.name;
    link.hidden = false;
    $("doc-progress").value = $("doc-progress").max;
    $("doc-status").textContent = `Done: ${status.billed_characters} characters translated.`;
  } catch (err) {
    $("doc-status").textContent = "";
    $("doc-progress").hidden = true;
    docError(`Cannot translate ${file.name}: ${err.message}`);
  }
}

function initDocuments() {
  const drop = $("drop");
  $("file").addEventListener("change", () => {
    if ($("file").files.length) translateFile($("file").files[0]);
    $("file").value = "";
  });
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    if (event.dataTransfer.files.length) translateFile(event.dataTransfer.files[0]);
  });
}

initDocuments();
