// Shared by the scenario scripts: the workload, one request per iteration, metrics and the summary.
//
// Environment. Required: the settings that have their home on the Python side, which passes them
// (bench/session.py; `python -m bench.one` for a script run alone). A missing one stops the run.
//   SAMPLING    JSON object of the sampling fields every request sends, max_tokens included: the
//               model family's recommended values (hunyuan_serve.families), the same for every target
//   P95_MS      p95 threshold in ms; FAIL_RATE  failure-rate threshold (bench Plan)
// Optional:
//   BASE_URL    http://127.0.0.1:8080              where to send requests
//   API         translate | openai                our /translate, or vLLM's /v1/completions
//   DATA        JSON list of {"text", "prompt"} (prompt used by API=openai); default: the WebUI file
//   MODEL       model name for API=openai
//   OFFSET      position of the first request in the workload (default 0); see translateOne
//   TARGET_LANGS comma-separated target languages of API=translate, one per pass over the strings
//               (default zh; API=openai prompts are built for zh)
//   SUMMARY     where handleSummary writes k6's JSON summary
import http from "k6/http";
import exec from "k6/execution";
import { check } from "k6";
import { SharedArray } from "k6/data";
import { Counter, Rate, Trend } from "k6/metrics";

export const env = __ENV;
const API = env.API || "translate";
export const BASE_URL = (env.BASE_URL || "http://127.0.0.1:8080").replace(/\/$/, "");
const OFFSET = parseInt(env.OFFSET || "0", 10);
const TARGET_LANGS = (env.TARGET_LANGS || "zh").split(",");

// A setting the Python side passes: absent or empty, the run stops here with the variable's name.
export function required(name) {
  const value = env[name];
  if (value === undefined || value === "") {
    throw new Error(`${name} is not set: run the scripts through bench/run.py or python -m bench.one`);
  }
  return value;
}

function samplingFromEnv() {
  const text = required("SAMPLING");
  let sampling;
  try {
    sampling = JSON.parse(text);
  } catch (err) {
    throw new Error(`SAMPLING is not JSON (${err.message}): ${text}`);
  }
  if (typeof sampling !== "object" || sampling === null || typeof sampling.max_tokens !== "number") {
    throw new Error(`SAMPLING must be a JSON object with max_tokens, got ${text}`);
  }
  return sampling;
}

const SAMPLING = samplingFromEnv();

// DATA is a list of {"text", "prompt"} (bench/run.py writes prompts built like the server's), or by
// default the WebUI localization file itself (English key -> zh_CN), enough for API=translate.
const items = new SharedArray("items", () => {
  const data = JSON.parse(open(env.DATA || "../data/sd-webui-zh_CN.json"));
  const all = Array.isArray(data) ? data : Object.keys(data).map((text) => ({ text: text }));
  // The WebUI file has an empty key: nothing to translate (the service answers it 422).
  return all.filter((item) => item.text.trim() !== "");
});

const genTokens = new Counter("gen_tokens");
// Prompt tokens as the server counted them (API=openai: usage.prompt_tokens), to check that two
// setups were sent the same prompts.
const promptTokens = new Counter("prompt_tokens");
const cachedHits = new Rate("cached");
export const failed = new Rate("failed_requests");
const translateLatency = new Trend("translate_latency", true);

function request(item, targetLang) {
  if (API === "openai") {
    const body = Object.assign({ model: env.MODEL, prompt: item.prompt }, SAMPLING);
    if (item.stop) body.stop = item.stop;
    return http.post(`${BASE_URL}/v1/completions`, JSON.stringify(body), {
      headers: { "Content-Type": "application/json" },
      tags: { name: "completions" },
      timeout: env.TIMEOUT || "120s",
    });
  }
  const body = Object.assign({ text: item.text, source_lang: "en", target_lang: targetLang }, SAMPLING);
  return http.post(`${BASE_URL}/translate`, JSON.stringify(body), {
    headers: { "Content-Type": "application/json" },
    tags: { name: "translate" },
    timeout: env.TIMEOUT || "120s",
  });
}

function generatedTokens(res) {
  let data;
  try {
    data = res.json();
  } catch (_) {
    return [0, false];
  }
  if (API === "openai") {
    const usage = data.usage || {};
    promptTokens.add(usage.prompt_tokens || 0);
    return [usage.completion_tokens || 0, false];
  }
  const usage = data.usage || {};
  const tokens = usage.completion_tokens || data.completion_tokens || data.output_tokens || 0;
  return [tokens, data.cached === true];
}

// This iteration's request, sent: every iteration takes the next string, so a pass covers the workload
// in order across all VUs; OFFSET lets consecutive runs against one server start on strings it has not
// seen (and cached), and past the last string the next pass goes on in the next target language.
export function sendNext() {
  const position = OFFSET + exec.scenario.iterationInTest;
  const lang = TARGET_LANGS[Math.floor(position / items.length) % TARGET_LANGS.length];
  return request(items[position % items.length], lang);
}

// A 200 answer's figures; false for anything else (which the caller counts as it sees fit).
export function recordAnswer(res) {
  const ok = check(res, { "status 200": (r) => r.status === 200 });
  if (ok) {
    const [tokens, cached] = generatedTokens(res);
    genTokens.add(tokens);
    cachedHits.add(cached);
    translateLatency.add(res.timings.duration);
  }
  return ok;
}

export function translateOne() {
  failed.add(!recordAnswer(sendNext()));
}

export function handleSummary(data) {
  const out = { stdout: textSummary(data) };
  if (env.SUMMARY) out[env.SUMMARY] = JSON.stringify(data, null, 1);
  return out;
}

function textSummary(data) {
  const m = data.metrics;
  const d = (m.http_req_duration || {}).values || {};
  const reqs = (m.http_reqs || {}).values || {};
  const fail = (m.failed_requests || {}).values || {};
  const dropped = (m.dropped_iterations || {}).values || {};
  const f = (x) => (x === undefined ? "-" : x.toFixed(1));
  return (
    `[${env.SCENARIO || "k6"} ${API}] reqs=${reqs.count || 0} (${f(reqs.rate)}/s) ` +
    `p50=${f(d.med)}ms p95=${f(d["p(95)"])}ms p99=${f(d["p(99)"])}ms ` +
    `failed=${((fail.rate || 0) * 100).toFixed(2)}% dropped=${dropped.count || 0}\n`
  );
}

export const summaryTrendStats = ["avg", "min", "med", "p(90)", "p(95)", "p(99)", "max", "count"];

// What every script's options share. Connections are reused as a real client's are: the stack's
// Nginx closes each after its answer (nginx.keepalive_timeout_s 0); a uvicorn server (the vLLM
// server, the one-at-a-time baseline) closes idle ones after 5 s, and a POST sent just as it
// closes fails with EOF, which counts as a failed request of that setup.
export function commonOptions(scenarios) {
  return {
    scenarios: scenarios,
    summaryTrendStats: summaryTrendStats,
    thresholds: thresholds(),
  };
}

export function thresholds() {
  return {
    http_req_duration: [`p(95)<${required("P95_MS")}`],
    failed_requests: [`rate<${required("FAIL_RATE")}`],
  };
}

// Options of an open loop: RATE requests/s for DURATION (constant arrival rate), up to VUS at once,
// PRE_VUS of them started before the run (default twice the rate; a VU started mid-run costs CPU then).
// A server that cannot keep up shows as latency and dropped_iterations, not as a politely slower client.
export function openLoopOptions(scenario) {
  const rate = parseInt(env.RATE || "10", 10);
  const maxVUs = parseInt(env.VUS || "100", 10);
  const preVUs = env.PRE_VUS ? parseInt(env.PRE_VUS, 10) : Math.max(10, rate * 2);
  return commonOptions({
    [scenario]: {
      executor: "constant-arrival-rate",
      rate: rate,
      timeUnit: "1s",
      duration: env.DURATION || "30s",
      preAllocatedVUs: Math.min(maxVUs, preVUs),
      maxVUs: maxVUs,
      gracefulStop: "60s",
    },
  });
}
