// Open loop: a constant arrival rate (RATE requests/s for DURATION); see openLoopOptions in lib.js.
import { openLoopOptions, translateOne } from "./lib.js";
export { handleSummary } from "./lib.js";

export const options = openLoopOptions("open_loop");

export default translateOne;
