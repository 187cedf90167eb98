#!/usr/bin/env python3
"""The load test's Jobs, pod watch and checks (tests/k8s/pods_load_test.sh).

  pods_load.py generate --seed S --jobs N --bursts B --out DIR
      writes DIR/definitions.yaml (namespaces, flavors, ClusterQueues in one cohort,
      LocalQueues, WorkloadPriorityClasses), DIR/burst-K.yaml (the Jobs of burst K) and
      DIR/plan.json (each Job as generated); the same seed writes the same files.
  pods_load.py watch OUT
      reads `kubectl get pods -w --output-watch-events -o json` on stdin (concatenated JSON
      objects) and appends one line per event to OUT: {"t": local receive time, "type", "pod"}.
  pods_load.py check DIR
      the checks over what the test saved in DIR (see check()); prints the figures, exits 1
      naming every check that failed.
"""

import argparse
import json
import math
import os
import random
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone

RUNTIME_ANNOTATION = "admission-ledger.io/simulated-runtime"
TOKEN_ANNOTATION = "admission-ledger.io/fencing-token"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
LOAD_LABEL = "admission-ledger.io/load-test"
GPU = "nvidia.com/gpu"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
PRODUCT_LABEL = "nvidia.com/gpu.product"
COHORT = "gpus"
LOCAL_QUEUE = "jobs"
# Per GPU a pod asks for this much CPU and memory: 8 GPUs (80 cores, 512Gi) fit an A100 node
# (94 cores, 660Gi allocatable), so GPUs are what runs out.
CPU_PER_GPU = 10
MEMORY_GI_PER_GPU = 64

# The nodes of ops/k8s/nodes/load-20.yaml: 12 H100 and 8 A100 nodes of 8 GPUs each.
NODE_GPUS = {"h100": 12 * 8, "a100": 8 * 8}
# Nominal GPU quota per tenant and flavor; each flavor's column sums to its nodes' GPUs.
# team-c may borrow at most 24 H100 GPUs; team-a lends at most 16 of its 24 A100 GPUs.
TENANTS = {
    "team-a": {"h100": 40, "a100": 24},
    "team-b": {"h100": 32, "a100": 24},
    "team-c": {"h100": 24, "a100": 16},
}
BORROWING_LIMIT = {("team-c", "h100"): 24}
LENDING_LIMIT = {("team-a", "a100"): 16}
TENANT_WEIGHTS = {"team-a": 40, "team-b": 35, "team-c": 25}
PRIORITIES = {"low": 100, "normal": 500, "high": 1000}
PRIORITY_WEIGHTS = {"low": 40, "normal": 40, "high": 20}
GPUS_PER_POD = {1: 35, 2: 30, 4: 20, 8: 15}
PARALLELISM = {1: 25, 2: 25, 3: 25, 4: 25}
# A Job asks for a GPU model by nodeSelector this often (else the ClusterQueue's order: H100,
# then A100).
PIN_WEIGHTS = {None: 75, "h100": 15, "a100": 10}
RUNTIME_SECONDS = (2, 10)  # uniform, whole seconds


def pick(rng, weights):
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


def quota_block(gpus, tenant, flavor):
    """The resources of one flavor in a ClusterQueue: GPUs, and CPU and memory in step."""
    scale = {"cpu": CPU_PER_GPU, "memory": MEMORY_GI_PER_GPU, GPU: 1}
    unit = {"cpu": "", "memory": "Gi", GPU: ""}
    lines = []
    for resource in ("cpu", "memory", GPU):
        entry = "{name: %s, nominalQuota: %s%s" % (resource, gpus * scale[resource], unit[resource])
        if (tenant, flavor) in BORROWING_LIMIT:
            entry += ", borrowingLimit: %s%s" % (
                BORROWING_LIMIT[(tenant, flavor)] * scale[resource], unit[resource])
        if (tenant, flavor) in LENDING_LIMIT:
            entry += ", lendingLimit: %s%s" % (
                LENDING_LIMIT[(tenant, flavor)] * scale[resource], unit[resource])
        lines.append("      - " + entry + "}")
    return "\n".join(lines)


def definitions():
    docs = []
    for flavor, product in (("h100", H100), ("a100", A100)):
        docs.append("""apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: %s
spec:
  nodeLabels:
    %s: %s
  nodeTaints:
  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}""" % (flavor, PRODUCT_LABEL, product))
    for name, value in PRIORITIES.items():
        docs.append("""apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: %s
value: %d
description: load test, %s priority""" % (name, value, name))
    for tenant, quota in TENANTS.items():
        docs.append("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s" % tenant)
        flavors = "\n".join("    - name: %s\n      resources:\n%s" % (
            flavor, quota_block(quota[flavor], tenant, flavor)) for flavor in ("h100", "a100"))
        docs.append("""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %s
spec:
  cohortName: %s
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: %s
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
%s""" % (tenant, COHORT, tenant, flavors))
        docs.append("""apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: %s
  name: %s
spec:
  clusterQueue: %s""" % (tenant, LOCAL_QUEUE, tenant))
    return "# The load test's definitions (tests/k8s/pods_load.py generate).\n" + \
        "\n---\n".join(docs) + "\n"


def job_yaml(job):
    selector = ""
    if job["pin"]:
        selector = "      nodeSelector:\n        %s: %s\n" % (
            PRODUCT_LABEL, H100 if job["pin"] == "h100" else A100)
    g = job["gpus"]
    # A pod stopped by its Job's suspension (preemption) is not a failure of the Job: KWOK ends
    # it as a kubelet would after SIGTERM (exit 143), and a pod deleted before it was bound gets
    # the DisruptionTarget condition. Counted, such pods would exhaust backoffLimit after a few
    # preemptions (the Job controller counts every deleted pod).
    return """apiVersion: batch/v1
kind: Job
metadata:
  name: %(name)s
  namespace: %(ns)s
  labels:
    %(ql)s: %(lq)s
    %(pl)s: %(prio)s
    %(ll)s: "true"
spec:
  parallelism: %(n)d
  completions: %(n)d
  backoffLimit: 0
  podFailurePolicy:
    rules:
    - action: Ignore
      onExitCodes: {operator: In, values: [143]}
    - action: Ignore
      onPodConditions:
      - {type: DisruptionTarget}
  template:
    metadata:
      labels:
        %(ll)s: "true"
      annotations:
        %(ra)s: %(runtime)ds
    spec:
%(selector)s      containers:
      - name: work
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: "%(cpu)d", memory: %(mem)dGi, nvidia.com/gpu: "%(g)d"}
          limits: {nvidia.com/gpu: "%(g)d"}
      restartPolicy: Never
""" % {"name": job["name"], "ns": job["namespace"], "ql": QUEUE_LABEL, "lq": LOCAL_QUEUE,
       "pl": PRIORITY_LABEL, "prio": job["priority"], "ll": LOAD_LABEL, "n": job["pods"],
       "ra": RUNTIME_ANNOTATION, "runtime": job["runtime"], "selector": selector,
       "cpu": g * CPU_PER_GPU, "mem": g * MEMORY_GI_PER_GPU, "g": g}


def generate(args):
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "definitions.yaml"), "w") as f:
        f.write(definitions())
    jobs = []
    per_burst = [args.jobs // args.bursts + (1 if k < args.jobs % args.bursts else 0)
                 for k in range(args.bursts)]
    for burst, count in enumerate(per_burst):
        docs = []
        for _ in range(count):
            job = {
                "name": "load-%03d" % (len(jobs) + 1),
                "namespace": pick(rng, TENANT_WEIGHTS),
                "priority": pick(rng, PRIORITY_WEIGHTS),
                "pods": pick(rng, PARALLELISM),
                "gpus": pick(rng, GPUS_PER_POD),
                "pin": pick(rng, PIN_WEIGHTS),
                "runtime": rng.randint(*RUNTIME_SECONDS),
                "burst": burst,
            }
            jobs.append(job)
            docs.append(job_yaml(job))
        with open(os.path.join(args.out, "burst-%d.yaml" % burst), "w") as f:
            f.write("---\n".join(docs))
    with open(os.path.join(args.out, "plan.json"), "w") as f:
        json.dump({"seed": args.seed, "jobs": jobs}, f, indent=1)
    gpu_seconds = sum(j["pods"] * j["gpus"] * j["runtime"] for j in jobs)
    print("generated %d Jobs in %d bursts (seed %d): %d pods, %d GPU-seconds of work "
          "(%.0f s on all %d GPUs)" % (
              len(jobs), args.bursts, args.seed, sum(j["pods"] for j in jobs), gpu_seconds,
              gpu_seconds / sum(NODE_GPUS.values()), sum(NODE_GPUS.values())), file=sys.stderr)


def watch(args):
    decoder = json.JSONDecoder()
    buf = ""
    with open(args.out, "a") as out:
        for chunk in iter(lambda: sys.stdin.readline(), ""):
            buf += chunk
            while True:
                stripped = buf.lstrip()
                if not stripped:
                    buf = ""
                    break
                try:
                    obj, end = decoder.raw_decode(stripped)
                except ValueError:
                    buf = stripped
                    break
                buf = stripped[end:]
                pod = obj.get("object", obj)
                out.write(json.dumps({"t": time.time(), "type": obj.get("type", "ADDED"),
                                      "pod": pod}) + "\n")
                out.flush()


# How far billing's used GPU-seconds may exceed the pods' own run time, per admitted pod (x its
# GPUs): billing counts from the bridge's `released` report (before the Job is unsuspended) to
# the quota's release, the pods from their containers' start to their end. Between: the Job
# controller creating the pods, the scheduler placing them (a pod may wait for a whole free node
# while the quota, which knows no nodes, fits), KWOK starting them; at the end the Job's last
# pod, the Job controller's Complete and the bridge's `finished` report; for an evicted
# admission, the pods' deletion and the bridge's `terminated` report (an admission evicted after
# its release whose pods never started bills this time alone). Kubernetes' timestamps are whole
# seconds, hence also 1 s per pod below the pods' time.
BILLING_SLACK_SECONDS_PER_POD = 20


def parse_time(text):
    """RFC 3339 (Kubernetes' whole seconds or the ledger's nanoseconds) -> float seconds."""
    if text is None:
        return None
    main, _, frac = text.rstrip("Z").partition(".")
    t = datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def iso(t):
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def percentile(values, q):
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100.0 * len(ordered)) - 1)]


def load_json(path):
    with open(path) as f:
        return json.load(f)


def load_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Checks:
    """Failures by kind (the first words of the message up to ':'), the first few of each
    printed; ok() prints what a group of checks showed, or that it failed."""

    SHOWN_PER_KIND = 5

    def __init__(self):
        self.failures = []
        self.by_kind = defaultdict(int)
        self.mark = 0

    def fail(self, kind, what):
        self.by_kind[kind] += 1
        if self.by_kind[kind] <= self.SHOWN_PER_KIND:
            print("FAIL: %s: %s" % (kind, what), file=sys.stderr)
        self.failures.append((kind, what))

    def ok(self, what):
        failed = len(self.failures) - self.mark
        self.mark = len(self.failures)
        if failed:
            print("  NOT ok (%d failures): %s" % (failed, what), file=sys.stderr)
        else:
            print("  ok: " + what, file=sys.stderr)

    def summary(self):
        for kind, n in sorted(self.by_kind.items()):
            print("%d x %s%s" % (n, kind, " (%d shown)" % self.SHOWN_PER_KIND
                                 if n > self.SHOWN_PER_KIND else ""), file=sys.stderr)


class LedgerFold:
    """The ledger's quota, node and token facts, folded event by event, each event checked."""

    def __init__(self, checks):
        self.c = checks
        self.queues = {}            # ClusterQueue -> {"cohort", "quota": {(flavor, res): (nominal, borrow, lend)}}
        self.reserved = {}          # workload uid -> open reservation
        self.nodes = {}             # (node, flavor) -> {"capacity": {res: milli}, "healthy": bool}
        self.inventory_complete_at = None
        self.node_events = 0
        self.node_failures = 0
        self.admitted = {}          # token -> admission facts
        self.reports = defaultdict(lambda: defaultdict(int))  # token -> report -> count
        self.reservations = 0
        self.borrowing = 0
        self.preempted = 0
        self.evictions = 0
        self.peak = defaultdict(int)   # (flavor, res) -> most used at once in the cohort
        self.quota_checked = 0
        self.node_checked = 0

    def apply(self, e):
        kind, body = e["type"], e["event"]["body"]
        event = body.get(kind, {})
        seq, t = e["sequence"], int(e["event"]["recordedAtNs"]) / 1e9
        handler = getattr(self, "on_" + kind, None)
        if handler:
            handler(event, seq, t)

    def on_clusterQueueDefined(self, d, seq, t):
        quota = {}
        for group in d.get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                for r in flavor.get("resources", []):
                    quota[(flavor["name"], r["name"])] = (
                        int(r.get("nominalQuotaMilli", 0)),
                        int(r["borrowingLimitMilli"]) if r.get("hasBorrowingLimit") else None,
                        int(r["lendingLimitMilli"]) if r.get("hasLendingLimit") else None)
        self.queues[d["name"]] = {"cohort": d.get("cohortName", ""), "quota": quota}

    def on_objectDeleted(self, d, seq, t):
        if d.get("kind") == "ClusterQueue":
            self.queues.pop(d.get("name"), None)

    def on_quotaReserved(self, d, seq, t):
        w = d["workload"]
        if w["uid"] in self.reserved:
            self.c.fail('double reservation', "sequence %s: quota reserved for %s/%s, which holds a reservation" % (
                seq, w["namespace"], w["name"]))
        usage = defaultdict(int)
        gpu_flavor = None
        for ps in d["admission"].get("podSetAssignments", []):
            flavor_of = {f["resource"]: f["flavor"] for f in ps.get("flavors", [])}
            for r in ps.get("resourceUsage", []):
                usage[(flavor_of[r["name"]], r["name"])] += int(r["milli"])
            gpu_flavor = flavor_of.get(GPU, gpu_flavor)
        self.reserved[w["uid"]] = {
            "cq": d["admission"]["clusterQueue"], "usage": usage, "seq": seq, "t": t,
            "evicting": False, "token": None, "gpu_flavor": gpu_flavor,
            "workload": "%s/%s" % (w["namespace"], w["name"])}
        self.reservations += 1
        self.borrowing += bool(d.get("borrowing"))
        self.check_quota(seq)
        self.check_nodes(seq, reservation=True)

    def on_admitted(self, d, seq, t):
        w, token = d["workload"], d.get("fencingToken", "")
        if not token:
            self.c.fail('admission without a token', "sequence %s: admitted %s/%s without a token" % (seq, w["namespace"], w["name"]))
            return
        if token in self.admitted:
            self.c.fail('token admitted twice', "sequence %s: token %s admitted twice (first at %s)" % (
                seq, token, self.admitted[token]["seq"]))
        r = self.reserved.get(w["uid"])
        if r is None:
            self.c.fail('admission without a reservation', "sequence %s: %s/%s admitted without a reservation" % (
                seq, w["namespace"], w["name"]))
            r = {}
        r["token"] = token
        self.admitted[token] = {"seq": seq, "t": t, "namespace": w["namespace"], "name": w["name"],
                                "uid": w["uid"], "gpu_flavor": r.get("gpu_flavor"),
                                "gpus_milli": sum(v for (f, res), v in r.get("usage", {}).items()
                                                  if res == GPU),
                                "released_t": None, "quota_released_t": None}

    def on_evictionStarted(self, d, seq, t):
        self.evictions += 1
        r = self.reserved.get(d["workload"]["uid"])
        if r:
            r["evicting"] = True

    def on_preempted(self, d, seq, t):
        self.preempted += 1

    def on_quotaReleased(self, d, seq, t):
        w = d["workload"]
        r = self.reserved.pop(w["uid"], None)
        if r is None:
            self.c.fail('release without a reservation', "sequence %s: quota released for %s/%s, which holds none" % (
                seq, w["namespace"], w["name"]))
            return
        if r["token"]:
            self.admitted[r["token"]]["quota_released_t"] = t
            self.admitted[r["token"]]["quota_released"] = "sequence %s, %s" % (
                seq, d.get("reason", ""))
        self.check_quota(seq)
        self.check_nodes(seq)

    def on_podsReported(self, d, seq, t):
        token, report = d.get("fencingToken", ""), d.get("report", "released")
        self.reports[token][report] += 1
        a = self.admitted.get(token)
        if a is None:
            self.c.fail('report with an unknown token', "sequence %s: pods %s with token %r, which no admission carries" % (
                seq, report, token))
        elif report == "released" and a["released_t"] is None:
            a["released_t"] = t

    def node_report(self, d, seq, healthy):
        self.node_events += 1
        key = (d["node"], d.get("flavor", ""))
        node = self.nodes.setdefault(key, {"capacity": {}, "healthy": True})
        if d.get("capacity"):
            node["capacity"] = {r["name"]: int(r["milli"]) for r in d["capacity"]}
        if healthy is not None:
            node["healthy"] = healthy
        if d.get("inventoryComplete") and self.inventory_complete_at is None:
            self.inventory_complete_at = seq
        self.check_nodes(seq)

    def on_nodeCapacityChanged(self, d, seq, t):
        self.node_report(d, seq, None)

    def on_nodeFailed(self, d, seq, t):
        self.node_failures += 1
        self.node_report(d, seq, False)

    def on_nodeRecovered(self, d, seq, t):
        self.node_report(d, seq, True)

    def usage_by_queue(self, include_evicting=True):
        usage = defaultdict(lambda: defaultdict(int))
        for r in self.reserved.values():
            if include_evicting or not r["evicting"]:
                for key, v in r["usage"].items():
                    usage[r["cq"]][key] += v
        return usage

    def check_quota(self, seq):
        """Each ClusterQueue within nominal + borrowingLimit; each cohort's use of what its
        members lend (beyond what each keeps for itself, nominal - lendingLimit) within the
        lent total, hence the cohort within the sum of its nominal quotas."""
        self.quota_checked += 1
        usage = self.usage_by_queue()
        cohorts = defaultdict(list)
        for name, q in self.queues.items():
            cohorts[q["cohort"] or ("/" + name)].append(name)
            for key, (nominal, borrow, _) in q["quota"].items():
                used = usage[name].get(key, 0)
                if borrow is not None and used > nominal + borrow:
                    self.c.fail('ClusterQueue over its limit', "sequence %s: ClusterQueue %s uses %s milli of %s, beyond nominal "
                                "%d + borrowingLimit %d" % (seq, name, used, key, nominal, borrow))
        for cohort, members in cohorts.items():
            keys = set(k for m in members for k in self.queues[m]["quota"])
            for key in keys:
                lent = from_pool = total = nominal_sum = 0
                for m in members:
                    nominal, _, lend = self.queues[m]["quota"].get(key, (0, None, None))
                    lendable = nominal if lend is None else min(lend, nominal)
                    used = usage[m].get(key, 0)
                    lent += lendable
                    from_pool += max(0, used - (nominal - lendable))
                    total += used
                    nominal_sum += nominal
                self.peak[key] = max(self.peak[key], total)
                if total > nominal_sum:
                    self.c.fail('cohort over its nominal quota', "sequence %s: cohort %s uses %d milli of %s, beyond its nominal %d"
                                % (seq, cohort, total, key, nominal_sum))
                if from_pool > lent:
                    self.c.fail('cohort over what is lent', "sequence %s: cohort %s takes %d milli of %s from what its "
                                "members lend, beyond the %d lent" % (seq, cohort, from_pool, key,
                                                                      lent))
        for name in usage:
            if name not in self.queues:
                self.c.fail('usage in an undefined ClusterQueue', "sequence %s: usage in ClusterQueue %s, which is not defined" % (seq, name))

    def check_nodes(self, seq, reservation=False):
        """Once the inventory is complete, each flavor with a known node: the usage of every
        ClusterQueue together within its healthy nodes' capacity (evicting workloads, whose
        pods may still be on a failed node, count at a new reservation only)."""
        if self.inventory_complete_at is None:
            return
        self.node_checked += 1
        totals = defaultdict(int)
        for q in self.usage_by_queue(include_evicting=reservation).values():
            for key, v in q.items():
                totals[key] += v
        capacity = defaultdict(int)
        known = set()
        for (node, flavor), n in self.nodes.items():
            known.add(flavor)
            if n["healthy"]:
                for res, v in n["capacity"].items():
                    capacity[(flavor, res)] += v
        for (flavor, res), used in totals.items():
            if flavor in known and used > capacity[(flavor, res)]:
                self.c.fail('flavor over its healthy nodes', "sequence %s: flavor %s uses %d milli of %s, beyond its healthy nodes' "
                            "%d" % (seq, flavor, used, res, capacity[(flavor, res)]))


def pod_history(watch_lines):
    """Per pod uid: its last object (a deleted pod's final one) and when the watch first saw it
    Running (this machine's clock)."""
    pods = {}
    for line in watch_lines:
        pod = line["pod"]
        uid = pod["metadata"]["uid"]
        entry = pods.setdefault(uid, {"first_running_t": None, "deleted": False})
        entry["pod"] = pod
        if line["type"] == "DELETED":
            entry["deleted"] = True
        if pod.get("status", {}).get("phase") == "Running" and entry["first_running_t"] is None:
            entry["first_running_t"] = line["t"]
    return pods


def container_times(pod):
    """(startedAt, finishedAt) of the pod's container, None where it has none."""
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    state = statuses[0].get("state", {})
    for key in ("terminated", "running"):
        if key in state:
            return parse_time(state[key].get("startedAt")), parse_time(state[key].get("finishedAt"))
    return None, None


def job_complete(job):
    return any(x["type"] == "Complete" and x["status"] == "True"
               for x in job["status"].get("conditions", []))


def check_jobs(c, d, plan):
    jobs = load_json(os.path.join(d, "jobs.json"))["items"]
    complete = [j for j in jobs if job_complete(j)]
    names = sorted("%s/%s" % (j["namespace"], j["name"]) for j in plan["jobs"])
    seen = sorted("%s/%s" % (j["metadata"]["namespace"], j["metadata"]["name"]) for j in complete)
    if seen != names:
        c.fail('Job not Complete', "Jobs not Complete: %s" % sorted(set(names) - set(seen))[:20])
    else:
        c.ok("every one of the %d Jobs is Complete" % len(names))


def check_ledger(c, d):
    events = load_lines(os.path.join(d, "log.jsonl"))
    fold = LedgerFold(c)
    for e in events:
        fold.apply(e)
    print("ledger: %d events, %d reservations (%d borrowing), %d admissions, %d evictions, "
          "%d preemptions, %d node reports (%d failures)" % (
              len(events), fold.reservations, fold.borrowing, len(fold.admitted), fold.evictions,
              fold.preempted, fold.node_events, fold.node_failures), file=sys.stderr)
    if fold.reserved:
        c.fail('quota reserved at the end', "quota still reserved at the end: %s" % sorted(
            r["workload"] for r in fold.reserved.values())[:10])
    peaks = ", ".join("%s %s %g" % (f, r, v / 1000.0) for (f, r), v in sorted(fold.peak.items())
                      if r == GPU)
    c.ok("quota: %d states checked (each ClusterQueue within nominal + borrowingLimit, each "
         "cohort within what its members lend); the cohort's most GPUs at once: %s" % (
             fold.quota_checked, peaks))
    if fold.node_events == 0:
        print("  NODE CAPACITY: no node reports: the ledger holds no nodeCapacityChanged, "
              "nodeFailed or nodeRecovered, so node capacity bounded nothing and was not checked "
              "from the ledger", file=sys.stderr)
    elif fold.inventory_complete_at is None:
        c.fail('inventory never complete', "%d node reports, but none completes the inventory" % fold.node_events)
    else:
        flavors = defaultdict(lambda: [0, 0])
        for (node, flavor), n in fold.nodes.items():
            flavors[flavor][0] += 1
            flavors[flavor][1] += n["capacity"].get(GPU, 0) // 1000
        c.ok("node capacity: %d states checked after the inventory completed (sequence %s): %s" % (
            fold.node_checked, fold.inventory_complete_at, ", ".join(
                "%s %d nodes %d GPUs" % (f, v[0], v[1]) for f, v in sorted(flavors.items()))))
        for flavor, gpus in NODE_GPUS.items():
            if flavors[flavor][1] != gpus:
                c.fail('node GPUs', "the ledger's %s nodes hold %d GPUs, the nodes file %d" % (
                    flavor, flavors[flavor][1], gpus))
    check_tokens(c, fold)
    check_job_tokens(c, d, fold)
    return fold


def check_job_tokens(c, d, fold):
    """The token the bridge last put on each Job (and its pod template) is an admission of the
    Job's own workload, released."""
    jobs = load_json(os.path.join(d, "jobs.json"))["items"]
    for j in jobs:
        name = "%s/%s" % (j["metadata"]["namespace"], j["metadata"]["name"])
        token = j["metadata"].get("annotations", {}).get(TOKEN_ANNOTATION)
        template = j["spec"]["template"]["metadata"].get("annotations", {}).get(TOKEN_ANNOTATION)
        a = fold.admitted.get(token)
        if a is None or (a["namespace"], a["name"]) != (j["metadata"]["namespace"],
                                                         "job-" + j["metadata"]["name"]):
            c.fail("Job without an admitted token", "Job %s carries token %r" % (name, token))
        elif template != token:
            c.fail("Job's pod template with another token", "Job %s: %r, its template %r" % (
                name, token, template))
        elif a["released_t"] is None:
            c.fail("Job with an unreleased token", "Job %s carries %s" % (name, token))
    c.ok("each of the %d Jobs and its pod template carry a released token of its own workload" %
         len(jobs))


def check_tokens(c, fold):
    unreleased = 0
    for token, reports in fold.reports.items():
        if reports.get("released", 0) > 1:
            c.fail('token released more than once', "token %s released %d times" % (token, reports["released"]))
    for token in fold.admitted:
        if fold.reports[token].get("released", 0) == 0:
            unreleased += 1
    c.ok("%d admissions, each with a token of its own; %d released once, %d never released "
         "(evicted first); no report with an unknown token" % (
             len(fold.admitted), len(fold.admitted) - unreleased, unreleased))


def check_pods(c, d, fold):
    pods = pod_history(load_lines(os.path.join(d, "pods-watch.jsonl")))
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels", {}).get(PRODUCT_LABEL)
             for n in load_json(os.path.join(d, "nodes.json"))["items"]}
    final = {p["metadata"]["uid"]: p for p in load_json(os.path.join(d, "pods.json"))["items"]}
    for uid in final:
        if uid not in pods:
            c.fail('pod missing from the watch', "pod %s is not in the watch" % final[uid]["metadata"]["name"])
    product = {"h100": H100, "a100": A100}
    latency, observed = [], []
    ran = defaultdict(float)      # flavor -> pods' GPU-seconds
    gpu_pods = defaultdict(int)   # flavor -> sum over pods of their GPUs
    tokens_with_pods = set()
    late_tokens, late_succeeded = set(), 0
    for uid, entry in pods.items():
        pod = entry["pod"]
        name = "%s/%s" % (pod["metadata"]["namespace"], pod["metadata"]["name"])
        token = pod["metadata"].get("annotations", {}).get(TOKEN_ANNOTATION)
        a = fold.admitted.get(token)
        if a is None:
            c.fail('pod without an admitted token', "pod %s carries token %r, which no admission has" % (name, token))
            continue
        tokens_with_pods.add(token)
        job = pod["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name", "")
        if (a["namespace"], a["name"]) != (pod["metadata"]["namespace"], "job-" + job):
            c.fail("pod with another Job's token", "pod %s of Job %s carries the token of %s/%s" % (name, job, a["namespace"],
                                                                     a["name"]))
        created = parse_time(pod["metadata"]["creationTimestamp"])
        start, end = container_times(pod)
        # Kubernetes' times are whole seconds, cut down: compare with the ledger's cut alike.
        if a["released_t"] is None:
            c.fail('pod of an unreleased token', "pod %s exists, but its token %s was never released" % (name, token))
        elif created < math.floor(a["released_t"]):
            c.fail('pod created before its release', "pod %s created at %s, before its token's released report at %.3f" % (
                name, pod["metadata"]["creationTimestamp"], a["released_t"]))
        if start is not None and start < math.floor(a["t"]):
            c.fail('pod started before its admission', "pod %s started at %.0f, before its admission at %.3f" % (name, start, a["t"]))
        if end is not None and (a["quota_released_t"] is None or end > math.ceil(a["quota_released_t"])):
            late_tokens.add(token)
            late_succeeded += not entry["deleted"]
            c.fail('pod ran after its quota was released', "pod %s (token %s) created %s, ran %s..%s (deleted %s), after its quota "
                   "was released at %s (%s); released report at %s" % (
                       name, token, pod["metadata"]["creationTimestamp"], iso(start),
                       iso(end), pod["metadata"].get("deletionTimestamp"),
                       iso(a["quota_released_t"]), a.get("quota_released"),
                       iso(a["released_t"])))
        node = pod.get("spec", {}).get("nodeName")
        if node and nodes.get(node) != product.get(a["gpu_flavor"]):
            c.fail('pod on a node of another flavor', "pod %s of a %s admission ran on %s (%s)" % (name, a["gpu_flavor"], node,
                                                                 nodes.get(node)))
        if not entry["deleted"] and pod["status"].get("phase") != "Succeeded":
            c.fail('pod not Succeeded', "pod %s is %s at the end" % (name, pod["status"].get("phase")))
        gpus = int(pod["spec"]["containers"][0]["resources"]["requests"].get(GPU, "0"))
        gpu_pods[a["gpu_flavor"]] += gpus
        if start is not None:
            latency.append(start - a["t"])
            if end is not None:
                ran[a["gpu_flavor"]] += (end - start) * gpus
        if entry["first_running_t"] is not None:
            observed.append(entry["first_running_t"] - a["t"])
    for token in tokens_with_pods:
        if fold.reports[token].get("released", 0) != 1:
            c.fail('token with pods not released once', "token %s has pods and %d released reports" % (
                token, fold.reports[token].get("released", 0)))
    if late_tokens:
        print("  %d pods of %d admissions ran after their quota was released (%d of them to the "
              "end, Succeeded)" % (c.by_kind["pod ran after its quota was released"],
                                    len(late_tokens), late_succeeded), file=sys.stderr)
    c.ok("%d pods (%d deleted on the way), each with an admitted token of its own Job, created "
         "after its released report, started after its admission, ended before its quota's "
         "release, on a node of the admitted flavor" % (
             len(pods), sum(e["deleted"] for e in pods.values())))
    if latency:
        print("admitted-to-running latency over %d pods: container startedAt (whole seconds, "
              "cut down) p50 %.2f s, p99 %.2f s; seen Running by the watch p50 %.2f s, p99 %.2f s"
              % (len(latency), percentile(latency, 50), percentile(latency, 99),
                 percentile(observed, 50), percentile(observed, 99)), file=sys.stderr)
    return ran, gpu_pods


def check_billing(c, d, fold, ran, gpu_pods):
    billed = defaultdict(float)
    for row in load_json(os.path.join(d, "billing.json"))["rows"]:
        if row.get("resource") == GPU:
            billed[row["flavor"]] += float(row["used"])
    # The same from the ledger's own intervals, released report to quota released, and the
    # GPUs of the admissions whose pods were released (the slack's unit).
    intervals = defaultdict(float)
    released_gpus = defaultdict(float)
    for a in fold.admitted.values():
        if a["released_t"] is not None and a["quota_released_t"] is not None:
            gpus = a["gpus_milli"] / 1000.0
            intervals[a["gpu_flavor"]] += (a["quota_released_t"] - a["released_t"]) * gpus
            released_gpus[a["gpu_flavor"]] += gpus
    for flavor in sorted(set(billed) | set(ran)):
        b, r, i = billed[flavor], ran[flavor], intervals[flavor]
        low = r - gpu_pods[flavor] * 1.0
        high = r + released_gpus[flavor] * BILLING_SLACK_SECONDS_PER_POD
        print("billing %s: %.1f GPU-seconds used (the ledger's released-to-quota-released "
              "intervals: %.1f); the pods ran %.1f GPU-seconds; billing - pods = %.1f s per "
              "released pod (allowed: -1..%d s)" % (
                  flavor, b, i, r, (b - r) / max(1.0, released_gpus[flavor]),
                  BILLING_SLACK_SECONDS_PER_POD), file=sys.stderr)
        if abs(b - i) > 0.001 * max(1.0, i) + 1:
            c.fail("billing against the ledger", "%s: billing's %.1f GPU-seconds are not the "
                   "ledger's intervals %.1f" % (flavor, b, i))
        if not low <= b <= high:
            c.fail("billing against the pods", "%s: billing's %.1f GPU-seconds are not the "
                   "pods' %.1f within -1..+%d s per pod (%.1f..%.1f)" % (
                       flavor, b, r, BILLING_SLACK_SECONDS_PER_POD, low, high))
    c.ok("billing's GPU-seconds per flavor: the ledger's intervals, and the pods' run time "
         "within the slack")


def check(d):
    c = Checks()
    plan = load_json(os.path.join(d, "gen", "plan.json"))
    check_jobs(c, d, plan)
    fold = check_ledger(c, d)
    ran, gpu_pods = check_pods(c, d, fold)
    check_billing(c, d, fold, ran, gpu_pods)
    if c.failures:
        c.summary()
        print("%d checks failed" % len(c.failures), file=sys.stderr)
        return 1
    return 0



def stuck(d, logs):
    """Prints each Job that is not Complete: its suspension, token and conditions, its pods,
    the ledger's view of its workload and the workload's last events, and the last lines of
    each log in logs that name it (a failed run's evidence, for a reader without the test's
    folder)."""
    jobs = load_json(os.path.join(d, "jobs.json"))["items"]
    pods = load_json(os.path.join(d, "pods.json"))["items"]
    workloads = {(w["metadata"]["namespace"], w["metadata"]["labels"].get(
        "kueue.x-k8s.io/job-uid")): w for w in load_json(
            os.path.join(d, "workloads.json"))["items"]}
    log = load_lines(os.path.join(d, "log.jsonl"))
    incomplete = [job for job in jobs if not job_complete(job)]
    for job in incomplete:
        conditions = job["status"].get("conditions", [])
        meta = job["metadata"]
        ann = meta.get("annotations", {})
        print("Job %s/%s uid %s suspend %s token %s suspended-at %s" % (
            meta["namespace"], meta["name"], meta["uid"], job["spec"].get("suspend"),
            ann.get("admission-ledger.io/fencing-token"),
            ann.get("admission-ledger.io/suspended-at")))
        print("  status %s" % json.dumps({k: v for k, v in job["status"].items()
                                          if k != "conditions"}))
        for x in conditions:
            print("  condition %s=%s %s %s" % (x["type"], x["status"], x.get("reason"),
                                               x.get("lastTransitionTime")))
        for pod in pods:
            if pod["metadata"].get("labels", {}).get("batch.kubernetes.io/controller-uid") \
                    != meta["uid"]:
                continue
            print("  pod %s phase %s node %s gates %s deleting %s" % (
                pod["metadata"]["name"], pod["status"].get("phase"),
                pod["spec"].get("nodeName"),
                [g["name"] for g in pod["spec"].get("schedulingGates", [])],
                pod["metadata"].get("deletionTimestamp")))
        w = workloads.get((meta["namespace"], meta["uid"]))
        if w is None:
            print("  no workload in the ledger")
            continue
        print("  ledger workload %s phase %s" % (w["metadata"]["name"],
                                                 w["status"].get("phase")))
        for x in w["status"].get("conditions", []):
            print("    condition %s=%s %s %s" % (x["type"], x["status"], x.get("reason"),
                                                 x.get("lastTransitionTime")))
        name = w["metadata"]["name"]
        mine = [e for e in log if name in json.dumps(e["event"])]
        for e in mine[-8:]:
            print("    event %s %s" % (e.get("sequence"), e["type"]))
    # A name quoted, as JSON logs write it ("load-070") and klog's messages (\"load-070\").
    quoted = ['"%s"' % j["metadata"]["name"] for j in incomplete]
    quoted += [q.replace('"', '\\"') for q in quoted]
    for path in logs:
        print("the lines of %s naming them:" % os.path.basename(path))
        if not os.path.exists(path):
            print("  (no such file)")
            continue
        with open(path, errors="replace") as f:
            lines = [line.rstrip()[:400] for line in f if any(q in line for q in quoted)]
        for line in lines[-20:]:
            print("  " + line)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--jobs", type=int, required=True)
    g.add_argument("--bursts", type=int, required=True)
    g.add_argument("--out", required=True)
    w = sub.add_parser("watch")
    w.add_argument("out")
    c = sub.add_parser("check")
    c.add_argument("dir")
    s = sub.add_parser("stuck")
    s.add_argument("dir")
    s.add_argument("logs", nargs="*")
    args = parser.parse_args()
    if args.command == "generate":
        generate(args)
    elif args.command == "watch":
        watch(args)
    elif args.command == "stuck":
        sys.exit(stuck(args.dir, args.logs))
    else:
        sys.exit(check(args.dir))


if __name__ == "__main__":
    main()
