// Open loop: a constant arrival rate (RATE requests/s for DURATION), so a server that cannot keep up
// shows as latency and dropped_iterations instead of a politely slower client. Also used for chaos.
import { env, summaryTrendStats, thresholds, translateOne } from "./lib.js";
export { handleSummary } from "./lib.js";

const rate = parseInt(env.RATE || "10", 10);
const maxVUs = parseInt(env.VUS || "100", 10);

export const options = {
  scenarios: {
    open_loop: {
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
