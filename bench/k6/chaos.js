// Chaos: the open loop of rate.js while bench/run.py kills one replica (kill -9) in the middle of it;
// compare failed_requests and the latency over time with a quiet run at the same RATE.
import { openLoopOptions, translateOne } from "./lib.js";
export { handleSummary } from "./lib.js";

export const options = openLoopOptions("chaos");

export default translateOne;
