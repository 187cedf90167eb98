#!/usr/bin/env bash
# `admit-k8s migrate-storage` on a real API server (docs/k8s.md, "Storage migration"): with the
# full local cluster (admitd and the bridge, which answers the CRDs' conversion webhook), each of
# our seven CRDs is switched to v1beta1 storage and one object of each kind is created in v1beta1
# spellings; back to ours (v1beta2 stored), etcd holds them as v1beta1 and each CRD's
# status.storedVersions lists v1beta1. The migration, run with the admin's kubeconfig, leaves
# etcd without a v1beta1 object of our group, storedVersions [v1beta2] everywhere, and every
# object reading the same in both versions as before; run again it stores nothing; finally
# v1beta1 is removed from every CRD and every object still reads.
#   tests/k8s/storage_migration_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-storage-migration-test "$@"

readonly GROUP=kueue.x-k8s.io
# plural:namespace:name of the object created of each kind (no namespace: cluster-scoped).
readonly OBJECTS=(resourceflavors::mig-flavor cohorts::mig-cohort clusterqueues::mig-cq
  localqueues:default:mig-lq admissionchecks::mig-check workloadpriorityclasses::mig-priority
  workloads:default:mig-wl)
readonly cluster="$dir/cluster"

step "start: the control plane with our CRDs, admitd and the bridge (the conversion webhook)"
kubeconfig="$("$cluster_sh" start --admitd "$admitd" --admit-k8s "$admit_k8s" "$cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }

# set_storage VERSION: every one of our CRDs stores VERSION (the other stays served), as the
# installed CRD says otherwise (cluster.sh's webhook address and CA kept).
set_storage() {
  local entry plural
  for entry in "${OBJECTS[@]}"; do
    plural="${entry%%:*}"
    kubectl get crd "$plural.$GROUP" -o json | python3 -c '
import json, sys
crd = json.load(sys.stdin)
for v in crd["spec"]["versions"]:
    v["storage"] = v["name"] == sys.argv[1]
json.dump(crd, sys.stdout)' "$1" | kubectl replace -f - > /dev/null
  done
}

# etcd_versions: "plural/[namespace/]name apiVersion" of every object of our group in etcd, read
# through etcd's JSON gateway (the port from etcd's command line).
etcd_versions() {
  local port
  port="$(tr '\0' '\n' < "/proc/$(<"$cluster/etcd.pid")/cmdline" \
    | sed -n 's#^--listen-client-urls=\{0,1\}http://127.0.0.1:\([0-9]*\)$#\1#p')"
  if [[ -z "$port" ]]; then
    port="$(tr '\0' '\n' < "/proc/$(<"$cluster/etcd.pid")/cmdline" \
      | grep -A1 -x -- --listen-client-urls | sed -n 's#^http://127.0.0.1:\([0-9]*\)$#\1#p')"
  fi
  [[ -n "$port" ]] || fail "no etcd client port in etcd's command line"
  curl -sS --max-time 10 "http://127.0.0.1:$port/v3/kv/range" -d "$(python3 -c '
import base64, json
b = lambda s: base64.b64encode(s.encode()).decode()
print(json.dumps({"key": b("/registry/kueue.x-k8s.io/"), "range_end": b("/registry/kueue.x-k8s.io0")}))')" \
    | python3 -c '
import base64, json, sys
for kv in json.load(sys.stdin).get("kvs", []):
    key = base64.b64decode(kv["key"]).decode()[len("/registry/kueue.x-k8s.io/"):]
    print(key, json.loads(base64.b64decode(kv["value"]))["apiVersion"])' | sort
}

# snapshot VERSION: every object read in VERSION, without what the API server or the bridge
# change on their own (resourceVersion, managedFields, status: the bridge writes conditions).
snapshot() {
  local entry plural namespace name
  for entry in "${OBJECTS[@]}"; do
    IFS=: read -r plural namespace name <<< "$entry"
    kubectl get "$plural.$1.$GROUP" ${namespace:+-n "$namespace"} "$name" -o json | python3 -c '
import json, sys
o = json.load(sys.stdin)
for field in ("resourceVersion", "managedFields"):
    o["metadata"].pop(field, None)
o.pop("status", None)
print(json.dumps(o, sort_keys=True))'
  done
}

# stored_versions: "plural:storedVersions" of each CRD.
stored_versions() {
  local entry plural
  for entry in "${OBJECTS[@]}"; do
    plural="${entry%%:*}"
    echo "$plural:$(kubectl get crd "$plural.$GROUP" -o jsonpath='{.status.storedVersions}')"
  done
}

step "v1beta1 stored: one object of each kind created in v1beta1"
set_storage v1beta1
kubectl apply -f - > /dev/null <<EOF
apiVersion: $GROUP/v1beta1
kind: ResourceFlavor
metadata: {name: mig-flavor}
spec:
  nodeLabels: {cloud.example.com/gpu: a100}
---
apiVersion: $GROUP/v1beta1
kind: Cohort
metadata: {name: mig-cohort}
spec:
  parent: mig-root
---
apiVersion: $GROUP/v1beta1
kind: ClusterQueue
metadata: {name: mig-cq}
spec:
  cohort: mig-cohort
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: mig-flavor
      resources: [{name: cpu, nominalQuota: "2"}]
---
apiVersion: $GROUP/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: mig-lq}
spec:
  clusterQueue: mig-cq
---
apiVersion: $GROUP/v1beta1
kind: AdmissionCheck
metadata: {name: mig-check}
spec:
  controllerName: example.com/scan
---
apiVersion: $GROUP/v1beta1
kind: WorkloadPriorityClass
metadata: {name: mig-priority}
value: 100
---
apiVersion: $GROUP/v1beta1
kind: Workload
metadata: {namespace: default, name: mig-wl}
spec:
  queueName: mig-lq
  priorityClassName: mig-priority
  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers: [{name: main, image: registry.invalid/trainer:1}]
EOF
# The bridge adds its finalizer to each definition it forwards (not to a LocalQueue, as Kueue
# does not) and writes its Recorded condition: those writes too are stored in v1beta1.
# finalized PLURAL NAME [-n NAMESPACE]: the definition carries the bridge's finalizer.
finalized() {
  [[ "$(kubectl get "$1.$GROUP" "$2" "${@:3}" -o jsonpath='{.metadata.finalizers}')" == *admission-ledger.io/ledger* ]]
}
# recorded PLURAL NAME [-n NAMESPACE]: the definition's condition Recorded is True.
recorded() {
  [[ "$(kubectl get "$1.$GROUP" "$2" "${@:3}" -o jsonpath='{.status.conditions[?(@.type=="Recorded")].status}')" == True ]]
}
for entry in "${OBJECTS[@]}"; do
  IFS=: read -r plural namespace name <<< "$entry"
  case "$plural" in
    workloads) continue ;;
    localqueues) wait_until "the bridge's Recorded condition on $plural $name" \
      recorded "$plural" "$name" ${namespace:+-n "$namespace"} ;;
    *) wait_until "the bridge's finalizer on $plural $name" \
      finalized "$plural" "$name" ${namespace:+-n "$namespace"} ;;
  esac
done

step "ours again (v1beta2 stored): etcd holds v1beta1 objects, storedVersions lists v1beta1"
set_storage v1beta2
etcd_versions > "$dir/etcd-before.txt"
grep -q " $GROUP/v1beta1\$" "$dir/etcd-before.txt" \
  || { cat "$dir/etcd-before.txt" >&2; fail "etcd holds no v1beta1 object of $GROUP before the migration"; }
for entry in "${OBJECTS[@]}"; do
  IFS=: read -r plural namespace name <<< "$entry"
  grep -q "^$plural/${namespace:+$namespace/}$name " "$dir/etcd-before.txt" \
    || { cat "$dir/etcd-before.txt" >&2; fail "etcd does not hold $plural $name"; }
done
stored_versions > "$dir/stored-before.txt"
if grep -v -q 'v1beta1' "$dir/stored-before.txt"; then
  cat "$dir/stored-before.txt" >&2
  fail "a CRD's storedVersions does not list v1beta1 before the migration"
fi
snapshot v1beta1 > "$dir/v1beta1-before.json"
snapshot v1beta2 > "$dir/v1beta2-before.json"

step "migrate-storage: every object stored again as v1beta2, storedVersions [v1beta2]"
"$admit_k8s" migrate-storage --kubeconfig "$kubeconfig" -o json > "$dir/summary.json" 2> "$dir/migrate.err" \
  || { cat "$dir/migrate.err" >&2; fail "migrate-storage failed"; }
cat "$dir/migrate.err" >&2
progress_lines="$(grep -c "^migrate-storage: [a-z]*\.$GROUP: " "$dir/migrate.err")"
((progress_lines == ${#OBJECTS[@]})) || fail "$progress_lines progress lines, not one per kind"
etcd_versions > "$dir/etcd-after.txt"
if grep -q -v " $GROUP/v1beta2\$" "$dir/etcd-after.txt"; then
  cat "$dir/etcd-after.txt" >&2
  fail "etcd still holds objects of $GROUP not stored as v1beta2 after the migration"
fi
[[ "$(wc -l < "$dir/etcd-after.txt")" == "$(wc -l < "$dir/etcd-before.txt")" ]] \
  || fail "etcd holds $(wc -l < "$dir/etcd-after.txt") objects after, $(wc -l < "$dir/etcd-before.txt") before"
stored_versions > "$dir/stored-after.txt"
if grep -v -q ':\["v1beta2"\]$' "$dir/stored-after.txt"; then
  cat "$dir/stored-after.txt" >&2
  fail "a CRD's storedVersions is not [v1beta2] after the migration"
fi
python3 - "$dir/summary.json" "$(grep -c " $GROUP/v1beta1\$" "$dir/etcd-before.txt")" <<'EOF' || fail "the -o json summary is wrong"
import json, sys
summary = json.load(open(sys.argv[1]))
kinds = summary["kinds"]
assert len(kinds) == 7 and "error" not in summary, summary
assert all(k["storedVersionsAfter"] == ["v1beta2"] and k["storageVersion"] == "v1beta2" for k in kinds), kinds
assert all("v1beta1" in k["storedVersionsBefore"] for k in kinds), kinds
rewritten = sum(k["rewritten"] for k in kinds)
# The bridge may have written some of them since (a status, a finalizer): those it stored again.
assert 1 <= rewritten <= int(sys.argv[2]), (rewritten, sys.argv[2])
EOF
# The migration changes no field, so its field manager owns none (the check forwarder reads a
# check's writer from the owners of its fields).
for entry in "${OBJECTS[@]}"; do
  IFS=: read -r plural namespace name <<< "$entry"
  managers="$(kubectl get "$plural.$GROUP" ${namespace:+-n "$namespace"} "$name" \
    -o jsonpath='{.metadata.managedFields[*].manager}')"
  [[ "$managers" != *admit-k8s-migrate-storage* ]] \
    || fail "$plural $name has fields managed by the migration: $managers"
done

for version in v1beta1 v1beta2; do
  snapshot "$version" > "$dir/$version-after.json"
  diff "$dir/$version-before.json" "$dir/$version-after.json" >&2 \
    || fail "the objects read in $version changed in the migration"
done

step "run again: harmless, nothing stored again"
"$admit_k8s" migrate-storage --kubeconfig "$kubeconfig" -o json > "$dir/again.json" 2> "$dir/again.err" \
  || { cat "$dir/again.err" >&2; fail "migrate-storage failed the second time"; }
python3 -c '
import json, sys
kinds = json.load(open(sys.argv[1]))["kinds"]
assert len(kinds) == 7 and all(k["rewritten"] == 0 and k["storedVersionsBefore"] == ["v1beta2"] for k in kinds), kinds' \
  "$dir/again.json" || fail "the second migration stored objects again"

step "v1beta1 removed from every CRD: every object still reads"
for entry in "${OBJECTS[@]}"; do
  plural="${entry%%:*}"
  kubectl get crd "$plural.$GROUP" -o json | python3 -c '
import json, sys
crd = json.load(sys.stdin)
crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] != "v1beta1"]
crd["spec"]["conversion"] = {"strategy": "None"}
json.dump(crd, sys.stdout)' | kubectl replace -f - > /dev/null 2> "$dir/replace.err" \
    || { cat "$dir/replace.err" >&2; fail "the API server kept v1beta1 in $plural.$GROUP"; }
done
snapshot v1beta2 > "$dir/v1beta2-only.json" 2> "$dir/read.err" \
  || { cat "$dir/read.err" >&2; fail "an object does not read once v1beta1 is gone"; }

echo "PASS: objects stored as v1beta1 migrated to v1beta2 (etcd, storedVersions, reads in both versions unchanged), a second run stored nothing, v1beta1 removed"
