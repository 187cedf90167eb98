#!/usr/bin/env python3
"""Helpers of tests/bench/kueue_side_by_side.sh.

  divide GENERATOR N      Kueue's generator file with each workload set's count divided by N
                          (at least 1), on stdout.
  our-crds [--conversion none|webhook]
                          (stdin: `kubectl get crd -o json`) the kueue.x-k8s.io CRDs as
                          installed, without server fields, as a List to apply again; by
                          default without their conversion webhook, as Kueue's side runs.
  stats FILE --wall S --cpu S --rss MIB --apiserver-cpu S [--cpu-admitd S]
                          writes one side's process figures to FILE (JSON).
  finished                (stdin: `admitctl log -o json`) how many workloads the ledger finished.
  expected GENERATOR      how many workloads the generator file makes.
  recorded SUMMARY        how many workloads the runner's summary recorded (0: no summary).
  requests BEFORE AFTER   (two scrapes of the API server's apiserver_request_total) the round's
                          writes by verb and resource, as JSON.
  report DIR ROUNDS [--sides SIDE...]
                          the side-by-side table of every round's summaries and figures, and
                          `name: value` lines; exits 1 when a side left a workload unfinished.
"""

import argparse
import glob
import json
import re
import sys

import yaml

SIDES = ("kueue", "ledger")
WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION")


def divide(path, n):
    with open(path) as f:
        config = yaml.safe_load(f)
    for cohort in config.get("cohorts", []):
        for qset in cohort.get("queuesSets", []):
            for wset in qset.get("workloadsSets", []):
                wset["count"] = max(1, wset["count"] // n)
    yaml.safe_dump(config, sys.stdout, sort_keys=False)


def our_crds(conversion):
    """Our CRDs as installed; with conversion "none", without the conversion webhook, as Kueue's
    runner installs Kueue's CRDs (its base CRDs, strategy None): the API server keeps a watch
    cache for each served version and, with a webhook, calls it for every change of every object
    to fill the v1beta1 one though no client reads v1beta1 (7,943 calls for the Workloads of a /10
    run), a cost Kueue's side does not pay in this harness."""
    items = []
    for crd in json.load(sys.stdin)["items"]:
        if not crd["metadata"]["name"].endswith("kueue.x-k8s.io"):
            continue
        if conversion == "none":
            crd["spec"]["conversion"] = {"strategy": "None"}
        meta = crd["metadata"]
        crd["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
        crd["metadata"].get("annotations", {}).pop(
            "kubectl.kubernetes.io/last-applied-configuration", None)
        crd.pop("status", None)
        items.append(crd)
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)


def stats(args):
    with open(args.file, "w") as f:
        json.dump({"wall_s": args.wall, "cpu_s": args.cpu, "rss_mib": args.rss,
                   "apiserver_cpu_s": args.apiserver_cpu, "admitd_cpu_s": args.cpu_admitd}, f)


def finished():
    names = set()
    for line in sys.stdin:
        e = json.loads(line)
        if e["type"] == "workloadFinished":
            w = e["event"]["body"]["workloadFinished"]["workload"]
            names.add((w["namespace"], w["name"], w["uid"]))
    print(len(names))


def request_counts(path):
    """apiserver_request_total's writes in one scrape: {"VERB resource[/subresource]": count}."""
    counts = {}
    with open(path) as f:
        for line in f:
            m = re.match(r'apiserver_request_total\{(.*)\} ([0-9.e+]+)$', line.strip())
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if labels.get("verb") not in WRITE_VERBS:
                continue
            name = labels.get("resource", "")
            if labels.get("subresource"):
                name += "/" + labels["subresource"]
            key = f"{labels['verb']} {name}"
            counts[key] = counts.get(key, 0) + float(m.group(2))
    return counts


def requests(before, after):
    """The writes between two scrapes, most first."""
    b, a = request_counts(before), request_counts(after)
    diff = {k: int(v - b.get(k, 0)) for k, v in a.items() if v - b.get(k, 0) > 0}
    json.dump(dict(sorted(diff.items(), key=lambda kv: -kv[1])), sys.stdout, indent=1)


def load(directory, rnd, side):
    base = f"{directory}/round{rnd}-{side}"
    with open(f"{base}/summary.yaml") as f:
        summary = yaml.safe_load(f)
    with open(f"{base}/stack.json") as f:
        figures = json.load(f)
    try:
        with open(f"{base}/requests.json") as f:
            figures["writes"] = json.load(f)
    except FileNotFoundError:
        figures["writes"] = {}
    return summary, figures


def expected(generator):
    """The workloads a generator file makes."""
    with open(generator) as f:
        config = yaml.safe_load(f)
    total = 0
    for cohort in config.get("cohorts", []):
        for qset in cohort.get("queuesSets", []):
            per_queue = sum(w["count"] * len(w.get("workloads", []))
                            for w in qset.get("workloadsSets", []))
            total += cohort.get("count", 1) * qset.get("count", 1) * per_queue
    print(total)


def recorded(summary_path):
    """The workloads a runner's summary recorded (0 without a summary)."""
    try:
        with open(summary_path) as f:
            summary = yaml.safe_load(f) or {}
    except FileNotFoundError:
        summary = {}
    print(sum(c.get("count", 0) for c in summary.get("workloadClasses", {}).values()))


def usage_pct(cq):
    """The runner's average usage of a ClusterQueue class, in % of its nominal quota."""
    quota = cq.get("nominalQuota") or 0
    return 100.0 * cq.get("cpuAverageUsage", 0) / quota if quota else 0.0


def report(directory, rounds, sides):
    failed = False
    rows = []
    for rnd in range(1, rounds + 1):
        per_side = {side: load(directory, rnd, side) for side in sides}
        classes = sorted(per_side[sides[0]][0].get("workloadClasses", {}))
        for side in sides:
            summary, figures = per_side[side]
            wl = summary.get("workloadClasses", {})
            admitted = sum(c.get("count", 0) for c in wl.values())
            prefix = f"round{rnd}.{side}"
            for name in classes:
                c = wl.get(name, {})
                print(f"{prefix}.{name}.count: {c.get('count', 0)}")
                print(f"{prefix}.{name}.avg_time_to_admission_ms: "
                      f"{c.get('averageTimeToAdmissionMs', 0)}")
                print(f"{prefix}.{name}.avg_time_to_finish_ms: {c.get('averageTimeToFinishMs', 0)}")
                print(f"{prefix}.{name}.evictions: {c.get('totalEvictions', 0)}")
            for name, cq in sorted(summary.get("clusterQueueClasses", {}).items()):
                print(f"{prefix}.cq_{name}.avg_usage_pct: {usage_pct(cq):.1f}")
            cpu_per = figures["cpu_s"] / admitted * 1000 if admitted else 0.0
            print(f"{prefix}.wall_s: {figures['wall_s']}")
            print(f"{prefix}.stack_cpu_s: {figures['cpu_s']}")
            print(f"{prefix}.stack_cpu_ms_per_workload: {cpu_per:.2f}")
            if figures.get("admitd_cpu_s") is not None:
                print(f"{prefix}.admitd_cpu_s: {figures['admitd_cpu_s']} (of the stack's)")
            print(f"{prefix}.stack_peak_rss_mib: {figures['rss_mib']}")
            print(f"{prefix}.apiserver_cpu_s: {figures['apiserver_cpu_s']}")
            writes = figures["writes"]
            total_writes = sum(writes.values())
            print(f"{prefix}.apiserver_writes: {total_writes} (the runner's and the stack's)")
            print(f"{prefix}.apiserver_writes_per_workload: "
                  f"{total_writes / admitted if admitted else 0:.2f}")
            for key, n in list(writes.items())[:8]:
                print(f"{prefix}.apiserver_writes.{key.replace(' ', '.')}: {n}")
            print(f"{prefix}.dropped_workload_events: {summary.get('droppedWorkloadEvents', 0)}")
            print(f"{prefix}.early_stops: "
                  f"{len(glob.glob(f'{directory}/round{rnd}-{side}.early*'))}")
            rows.append((rnd, side, summary, figures, admitted))
        if len(sides) == len(SIDES):
            failed |= goals(directory, rnd, per_side, classes)
        elif "ledger" in sides:
            failed |= ledger_unfinished(directory, rnd, per_side["ledger"][0])
    table(rows)
    return 1 if failed else 0


def goals(directory, rnd, per_side, classes):
    """Prints the issue's goals for one round; True when a side left work unfinished."""
    (ks, kf), (ls, lf) = per_side["kueue"], per_side["ledger"]
    kwl, lwl = ks.get("workloadClasses", {}), ls.get("workloadClasses", {})
    unfinished = ledger_unfinished(directory, rnd, ks)
    for name in classes:
        want = kwl.get(name, {}).get("count", 0)
        got = lwl.get(name, {}).get("count", 0)
        if got != want:
            print(f"round{rnd}: class {name}: the ledger's run recorded {got} workloads, "
                  f"Kueue's {want}", file=sys.stderr)
            unfinished = True
    # A round a side left unfinished meets no goal of the runner's figures.
    faster = not unfinished and all(lwl.get(n, {}).get("averageTimeToAdmissionMs", 0) <=
                 kwl.get(n, {}).get("averageTimeToAdmissionMs", 0) for n in classes)
    kcq, lcq = ks.get("clusterQueueClasses", {}), ls.get("clusterQueueClasses", {})
    fuller = not unfinished and all(usage_pct(lcq.get(n, {})) >= usage_pct(c)
                                    for n, c in kcq.items())
    kn = sum(c.get("count", 0) for c in kwl.values()) or 1
    ln = sum(c.get("count", 0) for c in lwl.values()) or 1
    cpu_ratio = (lf["cpu_s"] / ln) / (kf["cpu_s"] / kn) if kf["cpu_s"] else 0.0
    print(f"round{rnd}.goal.time_to_admission_le_kueue: {'yes' if faster else 'no'}")
    print(f"round{rnd}.goal.usage_ge_kueue: {'yes' if fuller else 'no'}")
    print(f"round{rnd}.goal.stack_cpu_per_workload_ratio (goal <= 0.5): {cpu_ratio:.2f}")
    print(f"round{rnd}.goal.peak_rss_ratio (goal <= 1.0): "
          f"{lf['rss_mib'] / kf['rss_mib'] if kf['rss_mib'] else 0:.2f}")
    return unfinished


def ledger_unfinished(directory, rnd, summary):
    """True (and says so) when the ledger finished fewer workloads than the summary counts."""
    with open(f"{directory}/round{rnd}-ledger/finished") as f:
        ledger_finished = int(f.read())
    total = sum(c.get("count", 0) for c in summary.get("workloadClasses", {}).values())
    if ledger_finished < total:
        print(f"round{rnd}: the ledger finished {ledger_finished} workloads of {total}: the runner "
              f"stopped early (its queues' counts said nothing was left)", file=sys.stderr)
        return True
    return False


def table(rows):
    print("", file=sys.stderr)
    header = f"{'round':<6}{'side':<8}{'class':<10}{'count':>7}{'admit s':>10}{'finish s':>10}" \
             f"{'evict':>7}"
    print(header, file=sys.stderr)
    for rnd, side, summary, figures, admitted in rows:
        for name, c in sorted(summary.get("workloadClasses", {}).items()):
            print(f"{rnd:<6}{side:<8}{name:<10}{c.get('count', 0):>7}"
                  f"{c.get('averageTimeToAdmissionMs', 0) / 1000:>10.1f}"
                  f"{c.get('averageTimeToFinishMs', 0) / 1000:>10.1f}"
                  f"{c.get('totalEvictions', 0):>7}", file=sys.stderr)
        usage = ", ".join(f"{n} {usage_pct(c):.1f} %"
                          for n, c in sorted(summary.get("clusterQueueClasses", {}).items()))
        print(f"{rnd:<6}{side:<8}wall {figures['wall_s']} s, usage {usage}, stack CPU "
              f"{figures['cpu_s']} s ({figures['cpu_s'] / max(admitted, 1) * 1000:.1f} ms a "
              f"workload), peak RSS {figures['rss_mib']} MiB, API server CPU "
              f"{figures['apiserver_cpu_s']} s", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("divide")
    d.add_argument("generator")
    d.add_argument("n", type=int)
    o = sub.add_parser("our-crds")
    o.add_argument("--conversion", choices=("none", "webhook"), default="none")
    sub.add_parser("finished")
    e = sub.add_parser("expected")
    e.add_argument("generator")
    c = sub.add_parser("recorded")
    c.add_argument("summary")
    q = sub.add_parser("requests")
    q.add_argument("before")
    q.add_argument("after")
    s = sub.add_parser("stats")
    s.add_argument("file")
    for flag in ("--wall", "--cpu", "--rss", "--apiserver-cpu"):
        s.add_argument(flag, type=float, required=True)
    s.add_argument("--cpu-admitd", type=float, help="admitd's part of --cpu (the ledger's side)")
    r = sub.add_parser("report")
    r.add_argument("directory")
    r.add_argument("rounds", type=int)
    r.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES),
                   help="the sides that ran (goals only with both)")
    args = parser.parse_args()
    if args.command == "divide":
        divide(args.generator, args.n)
    elif args.command == "our-crds":
        our_crds(args.conversion)
    elif args.command == "finished":
        finished()
    elif args.command == "expected":
        expected(args.generator)
    elif args.command == "recorded":
        recorded(args.summary)
    elif args.command == "requests":
        requests(args.before, args.after)
    elif args.command == "stats":
        stats(args)
    else:
        sys.exit(report(args.directory, args.rounds, args.sides))


if __name__ == "__main__":
    main()
