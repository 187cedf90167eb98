#!/usr/bin/env bash
# End-to-end tests of admitctl whatif and estimate (docs/whatif.md) on a real embedded ledger
# with a small recorded history (tests/cli/whatif_history.sh): calibration, a change of quota,
# the three report formats and their bytes, refusals, estimates and the backtest.
# Usage: whatif_cli_test.sh ADMITCTL
set -uo pipefail
admitctl=$1
here=$(dirname "$0")
source "$here/lib.sh"
source "$here/whatif_history.sh"
L="$work/history"    # every job finished
P="$work/open"       # ends with job-d running, job-e and job-f pending
mkdir -p "$work/yaml" "$work/yaml-open"
whatif_history "$admitctl" "$L" "$work/yaml" || fail "recording the history"
whatif_history "$admitctl" "$P" "$work/yaml-open" open || fail "recording the open history"
bigger="$work/yaml/bigger-quota.yaml"
json_check() {  # JSON PYTHON: the Python checks `d`, the parsed JSON
  python3 -c "import json, sys
d = json.loads(sys.argv[1])
$2" "$1" || fail "json check failed: $2"
}

for cmd in whatif estimate; do
  expect_rc 0 $admitctl $cmd --help
  contains "$out" "Usage"
  contains "$out" "--from"
done
expect_rc 0 $admitctl whatif --help
contains "$out" "--change"
contains "$out" "--drain"
expect_rc 0 $admitctl estimate --help
contains "$out" "--backtest"
contains "$out" "--samples"

# Calibration: with no change the simulation reproduces the record, every outcome exactly.
expect_rc 0 $admitctl --ledger "$L" whatif
contains "$out" "changes: none (calibration)"
contains "$out" "6 workloads; 6 with the recorded outcome exactly"
contains "$out" "0 workload(s) needed a modelled runtime (run times: 6 recorded)"
lacks "$out" "Changed most"
contains "$err" "simulating forward"
expect_rc 0 $admitctl --ledger "$L" whatif -o json
json_check "$out" '
assert d["workloads"] == 6 and d["exactMatches"] == 6, d
assert d["changes"] == [] and d["changed"] == [], d
assert d["recordedDecisions"] == d["simulatedDecisions"], d'
# From the state at 12:00 (job-b running since 11:00, its pods never reported): job-b still runs
# its recorded 2h from its admission, so job-f (submitted at 12:30) waits its recorded 2h45m, and
# the GPUs are held (idle: no pods reported) as recorded.
expect_rc 0 $admitctl --ledger "$L" whatif --from 2026-11-29T12:00:00Z --to 2026-11-29T15:30:00Z \
  -o json
json_check "$out" '
assert d["workloads"] == 1 and d["exactMatches"] == 1, d
g = {(x["kind"], x["name"]): x for x in d["groups"]}[("ClusterQueue", "gpu")]
r, s = g["recorded"], g["simulated"]
assert r["waitMaxMs"] == s["waitMaxMs"] == 2 * 3600000 + 45 * 60000, g
assert (r["gpuHoursUsed"], r["gpuHoursIdle"]) == (s["gpuHoursUsed"], s["gpuHoursIdle"]), g
assert d["changed"] == [], d["changed"]'

# More quota: nobody waits in the simulation, every job waited up to 4h30m in the record.
expect_rc 0 $admitctl --ledger "$L" whatif --change "$bigger" -o json
json_check "$out" '
assert d["changes"] == ["ClusterQueue/gpu"], d["changes"]
g = {(x["kind"], x["name"]): x for x in d["groups"]}[("ClusterQueue", "gpu")]
r, s = g["recorded"], g["simulated"]
assert r["waitMaxMs"] == 4 * 3600000 + 1800000 and r["waitMax"] == "4h30m", r
assert s["waitMaxMs"] == 0 and s["admitted"] == 6 and s["pendingAtEnd"] == 0, s
assert r["gpuHoursUsed"] == s["gpuHoursUsed"] and r["gpuHoursIdle"] == s["gpuHoursIdle"], g
assert d["workloads"] == 6 and d["exactMatches"] == 1, d
assert [c["workload"] for c in d["changed"]] == ["ml/job-e", "ml/job-d", "ml/job-c",
                                                  "ml/job-f", "ml/job-b"], d["changed"]
assert d["changed"][0]["recordedWait"] == "4h30m" and d["changed"][0]["simulatedWait"] == "0s"'
expect_rc 0 $admitctl --ledger "$L" whatif --change "$bigger"
contains "$out" "changes: ClusterQueue/gpu"
contains "$out" "ml/job-e in gpu: 4h30m -> 0s"

# A changed engine configuration (configure's flags) replaces the recorded one; with the
# bigger quota too, the outcome is the bigger quota's.
expect_rc 0 $admitctl --ledger "$L" whatif --change "$bigger" -o json configure --fair-sharing
json_check "$out" '
assert d["changes"] == ["ClusterQueue/gpu", "EngineConfiguration"], d["changes"]
g = {(x["kind"], x["name"]): x for x in d["groups"]}[("ClusterQueue", "gpu")]
assert g["simulated"]["waitMaxMs"] == 0, g'
expect_rc 1 $admitctl --ledger "$L" whatif configure --backoff-base-seconds 5 --aging-step 3x
contains "$err" "3x"

# HTML to a file; the same command twice writes the same bytes (JSON and text too).
for run in 1 2; do
  expect_rc 0 $admitctl --ledger "$L" whatif --change "$bigger" -o html \
    --out "$work/report$run.html"
  contains "$err" "wrote $work/report$run.html"
  [ -z "$out" ] || fail "whatif --out printed on stdout: $out"
done
[ -s "$work/report1.html" ] || fail "no HTML report written"
cmp -s "$work/report1.html" "$work/report2.html" || fail "two runs wrote different HTML"
report=$(cat "$work/report1.html")
contains "$report" "<!doctype html>"
contains "$report" "<svg class='plot wait' data-cq='gpu'"
contains "$report" "<svg class='plot usage' data-cq='gpu'"
contains "$report" "<table id='groups'>"
contains "$report" "<table id='changed'>"
lacks "$report" "<script"
a=$($admitctl --ledger "$L" whatif --change "$bigger" -o json 2>/dev/null)
b=$($admitctl --ledger "$L" whatif --change "$bigger" -o json 2>/dev/null)
[ "$a" = "$b" ] || fail "two runs printed different JSON"
a=$($admitctl --ledger "$L" whatif --change "$bigger" 2>/dev/null)
b=$($admitctl --ledger "$L" whatif --change "$bigger" 2>/dev/null)
[ "$a" = "$b" ] || fail "two runs printed different text"

# Refusals: clear, nonzero, and nothing written.
head_of() { $admitctl --ledger "$L" verify -o json | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["head"])'; }
head_before=$(head_of)
cat > "$work/workload.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: extra, namespace: ml}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}}
YAML
expect_rc 1 $admitctl --ledger "$L" whatif --change "$work/workload.yaml"
contains "$err" "InvalidArgument: $work/workload.yaml: document 1 (Workload, line 2)"
contains "$err" "workloads are submitted, not applied"
expect_rc 1 $admitctl --ledger "$L" whatif --from 2026-11-29T12:00:00Z --to 2026-11-29T11:00:00Z
contains "$err" "--from must be before --to"
expect_rc 1 $admitctl --ledger "$L" whatif --from 2026-11-30T00:00:00Z
contains "$err" "is after the ledger's last event"
expect_rc 1 $admitctl --ledger "$L" whatif --from 2026-11-29
contains "$err" "--from '2026-11-29'"
expect_rc 1 $admitctl --ledger "$L" whatif --drain forever
contains "$err" "--drain 'forever'"
expect_rc 2 $admitctl --ledger "$L" whatif --change "$work/missing.yaml"
contains "$err" "File does not exist: $work/missing.yaml"
expect_rc 2 $admitctl --ledger "$L" whatif -o pdf
expect_rc 1 $admitctl --ledger "$work/nothing" whatif
contains "$err" "no ledger at"
[ ! -e "$work/nothing" ] || fail "whatif created a ledger"
expect_rc 1 $admitctl --ledger "$L" whatif --out "$work/no/such/dir/report.html"
contains "$err" "cannot write $work/no/such/dir/report.html"
[ "$(head_of)" = "$head_before" ] || fail "whatif wrote to the ledger"

# The open history: job-e and job-f, pending at the record's end, are counted in their
# ClusterQueue (gpu, through their LocalQueue) on the recorded side, not under "(none)".
expect_rc 0 $admitctl --ledger "$P" whatif -o json
json_check "$out" '
g = {(x["kind"], x["name"]): x for x in d["groups"]}
assert ("ClusterQueue", "(none)") not in g, g.keys()
r = g[("ClusterQueue", "gpu")]["recorded"]
assert r["workloads"] == 6 and r["admitted"] == 4 and r["pendingAtEnd"] == 2, r
assert r["waitMaxMs"] == 3 * 3600000 + 40 * 60000, r'

# estimate: job-e waits behind job-d (admitted 13:30); run times of the class's finished runs are
# 30m, 1h and 2h, so job-d ends at 14:00, 14:30 or 15:30 from its admission.
expect_rc 0 $admitctl --ledger "$P" estimate ml/job-e
contains "$out" "ml/job-e: admission expected 2026-11-29T14:30:00Z (in 50m)"
contains "$out" "range: 2026-11-29T14:00:00Z (in 20m) to 2026-11-29T15:30:00Z (in 1h50m)"
expect_rc 0 $admitctl --ledger "$P" estimate ml/job-e -o json
json_check "$out" '
assert d["workload"] == "ml/job-e" and d["state"] == "pending", d
assert d["from"] == "2026-11-29T13:40:00Z", d
assert (d["earliest"], d["median"], d["latest"]) == ("2026-11-29T14:00:00Z",
    "2026-11-29T14:30:00Z", "2026-11-29T15:30:00Z"), d'
expect_rc 0 $admitctl --ledger "$P" estimate ml/job-d
contains "$out" "ml/job-d is not pending (Admitted)"
expect_rc 0 $admitctl --ledger "$P" estimate ml/job-d -o json
json_check "$out" 'assert d["state"] == "Admitted" and d["median"] is None, d'
expect_rc 1 $admitctl --ledger "$P" estimate ml/nope
contains "$err" "NotFound: no workload ml/nope at that instant"
expect_rc 2 $admitctl --ledger "$P" estimate
contains "$err" "name a workload NAMESPACE/NAME, or --backtest"
expect_rc 2 $admitctl --ledger "$P" estimate ml/job-e --backtest
contains "$err" "name a workload NAMESPACE/NAME, or --backtest"
expect_rc 1 $admitctl --ledger "$P" estimate ml/job-e --at yesterday
contains "$err" "--at 'yesterday'"

# The backtest: job-b..f waited; each is estimated from its submission and compared.
expect_rc 0 $admitctl --ledger "$L" estimate --backtest -o json
contains "$err" "backtesting up to 100 estimates"
json_check "$out" '
assert d["candidates"] == 5 and d["neverAdmitted"] == 0, d
g = {x["clusterQueue"]: x for x in d["groups"]}
assert list(g) == ["gpu", "(all)"], g
assert g["gpu"]["samples"] == 5 and g["(all)"]["samples"] == 5, g
assert all(x["withinRange"] <= x["samples"] for x in d["groups"]), g'
expect_rc 0 $admitctl --ledger "$P" estimate --backtest --samples 2 -o json
json_check "$out" '
assert d["candidates"] == 5 and d["neverAdmitted"] == 2, d
assert [x["samples"] for x in d["groups"]] == [2, 2], d'
expect_rc 0 $admitctl --ledger "$L" estimate --backtest
contains "$out" "5 workloads waited; 0 never admitted (not compared)"
contains "$out" "gpu "
expect_rc 2 $admitctl --ledger "$L" estimate --backtest --samples 0

finish whatif_cli
