"""`placement-engine demo` progress: rewritten in place on a terminal, one line per micro-batch in a log."""

import io

from streaming.demo import _progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_one_line_per_batch_in_a_log_and_rewritten_on_a_terminal():
    updates = [{"batch": 0, "decision": 10, "alert": 1}, {"batch": 1, "decision": 25, "alert": 2, "dead_letter": 1}]
    log, terminal = io.StringIO(), Terminal()
    for update in updates:
        _progress(update, log)
        _progress(update, terminal)
    assert log.getvalue().splitlines() == ["  batch   0: 10 decisions, 1 alerts, 0 dead letters",
                                           "  batch   1: 25 decisions, 2 alerts, 1 dead letters"]
    assert terminal.getvalue().count("\r") == 2 and "\n" not in terminal.getvalue()
