// Chaos: the open loop of rate.js while bench/run.py kills one replica (kill -9) in the middle of it;
// compare failed_requests and the latency over time with a quiet run at the same RATE.
import { env, summaryTrendStats, thresholds, translateOne } from "./lib.js";
export { handleSummary } from "./lib.js";

const rate = parseInt(env.RATE || "10", 10);
const maxVUs = parseInt(env.VUS || "100", 10);

export const options = {
  scenarios: {
    chaos: {
      executor: "constant-arrival-rate",
      rate: rate,
      timeUnit: "1s",
      duration: env.DURATION || "30s",
      preAllocatedVUs: Math.min(maxVUs, Math.max(10, rate * 2)),
      maxVUs: maxVUs,
      gracefulStop: "60s",
    },
  },
  summaryTrendStats: summaryTrendStats,
  thresholds: thresholds(),
};

export default translateOne;
