// One pass over the first ITERATIONS strings (VUS at once). Run twice: the second pass shows the cache.
import { commonOptions, env, translateOne } from "./lib.js";
export { handleSummary } from "./lib.js";

export const options = commonOptions({
  pass: {
    executor: "shared-iterations",
    vus: parseInt(env.VUS || "32", 10),
    iterations: parseInt(env.ITERATIONS || "500", 10),
    maxDuration: env.MAX_DURATION || "10m",
  },
});

export default translateOne;
