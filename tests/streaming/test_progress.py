"""Progress of `replay` and `demo` as an operator sees it on stderr: a plain line per interval in a log, a
tqdm bar on a terminal, and never a word on stdout."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import re
import struct
import sys
import termios
import threading

import pytest

from streaming.demo import generate, write_input
from streaming.progress import BYTES, ProgressDisplay
from streaming.replay import run_replay
from streaming.settings import engine_settings


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_one_line_per_interval_with_rate_and_time_left_and_a_last_line_when_done():
    """The rate of a line counts from the first update (the start-up wait before it is no part of the rate
    the rest will go at); the last line's is the whole phase's average."""
    clock, log = ManualClock(), io.StringIO()
    display = ProgressDisplay(log, interval_s=10, terminal=False, clock=clock)
    with display.meter("replay", 500_000) as meter:
        for seconds, done in ((4, 50_000), (10, 120_000), (15, 200_000), (21, 300_000), (32, 500_000)):
            clock.now = 100 + seconds
            meter.update(done)
    assert log.getvalue().splitlines() == [
        "replay: 120000/500000 records (24%), 11667 records/s, about 33 s left",
        "replay: 300000/500000 records (60%), 14706 records/s, about 14 s left",
        "replay: 500000/500000 records (100%), done in 32 s, 15625 records/s",  # one line at the end, not two
    ]


def test_bytes_are_shown_in_megabytes_and_an_unknown_total_has_no_percentage():
    clock, log = ManualClock(), io.StringIO()
    display = ProgressDisplay(log, interval_s=0, terminal=False, clock=clock)
    with display.meter("replay (reading input)", 120_000_000, BYTES) as meter:
        clock.now += 3
        meter.update(60_000_000)
    with display.meter("scan", None) as meter:
        clock.now += 2
        meter.update(10)
    assert log.getvalue().splitlines() == [
        "replay (reading input): 60.0/120.0 MB (50%), 20.0 MB/s, about 3 s left",
        "replay (reading input): 60.0/120.0 MB (50%), done in 3 s, 20.0 MB/s",
        "scan: 10 records, 5 records/s",
        "scan: 10 records, done in 2 s, 5 records/s",
    ]


def test_work_that_fails_says_where_it_stopped_and_no_progress_writes_nothing():
    clock, log = ManualClock(), io.StringIO()
    with pytest.raises(RuntimeError), ProgressDisplay(log, interval_s=60, terminal=False, clock=clock) \
            .meter("replay", 1000) as meter:
        clock.now += 95
        meter.update(400)
        raise RuntimeError("the query failed")
    assert log.getvalue().splitlines() == ["replay: 400/1000 records (40%), 4 records/s, about 2 min 22 s left",
                                           "replay: stopped at 400/1000 records (40%) after 1 min 35 s"]
    assert ProgressDisplay(log, enabled=False).meter("replay", 1000) is None


class PseudoTerminal:
    """A real pseudo-terminal: `stream` is its slave end (a terminal to whoever writes to it); `screen()`
    closes it and returns what reached the master end."""

    def __init__(self, columns: int | None = None) -> None:
        self._master, slave = pty.openpty()
        if columns is not None:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        self.stream = os.fdopen(slave, "w", encoding="utf-8", closefd=True)
        self._received = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # the slave end is closed
                return
            if not chunk:
                return
            self._received.extend(chunk)

    def screen(self) -> str:
        self.stream.close()
        self._reader.join(timeout=30)
        os.close(self._master)
        return self._received.decode("utf-8", "replace")


def test_a_terminal_that_reports_no_width_still_gets_a_bar_and_log_lines_go_above_it(monkeypatch):
    terminal = PseudoTerminal(columns=None)
    monkeypatch.setattr(sys, "stderr", terminal.stream)
    console = logging.StreamHandler()                           # the command line's: on stderr, the terminal
    monkeypatch.setattr(logging.root, "handlers", [console])
    try:
        with ProgressDisplay().meter("replay", 2000) as meter:
            meter.update(1000)
            logging.getLogger("tests.progress").warning("a line logged while the bar is drawn")
            meter.update(2000)
        assert logging.root.handlers == [console]               # put back once the bar is done
    finally:
        screen = terminal.screen()
    assert re.search(r"replay: 100%\|█+\| 2\.00k/2\.00k \[", screen), screen
    # On a line of its own, above the bar, rather than glued to the bar's end.
    assert re.search(r"[\r\n]a line logged while the bar is drawn\r?\n", screen), screen


def _replay_input(tmp_path):
    source = tmp_path / "in" / "events.jsonl"
    write_input(generate(400, seed=5), source)
    return source, sum(1 for line in source.read_text().splitlines() if line.strip())


CONF = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2", "engine.seed": "5",
        "engine.replay.recordsPerTrigger": "150"}


def test_a_real_replay_writes_a_line_per_batch_and_a_last_line_with_the_whole_input(spark, tmp_path):
    source, records = _replay_input(tmp_path)
    log = io.StringIO()
    summary = run_replay(spark, engine_settings(CONF), [source], tmp_path / "out",
                         display=ProgressDisplay(log, interval_s=0, terminal=False))
    assert summary["records"] == records
    lines = log.getvalue().splitlines()
    megabytes = f"{source.stat().st_size / 1e6:.1f}"
    reading = [line for line in lines if line.startswith("replay (reading input): ")]
    assert re.fullmatch(rf"replay \(reading input\): {megabytes}/{megabytes} MB \(100%\), done in \d+ s, "
                        r"[\d.]+ MB/s", reading[-1])
    replaying = [line for line in lines if line.startswith("replay: ")]
    # One line per micro-batch of 150 records, counting up to the whole input, then the last line.
    counts = [int(re.match(r"replay: (\d+)/", line).group(1)) for line in replaying]
    batches = -(-records // 150)
    assert counts[:batches] == [min(150 * n, records) for n in range(1, batches + 1)]
    assert all(f"/{records} records (" in line for line in replaying)
    assert re.fullmatch(rf"replay: {records}/{records} records \(100%\), done in \d+ s, \d+ records/s", replaying[-1])


def test_a_real_replay_on_a_terminal_draws_a_tqdm_bar(spark, tmp_path):
    source, records = _replay_input(tmp_path)
    terminal = PseudoTerminal(columns=120)
    try:
        assert terminal.stream.isatty()
        run_replay(spark, engine_settings(CONF), [source], tmp_path / "out", display=ProgressDisplay(terminal.stream))
    finally:
        screen = terminal.screen()
    assert "\r" in screen                                       # redrawn in place, not a line per update
    assert re.search(rf"replay: 100%\|█+\| {records}/{records} \[", screen), screen
    assert "records/s]" in screen
    assert "replay (reading input): 100%" in screen
    assert "done in" not in screen                              # the plain lines are for logs only
