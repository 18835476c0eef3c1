"""Flap counting: departures from the writable set inside engine.flapWindowSeconds; one alert per
episode when engine.flapThreshold is reached."""

from events.times import format_time
from state.outputs import ALERT_FLAPPING
from tests.state.helpers import CLUSTER, T0, Runner, lost, readonly, writable

A, B = "a:3181", "b:3181"
CONF = {"ensemblePlacementPolicy": "rackaware", "engine.flapWindowSeconds": "60", "engine.flapThreshold": "3"}


def flap(runner, *seconds):
    """Lose A at each time (seconds) and bring it back one second later."""
    for s in seconds:
        runner.run(lost(s * 1000, A), writable(s * 1000 + 1000, A))


def test_three_departures_inside_the_window_raise_one_alert():
    runner = Runner(CONF)
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    flap(runner, 10, 20)
    assert runner.alerts(ALERT_FLAPPING) == []
    flap(runner, 30)
    [alert] = runner.alerts(ALERT_FLAPPING)
    assert alert["subject"] == A
    assert alert["time"] == format_time(T0 + 30_000)
    assert alert["source"] == f"placement-engine/{CLUSTER}"
    assert alert["data"] == {"bookie": A, "departures": 3, "window_seconds": 60, "threshold": 3,
                             "location": "/r1", "severity": "warning", "cluster": CLUSTER}
    flap(runner, 40, 50)
    assert len(runner.alerts(ALERT_FLAPPING)) == 1, "one alert per episode"
    assert runner.model.flap_count(A) == 5


def test_departures_spread_wider_than_the_window_are_not_flapping():
    runner = Runner(CONF)
    runner.run(writable(0, A, "/r1"))
    flap(runner, 0, 60, 120, 180)
    assert runner.alerts(ALERT_FLAPPING) == []
    assert runner.model.flap_count(A) == 1


def test_the_window_is_half_open_a_departure_exactly_one_window_old_is_out():
    runner = Runner(CONF)
    runner.run(writable(0, A, "/r1"))
    flap(runner, 0, 30, 60)
    assert runner.alerts(ALERT_FLAPPING) == [], "the departure at 0 left the window (0, 60] at 60"
    flap(runner, 61)
    assert len(runner.alerts(ALERT_FLAPPING)) == 1


def test_a_calm_period_ends_the_episode_and_a_new_one_alerts_again():
    runner = Runner(CONF)
    runner.run(writable(0, A, "/r1"))
    flap(runner, 0, 5, 10)
    assert len(runner.alerts(ALERT_FLAPPING)) == 1
    flap(runner, 500, 505, 510)
    alerts = runner.alerts(ALERT_FLAPPING)
    assert len(alerts) == 2
    assert alerts[0]["id"] != alerts[1]["id"]


def test_flap_history_is_dropped_once_the_window_has_passed():
    runner = Runner(CONF)
    runner.run(writable(0, A, "/r1"))
    flap(runner, 0, 5)
    assert A in runner.model.flaps
    runner.run(writable(200_000, B, "/r2"))
    assert A not in runner.model.flaps, "state stays bounded"


def test_read_only_counts_as_a_departure_but_read_only_to_lost_does_not():
    runner = Runner(CONF)
    runner.run(writable(0, A, "/r1"), readonly(1_000, A), lost(2_000, A))
    assert runner.model.flap_count(A) == 1


def test_the_alert_is_emitted_once_whatever_the_batches():
    one = Runner(CONF)
    one.run(writable(0, A, "/r1"), lost(1_000, A), writable(2_000, A), lost(3_000, A), writable(4_000, A),
            lost(5_000, A))
    two = Runner(CONF)
    for item in [writable(0, A, "/r1"), lost(1_000, A), writable(2_000, A), lost(3_000, A), writable(4_000, A),
                 lost(5_000, A)]:
        two.run(item)
    assert one.alerts(ALERT_FLAPPING) == two.alerts(ALERT_FLAPPING)
    assert len(one.alerts(ALERT_FLAPPING)) == 1
