#!/usr/bin/env python3
"""Checks the billing consumer's output topic against `admitctl billing report --closed-only
--bucket hour -o json` of the same ledger: read with read_committed, every usage record id
appears once, and the records' resource-seconds summed per resource, kind and bucket equal the
report's rows. confluent-kafka and the documented record format only (docs/billing.md).

Usage: billing_output_check.py BOOTSTRAP OUTPUT_TOPIC REPORT_JSON_FILE
"""
import json
import sys
import uuid
from collections import defaultdict
from decimal import Decimal

from confluent_kafka import Consumer, KafkaError, TopicPartition


def main():
    bootstrap, topic, report_file = sys.argv[1:4]
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "billing-check-" + uuid.uuid4().hex,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    ids = set()
    totals = defaultdict(Decimal)
    idle_polls = 0
    while True:
        msg = consumer.poll(1.0)
        if msg is None:
            idle_polls += 1
            if idle_polls > 60:
                sys.exit("no record and no end of the output topic for 60 s")
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                break
            sys.exit(f"consumer error: {msg.error()}")
        record = json.loads(msg.value())
        if record["id"] in ids:
            sys.exit(f"usage record {record['id']} appears twice (offset {msg.offset()})")
        if msg.key().decode() != record["id"]:
            sys.exit(f"offset {msg.offset()}: key {msg.key()!r} is not the id {record['id']}")
        ids.add(record["id"])
        totals[(record["resource"], record["kind"], record["bucket"])] += Decimal(record["resourceSeconds"])
    consumer.close()
    report = json.load(open(report_file))
    expected = defaultdict(Decimal)
    for row in report["rows"]:
        for kind in ("used", "idle"):
            if Decimal(row[kind]) != 0:
                expected[(row["resource"], kind, row["bucket"])] += Decimal(row[kind])
    got = {k: v for k, v in totals.items() if v != 0}
    if got != dict(expected):
        diff = {k: (got.get(k), expected.get(k)) for k in set(got) | set(expected)
                if got.get(k) != expected.get(k)}
        sys.exit(f"output topic totals differ from billing report: {diff}")
    print(f"records: {len(ids)}, each once; totals equal billing report ({len(expected)} cells)")


if __name__ == "__main__":
    main()
