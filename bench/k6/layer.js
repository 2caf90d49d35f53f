// The serving layer alone (bench/layer.py): POST /translate as fast as VUS clients can, for DURATION.
// Every string is unique (a WebUI string plus a per-request suffix), so the cache never answers.
//   BASE_URL  where Nginx listens       BATCH  texts per request; 0: one `text` per request
//   VUS, DURATION                       DATA   a JSON object whose keys are the strings (the WebUI file)
//   RUN       a tag that keeps this run's strings apart from every other run's
//   SUMMARY   where handleSummary writes k6's JSON summary
import http from "k6/http";
import exec from "k6/execution";
import { check } from "k6";
import { SharedArray } from "k6/data";

const env = __ENV;
const BASE_URL = env.BASE_URL.replace(/\/$/, "");
const BATCH = parseInt(env.BATCH || "0", 10);
const RUN = env.RUN || "0";
const STRINGS = new SharedArray("strings", () => Object.keys(JSON.parse(open(env.DATA))).filter((s) => s.trim()));
const PARAMS = { headers: { "Content-Type": "application/json" }, timeout: "30s" };

export const options = {
  scenarios: {
    layer: { executor: "constant-vus", vus: parseInt(env.VUS || "64", 10), duration: env.DURATION || "10s" },
  },
  discardResponseBodies: false,
  summaryTrendStats: ["avg", "med", "p(95)", "p(99)", "max"],
};

function text(n) {
  return `${STRINGS[n % STRINGS.length]} (${RUN}.${n})`;
}

export default function () {
  const n = exec.scenario.iterationInTest;
  const body = { source_lang: "en", target_lang: "zh" };
  if (BATCH > 0) {
    body.texts = [];
    for (let j = 0; j < BATCH; j++) body.texts.push(text(n * BATCH + j));
  } else {
    body.text = text(n);
  }
  const res = http.post(`${BASE_URL}/translate`, JSON.stringify(body), PARAMS);
  check(res, { "200": (r) => r.status === 200 });
}

export function handleSummary(data) {
  return { [env.SUMMARY]: JSON.stringify(data) };
}
