"""A rack outage seen through a replay's status records and the `status` command: the placement debt rises
while the rack is down, and is back at 0 once the rack returns and the operator has re-placed the ledgers
the alerts name."""

import json

from streaming.cli import main
from streaming.replay import run_replay
from streaming.settings import engine_settings

T0 = 1_790_000_000_000
RACKS = {"/r1": ["a1", "a2", "a3"], "/r2": ["b1", "b2", "b3"], "/r3": ["c1", "c2", "c3"]}
CONF = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "3", "engine.seed": "5",
        "engine.statusIntervalSeconds": "10"}


def _t(seconds: float) -> str:
    return str(T0 + int(seconds * 1000))


def _event(kind: str, seconds: float, bookie: str, **fields) -> dict:
    return {"type": kind, "cluster": "prod", "time": int(_t(seconds)), "bookie": f"{bookie}:3181", **fields}


def _create(seconds: float, request_id: str, ledger_id: int) -> dict:
    return {"type": "ledger_create", "cluster": "prod", "time": int(_t(seconds)), "request_id": request_id,
            "ledger_id": ledger_id, "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2}


def outage_and_recovery() -> list[dict]:
    """Nine bookies on three racks; 30 ledgers; /r3 is lost for 30 s, 10 ledgers are placed meanwhile (on
    two racks only); /r3 returns."""
    records = [_event("bookie_writable", 0, name, location=rack) for rack, names in RACKS.items() for name in names]
    records += [_create(1 + i / 10, f"before-{i}", i) for i in range(30)]
    records += [_event("bookie_lost", 20, name) for name in RACKS["/r3"]]
    records += [_create(21 + i / 10, f"during-{i}", 30 + i) for i in range(10)]
    records += [_create(40, "probe-down", 100)]
    records += [_event("bookie_writable", 50, name, location="/r3") for name in RACKS["/r3"]]
    records += [_create(60, "probe-back", 101)]
    return records


def _write(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _read(out, kind):
    return [json.loads(line) for path in sorted((out / kind).glob("*.jsonl")) for line in path.read_text().splitlines()]


def _open(alerts, alert_type):
    opened = {}
    for alert in alerts:
        if alert["type"] == alert_type:
            opened[alert["id"]] = alert
        elif alert["type"] == alert_type + ".resolved":
            opened.pop(alert["data"]["resolves"], None)
    return list(opened.values())


def _status_json(out, capsys) -> dict:
    assert main(["status", "--dir", str(out), "--json"]) == 0
    [cluster] = json.loads(capsys.readouterr().out)["clusters"]
    return cluster


def test_a_rack_outage_raises_the_debt_and_the_replay_shows_it_back_at_0_after_re_adherence(spark, tmp_path, capsys):
    records = outage_and_recovery()
    out = tmp_path / "outage"
    run_replay(spark, engine_settings(CONF), [str(_write(tmp_path / "outage.jsonl", records))], out)
    statuses = _read(out, "status")
    down = [s for s in statuses if [r["rack"] for r in s["racks"]] == ["/r1", "/r2"]]
    assert down and max(s["ledgers"]["not_adhering"] for s in down) == 30, "every ledger had a member on /r3"
    latest = _status_json(out, capsys)
    assert latest["ledgers"]["not_adhering"] == 0, "the rack is back: the 30 ledgers adhere again"
    re_adhere = _open(_read(out, "alerts"), "placement.ledger.re_adhere_possible")
    assert latest["ledgers"]["re_adhere_possible"] == len(re_adhere) >= 10, "placed on two racks meanwhile"

    # The operator moves each ledger as its alert suggests; the check registers the new ensemble.
    moves = [{"type": "ensemble_check", "cluster": "prod", "time": int(_t(70 + i)), "request_id": f"moved-{i}",
              "ledger_id": alert["data"]["ledger_id"], "ensemble": alert["data"]["fix"]["ensemble"],
              "write_quorum": 3, "ack_quorum": 2} for i, alert in enumerate(re_adhere)]
    moves.append(_create(70 + len(moves) + 20, "probe-after", 102))
    out = tmp_path / "re-adhered"
    run_replay(spark, engine_settings(CONF), [str(_write(tmp_path / "all.jsonl", records + moves))], out)
    after = _status_json(out, capsys)
    assert after["ledgers"] == {"remembered": 43, "not_adhering": 0, "re_adhere_possible": 0}
    assert main(["status", "--dir", str(out), "--cluster", "prod"]) == 0
    table = capsys.readouterr().out
    assert "0 not adhering" in table and "/r3" in table
