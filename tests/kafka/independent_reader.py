#!/usr/bin/env python3
"""An independent reader of a Kafka ledger topic: confluent-kafka, and docs/kafka.md's record
format alone (no code of this project). Reads the topic with read_committed and recomputes the
hash chain:

  adm-format = "1";  adm-seq = previous + 1 (decimal);
  adm-hash = hex(SHA-256(previous chain value || value)), the chain value before sequence 1
  being 32 zero bytes; and the value (the stored event) carries the previous chain value as
  its prevHash, so those 32 bytes occur in it.

Prints `records: N` and `head_hash: HEX` and exits 0 when the chain holds; on the first record
that breaks it, names its offset and exits 1.

Usage: independent_reader.py BOOTSTRAP TOPIC
"""
import hashlib
import sys
import uuid

from confluent_kafka import Consumer, KafkaError, TopicPartition

POLL_TIMEOUT_S = 1.0
IDLE_POLLS_MAX = 60  # a minute without a record or the end of the partition: give up


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "independent-reader-" + uuid.uuid4().hex,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    chain = bytes(32)
    sequence = 0
    last_offset = -1
    idle = 0
    try:
        while True:
            msg = consumer.poll(POLL_TIMEOUT_S)
            if msg is None:
                idle += 1
                if idle > IDLE_POLLS_MAX:
                    sys.exit(f"no record and no end of partition for {IDLE_POLLS_MAX} s")
                continue
            idle = 0
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                sys.exit(f"consumer error: {msg.error()}")
            offset = msg.offset()
            headers = {k: v for k, v in (msg.headers() or [])}
            value = msg.value() or b""
            where = f"record at offset {offset}"
            if headers.get("adm-format") != b"1":
                sys.exit(f"{where}: adm-format is {headers.get('adm-format')!r}, not b'1'")
            if headers.get("adm-seq") != str(sequence + 1).encode():
                sys.exit(f"{where}: adm-seq {headers.get('adm-seq')!r}, expected {sequence + 1}")
            if offset <= last_offset:
                sys.exit(f"{where}: offsets go backwards (last {last_offset})")
            if chain not in value:
                sys.exit(f"{where}: the value does not carry the previous chain value {chain.hex()}")
            chain = hashlib.sha256(chain + value).digest()
            if headers.get("adm-hash") != chain.hex().encode():
                sys.exit(f"{where}: adm-hash {headers.get('adm-hash')!r}, recomputed {chain.hex()}")
            sequence += 1
            last_offset = offset
    finally:
        consumer.close()
    print(f"records: {sequence}")
    print(f"head_hash: {chain.hex()}")


if __name__ == "__main__":
    main()
