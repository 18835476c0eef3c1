"""`placement-engine produce`: recorded JSON lines to the two input topics, routed by type, keyed by cluster,
in file order; lines it cannot read go to the events topic for the engine to dead-letter (tansu, no Spark)."""

from __future__ import annotations

import json

from streaming.produce import main
from streaming.topics import main as topics_main
from tests.kafka_broker import consume_all, unique_topic_name

KEYS = ("eventsTopic", "requestsTopic", "decisionsTopic", "alertsTopic", "deadLettersTopic", "statusTopic")


def _record(kind: str, cluster: str, n: int, **fields) -> str:
    return json.dumps({"type": kind, "cluster": cluster, "time": 1_790_000_000_000 + n, **fields})


def test_records_are_routed_by_type_keyed_by_cluster_in_file_order(kafka_bootstrap, tmp_path, capsys):
    names = {key: unique_topic_name(key.removesuffix("Topic")) for key in KEYS}
    conf = tmp_path / "kafka.properties"
    conf.write_text(f"engine.kafka.bootstrapServers={kafka_bootstrap}\n"
                    + "".join(f"engine.kafka.{key}={name}\n" for key, name in names.items()), encoding="utf-8")
    assert topics_main(["--conf", str(conf), "--create", "--partitions", "2"]) == 0
    first, second = tmp_path / "input" / "a.jsonl", tmp_path / "input" / "b.jsonl"
    first.parent.mkdir()
    lines_a = [_record("bookie_writable", f"c{n % 3}", n, bookie=f"bk{n}:3181", location="/r1") for n in range(30)]
    lines_b = [_record("ledger_create", f"c{n % 3}", 100 + n, request_id=f"r{n}", ledger_id=n, ensemble_size=3,
                       write_quorum=2, ack_quorum=2) for n in range(20)]
    bad = ["this line is not an event", "[1, 2]", _record("bookie_lost", "c1", 7).replace('"type"', '"typo"')]
    first.write_text("\n".join(lines_a[:15] + bad[:1] + ["", "   "] + lines_a[15:]) + "\n", encoding="utf-8")
    second.write_bytes(("\n".join(lines_b[:10] + bad[1:]) + "\n").encode() + b"\xff\xfe not utf-8\n"
                       + ("\n".join(lines_b[10:]) + "\n").encode())
    capsys.readouterr()

    assert main(["--conf", str(conf), "--events", str(tmp_path / "input")]) == 0

    out = capsys.readouterr().out
    assert f"sent 34 record(s) to {names['eventsTopic']} (events) and 20 to {names['requestsTopic']}" in out
    assert "4 line(s) without a readable type" in out and names["deadLettersTopic"] in out
    events = consume_all(kafka_bootstrap, names["eventsTopic"])
    requests = consume_all(kafka_bootstrap, names["requestsTopic"])
    assert sorted(r.value.decode() for r in requests) == sorted(lines_b)
    for record in requests + [r for r in events if r.value in {line.encode() for line in lines_a}]:
        assert record.key == json.loads(record.value)["cluster"].encode()
    unkeyed = sorted(r.value for r in events if r.key is None)
    assert unkeyed == sorted([bad[0].encode(), bad[1].encode(), b"\xff\xfe not utf-8"])
    for topic_records, lines in ((events, lines_a), (requests, lines_b)):
        for cluster in ("c0", "c1", "c2"):   # one partition per cluster, in file order
            mine = [r for r in topic_records if r.key == cluster.encode()
                    and json.loads(r.value).get("type") is not None]
            assert len({r.partition for r in mine}) == 1
            assert [r.value.decode() for r in sorted(mine, key=lambda r: r.offset)] == \
                [line for line in lines if json.loads(line)["cluster"] == cluster]


def test_a_missing_topic_is_one_line_and_exit_2(kafka_bootstrap, tmp_path, capsys):
    conf = tmp_path / "kafka.properties"
    conf.write_text(f"engine.kafka.bootstrapServers={kafka_bootstrap}\n"
                    f"engine.kafka.eventsTopic={unique_topic_name('none')}\n", encoding="utf-8")
    events = tmp_path / "events.jsonl"
    events.write_text(_record("bookie_lost", "c1", 1, bookie="bk1:3181") + "\n", encoding="utf-8")
    assert main(["--conf", str(conf), "--events", str(events)]) == 2
    err = capsys.readouterr().err
    assert "topics --conf FILE --create" in err and "Traceback" not in err
