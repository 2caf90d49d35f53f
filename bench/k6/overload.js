// Overload: the open loop at about ten times the stack's measured capacity (RATE, from bench/run.py).
// A JSON 503 with Retry-After is the answer the stack owes the excess: it counts as a refusal, with its
// own latency (refused_latency), not as a failure; anything else that is not a 200 is a failure.
// accepted_latency is the 200s' latency, to set beside the same stack's p95 at capacity.
import { Rate, Trend } from "k6/metrics";
import { failed, openLoopOptions, recordAnswer, sendNext } from "./lib.js";
export { handleSummary } from "./lib.js";

const refusedLatency = new Trend("refused_latency", true);
const acceptedLatency = new Trend("accepted_latency", true);
const refused = new Rate("refused");

export const options = openLoopOptions("overload");
// Latency past P95_MS is expected here (that is the finding): only failures cross a threshold.
options.thresholds = { failed_requests: [`rate<${__ENV.FAIL_RATE}`] };

function isRefusal(res) {
  if (res.status !== 503 || !res.headers["Retry-After"]) return false;
  try {
    return typeof res.json().error === "object";
  } catch (_) {
    return false;
  }
}

export default function () {
  const res = sendNext();
  const refusal = isRefusal(res);
  refused.add(refusal);
  if (refusal) {
    refusedLatency.add(res.timings.duration);
    failed.add(false);
    return;
  }
  const ok = recordAnswer(res);
  if (ok) acceptedLatency.add(res.timings.duration);
  failed.add(!ok);
}
