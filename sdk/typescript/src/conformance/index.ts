/** The conformance activities and worker (spec/conformance/), for `wiggle conformance --worker`. */
export { activities, predicates, traced, TRACE_ENV } from "./activities.js";
export { main } from "./main.js";
