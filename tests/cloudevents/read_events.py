"""Reads pgoutbox's CloudEvents records back with the CloudEvents Python SDK's Kafka binding.

Usage: read_events.py RECORDS.json

RECORDS.json is a list of records as tests/cloudevents/sdk_test.cpp consumed them from Kafka
(key, value and headers, each base64, or null) with the mode they were written in and the
attributes and data the test expects. Each record is parsed by both of the SDK's Kafka bindings:
cloudevents.core.bindings.kafka (from_binary / from_structured) and the 1.x API kept as
cloudevents.v1.kafka. Prints one line per record and exits 1 when any is not a valid event with
the expected attributes.
"""

import base64
import json
import sys

from dateutil.parser import isoparse

from cloudevents.core.bindings import kafka as core_kafka
from cloudevents.core.formats.json import JSONFormat
from cloudevents.v1 import kafka as v1_kafka


def b64(text):
    return None if text is None else base64.b64decode(text)


def check(event_attributes, data, expected, skip=()):
    problems = []
    for name, value in expected["attributes"].items():
        if name in skip:
            continue
        got = event_attributes.get(name)
        if isinstance(got, bytes):  # the 1.x API keeps the Kafka key's bytes as partitionkey
            got = got.decode("utf-8")
        if name == "time" and got is not None:
            # The current binding parses it into a datetime, the 1.x API keeps the string.
            same = (got if not isinstance(got, str) else isoparse(got)) == isoparse(value)
        else:
            same = str(got) == str(value)
        if not same:
            problems.append(f"{name}: {got!r}, expected {value!r}")
    for name in expected.get("present", []):
        if event_attributes.get(name) in (None, ""):
            problems.append(f"{name} missing")
    for name in expected.get("absent", []):
        if name in event_attributes:
            problems.append(f"{name} present: {event_attributes[name]!r}")
    if "data" in expected and data != expected["data"]:
        problems.append(f"data: {data!r}, expected {expected['data']!r}")
    if "text" in expected:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        if text != expected["text"]:
            problems.append(f"data: {data!r}, expected the text {expected['text']!r}")
    if "data_base64" in expected and data != base64.b64decode(expected["data_base64"]):
        problems.append(f"data: {data!r}, expected the bytes of {expected['data_base64']}")
    return problems


def main():
    records = json.load(open(sys.argv[1]))
    failed = 0
    for record in records:
        headers = {name: b64(value) for name, value in record["headers"]}
        key, value = b64(record["key"]), b64(record["value"])
        structured = record["mode"] == "structured"
        problems = []
        # The current binding.
        message = core_kafka.KafkaMessage(headers=headers, key=key, value=value)
        try:
            parse = core_kafka.from_structured if structured else core_kafka.from_binary
            event = parse(message, JSONFormat())
            problems += [f"core: {p}" for p in check(event.get_attributes(), event.get_data(), record["expected"])]
        except Exception as error:  # noqa: BLE001 - every failure is the record's
            problems.append(f"core: {type(error).__name__}: {error}")
        # The 1.x API (cloudevents.kafka before 2.0).
        v1_message = v1_kafka.KafkaMessage(headers=headers, key=key, value=value)
        try:
            if structured:
                event = v1_kafka.from_structured(v1_message)
            else:
                raw = record["expected"].get("bytes") or "text" in record["expected"]
                unmarshal = (lambda b: b) if raw else None
                event = v1_kafka.from_binary(v1_message, data_unmarshaller=unmarshal)
            attributes = dict(event.get_attributes())
            data = event.get_data()
            if isinstance(data, (bytes, bytearray)) and "data" in record["expected"]:
                data = json.loads(data)
            # The 1.x API's from_structured copies every Kafka header into the attributes, so the
            # content-type header (application/cloudevents+json, as the binding requires in
            # structured mode) overwrites the envelope's datacontenttype: its quirk, not the
            # record's, and the current binding checks datacontenttype.
            skip = ("datacontenttype",) if structured else ()
            problems += [f"v1: {p}" for p in check(attributes, data, record["expected"], skip)]
        except Exception as error:  # noqa: BLE001
            problems.append(f"v1: {type(error).__name__}: {error}")
        name = record["expected"]["attributes"].get("id")
        if problems:
            failed += 1
            print(f"FAIL {record['mode']} {name}: " + "; ".join(problems))
        else:
            print(f"ok   {record['mode']} {name}")
    print(f"{len(records) - failed} of {len(records)} records read back as the expected CloudEvents")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
