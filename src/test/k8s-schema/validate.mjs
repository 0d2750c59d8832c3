// Validates Kubernetes objects against the OpenAPI schema of a current Kubernetes release, as
// compiled into kubernetes-models' validators (one per kind, generated from the release's
// swagger.json): types, required fields, enums and formats (int-or-string, quantities, int32).
// Unknown fields are the Java side's check (io.oneshot.testing.Chart.parse), since the release's
// schema does not forbid them.
//
// Input: a file holding a JSON array of objects. Output: a JSON array, one entry per object:
// {kind, apiVersion, name, schema: true|false, errors: ["/spec/replicas must be integer", ...]};
// schema false: no schema for that apiVersion and kind (a custom resource).
import { readFileSync } from "node:fs";

const objects = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = [];
for (const o of objects) {
  const entry = { kind: o.kind, apiVersion: o.apiVersion, name: o.metadata?.name, schema: false, errors: [] };
  const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : [null, o.apiVersion];
  // kubernetes-models keeps the core group under "v1", the others under "<group>/<version>".
  const path = "kubernetes-models/" + (group ? group + "/" : "") + version + "/" + o.kind;
  let Kind;
  try {
    Kind = (await import(path))[o.kind];
  } catch (e) {
    if (e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED" && e.code !== "ERR_MODULE_NOT_FOUND") throw e;
  }
  if (Kind) {
    entry.schema = true;
    try {
      new Kind(o).validate();
    } catch (e) {
      entry.errors = (e.errors || [{ instancePath: "", message: e.message }]).map(
        (x) => (x.instancePath || "/") + " " + x.message + (x.params?.allowedValues ? " " + JSON.stringify(x.params.allowedValues) : ""));
    }
  }
  out.push(entry);
}
process.stdout.write(JSON.stringify(out));
