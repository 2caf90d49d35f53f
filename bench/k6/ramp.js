// Localize a WebUI: ramping virtual users (1 -> VUS, default 100) over the WebUI strings, closed loop.
//   RAMP ramp-up time (default 60s), HOLD time at VUS (default 30s); see lib.js for the rest.
import { commonOptions, env, translateOne } from "./lib.js";
export { handleSummary } from "./lib.js";

export const options = commonOptions({
  ramp: {
    executor: "ramping-vus",
    startVUs: 1,
    stages: [
      { duration: env.RAMP || "60s", target: parseInt(env.VUS || "100", 10) },
      { duration: env.HOLD || "30s", target: parseInt(env.VUS || "100", 10) },
    ],
    gracefulRampDown: "30s",
    gracefulStop: "60s",
  },
});

export default translateOne;
