"""Progress of long work (`replay`, `demo`) on stderr: a tqdm bar on a terminal, a plain line per interval
in a log.

A `ProgressDisplay` says where progress goes and how; each phase of the work (reading the input, replaying
its records) gets a `Meter` from it, fed with the amount done so far. On a terminal the meter is a tqdm
bar (done, total, rate, time left), redrawn in place. When the stream is not a terminal (a log file, a
pipe, a CI job) it writes one line at most every `interval_s` seconds, and a last line when the phase
ends:

    replay: 120000/500000 records (24%), 41000 records/s, about 9 s left
    replay: 500000/500000 records (100%), done in 12 s, 41000 records/s

Meters are fed by the caller when it learns of progress (the replay's driver, once per micro-batch): no
thread of their own, so a line never lands in the middle of the caller's output. Progress goes to stderr
only; stdout stays for results (the replay's JSON summary).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from types import TracebackType
from typing import TextIO

INTERVAL_S = 10.0
"""Seconds between two plain progress lines when stderr is not a terminal."""

FALLBACK_COLUMNS, FALLBACK_ROWS = 80, 24
"""The size assumed of a terminal that does not say its own (tqdm draws nothing on 0 rows)."""

RECORDS = "records"
BYTES = "bytes"


def _duration(seconds: float) -> str:
    """`42 s`, `3 min 5 s`, `2 h 10 min`."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _amount(value: float, unit: str) -> str:
    """`value` in `unit` as a plain line shows it: bytes in MB, anything else as a whole number."""
    return f"{value / 1e6:.1f}" if unit == BYTES else f"{value:.0f}"


def _unit_name(unit: str) -> str:
    return "MB" if unit == BYTES else unit


class Meter:
    """The progress of one phase: `update(done)` as it goes, `finish()` at its end.

    Used as a context manager, it finishes when the block ends normally and writes where it stopped when
    the block raises.
    """

    def __init__(self, label: str, total: int | None, unit: str, stream: TextIO, terminal: bool,
                 interval_s: float, clock: Callable[[], float]) -> None:
        self._label = label
        self._total = total
        self._unit = unit
        self._stream = stream
        self._interval_s = interval_s
        self._clock = clock
        self._started = clock()
        self._last_line = self._started
        self._done = 0
        self._first: tuple[float, int] | None = None  # (time, done) of the first update
        self._closed = False
        self._bar = None
        self._logging = ExitStack()
        if terminal:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            # A terminal that reports no width (a pseudo-terminal nobody sized) would get an empty bar.
            sized = _columns(stream) > 0
            self._bar = tqdm(total=total, desc=label, file=stream, dynamic_ncols=sized,
                             ncols=None if sized else FALLBACK_COLUMNS, nrows=None if sized else FALLBACK_ROWS,
                             mininterval=0.5,
                             unit="B" if unit == BYTES else f" {unit}", unit_scale=True, leave=True)
            if any(_is_console(handler) for handler in logging.root.handlers):
                # Log lines are written above the bar while it is drawn, not into it.
                self._logging.enter_context(logging_redirect_tqdm())

    @property
    def done(self) -> int:
        return self._done

    def update(self, done: int) -> None:
        """`done` of the total are done now (a running count, not an increment)."""
        if self._closed:
            return
        advance, self._done = done - self._done, done
        if self._bar is not None:
            self._bar.update(advance)
            return
        now = self._clock()
        if self._first is None:
            self._first = (now, done)
        if now - self._last_line >= self._interval_s and done != self._total:  # the last line says done
            self._last_line = now
            self._write(self._line(now))

    def finish(self) -> None:
        """The phase is over: the bar completes, or the last plain line says it is done."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            if self._total is not None and self._bar.n < self._total:
                self._bar.update(self._total - self._bar.n)
            self._bar.close()
            self._logging.close()
            return
        now = self._clock()
        elapsed = now - self._started
        rate = f", {self._rate(elapsed)}" if elapsed > 0 else ""
        self._write(f"{self._label}: {self._fraction()}, done in {_duration(elapsed)}{rate}")

    def stop(self) -> None:
        """The phase ended early (an error, an interrupt): say where it stopped."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
            self._logging.close()
            return
        elapsed = self._clock() - self._started
        self._write(f"{self._label}: stopped at {self._fraction()} after {_duration(elapsed)}")

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.finish()
        else:
            self.stop()

    def _fraction(self) -> str:
        unit = _unit_name(self._unit)
        if self._total is None:
            return f"{_amount(self._done, self._unit)} {unit}"
        share = f" ({100 * self._done // self._total}%)" if self._total > 0 else ""
        return f"{_amount(self._done, self._unit)}/{_amount(self._total, self._unit)} {unit}{share}"

    def _rate(self, elapsed: float) -> str:
        """The average rate over the whole phase."""
        return f"{_amount(self._done / elapsed, self._unit)} {_unit_name(self._unit)}/s"

    def _line(self, now: float) -> str:
        """Done (of the total), the rate since the first update (the wait before it, such as Spark
        planning the first micro-batch, would understate it), and the time left at that rate."""
        parts = [self._fraction()]
        since, base = self._first if self._first is not None else (self._started, 0)
        if now - since <= 0 or self._done <= base:
            since, base = self._started, 0
        if now - since > 0 and self._done > base:
            rate = (self._done - base) / (now - since)
            parts.append(f"{_amount(rate, self._unit)} {_unit_name(self._unit)}/s")
            if self._total is not None and self._done < self._total:
                parts.append(f"about {_duration((self._total - self._done) / rate)} left")
        return f"{self._label}: {', '.join(parts)}"

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


class ProgressDisplay:
    """Where progress goes (stderr unless told) and how: a tqdm bar when the stream is a terminal, else a
    plain line every `interval_s` seconds; nothing at all when not `enabled` (`--no-progress`).

    Args:
        terminal: force the bar (True) or the plain lines (False); by default the stream's `isatty()`.
        clock: monotonic seconds (tests inject one).
    """

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True, interval_s: float = INTERVAL_S,
                 terminal: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self.enabled = enabled
        self._interval_s = interval_s
        self._terminal = terminal
        self._clock = clock

    def meter(self, label: str, total: int | None, unit: str = RECORDS) -> Meter | None:
        """A meter for one phase (`label` starts each of its lines), or None when progress is off."""
        if not self.enabled:
            return None
        stream = self._stream if self._stream is not None else sys.stderr
        terminal = self._terminal if self._terminal is not None else _is_terminal(stream)
        return Meter(label, total, unit, stream, terminal, self._interval_s, self._clock)


def _columns(stream: TextIO) -> int:
    """The terminal's width in columns; 0 when it reports none."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


def _is_console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.stderr)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-like stream without a terminal
        return False


def add_progress_argument(parser) -> None:  # noqa: ANN001 - an argparse parser
    """`--no-progress` on a command that shows progress (`replay`, `demo`)."""
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress on stderr (by default: a bar on a terminal, else a line every "
                        f"{INTERVAL_S:.0f} s)")


def progress_for(args) -> ProgressDisplay:  # noqa: ANN001 - the parsed command line
    """The display a command's `--no-progress` asks for (on when the flag is absent)."""
    return ProgressDisplay(enabled=not getattr(args, "no_progress", False))


__all__ = ["BYTES", "INTERVAL_S", "RECORDS", "Meter", "ProgressDisplay", "add_progress_argument", "progress_for"]
