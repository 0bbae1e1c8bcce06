// Validate ServiceMonitor objects (a JSON array on stdin) with @kubernetes-models/prometheus-operator,
// whose validators are generated from the Prometheus Operator's CRD schemas (types, enums, patterns,
// required fields). Prints one line per object: "ok" or "invalid: <the first error>".
import fs from "node:fs";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";

for (const doc of JSON.parse(fs.readFileSync(0, "utf8"))) {
  try {
    new ServiceMonitor(doc).validate();
    console.log("ok");
  } catch (e) {
    console.log("invalid: " + String(e && e.message ? e.message : e).split("\n")[0]);
  }
}
