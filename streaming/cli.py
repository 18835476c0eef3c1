"""`placement-engine`: run (Kafka in, Kafka out), replay (files in, folders out), demo, alerts, check-conf,
compare, produce, topics, status.

Configuration problems stop the command before Spark starts, with one line naming the key
(exit code 2); they never surface as a Spark stack trace.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from .config import ConfigError, load_conf
from .settings import EngineSettings, engine_settings

log = logging.getLogger("placement-engine")


def _settings_with_warnings(args: argparse.Namespace) -> EngineSettings:
    """Parse the configuration once and log what `check-conf` would warn about (one line each)."""
    from .check_conf import startup_warnings

    conf = load_conf(args.conf, args.set)
    settings = engine_settings(conf)
    for warning in startup_warnings(conf):
        log.warning("configuration: %s", warning)
    return settings


def cmd_replay(args: argparse.Namespace) -> int:
    from .progress import progress_for
    from .replay import run_replay
    from .session import SHORT_RUN_JAVA_OPTIONS, engine_session

    settings = _settings_with_warnings(args)
    spark = engine_session(settings, "placement-engine-replay", SHORT_RUN_JAVA_OPTIONS)
    summary = run_replay(spark, settings, args.events, args.out, display=progress_for(args))
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .checkpoint import check_checkpoint
    from .job import check_topics, start_kafka_job
    from .metrics import start_metrics
    from .query_start import start_query
    from .session import engine_session
    from .shutdown import StopSignals, serve_until_stopped, stop_spark

    settings = _settings_with_warnings(args)
    settings.require_kafka()
    check_checkpoint(settings.checkpoint_location)
    check_topics(settings)
    metrics = start_metrics(settings)      # a port in use stops `run` here, before Spark starts
    try:
        spark = engine_session(settings, "placement-engine")
        metrics.watch(spark, "placement-engine")
        query = start_query(lambda: start_kafka_job(spark, settings, query_name="placement-engine"))
        log.info("placement-engine running: %s + %s -> %s, %s, %s, %s (checkpoint %s)", settings.events_topic,
                 settings.requests_topic, settings.decisions_topic, settings.alerts_topic,
                 settings.dead_letters_topic, settings.status_topic, settings.checkpoint_location)
        with StopSignals() as signals:
            serve_until_stopped(query, signals, settings.stop_grace_seconds)
        metrics.stop()                     # while the session lives: removing its listener needs it
        stop_spark(spark)
    finally:
        metrics.stop()                     # idempotent; on an error path it still closes the endpoint
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    from .progress import add_progress_argument

    parser = argparse.ArgumentParser(prog="placement-engine",
                                     description="BookKeeper ensemble placement as a Spark streaming job")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="the streaming job: Kafka in, Kafka out")
    run.add_argument("--conf", required=True, help="properties file (BookKeeper keys and engine.* keys)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one key")
    run.set_defaults(func=cmd_run)

    replay = sub.add_parser("replay", help="the same job over recorded JSON-lines files, then stop")
    replay.add_argument("--conf", required=True)
    replay.add_argument("--events", action="append", required=True, metavar="PATH",
                        help="a JSON-lines file or a folder of them (repeatable)")
    replay.add_argument("--out", required=True, metavar="DIR")
    replay.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    add_progress_argument(replay)
    replay.set_defaults(func=cmd_replay)

    demo = sub.add_parser("demo", help="generate a synthetic cluster and traffic, replay it, print a summary")
    demo.add_argument("--conf", default=None, help="properties file whose keys override the demo's "
                      "(rack-aware, 2 racks enforced, disk weights, 30 s stabilization)")
    demo.add_argument("--out", default=None, metavar="DIR", help="write the input, outputs and demo.properties "
                      "here (default: a new temporary folder, also kept)")
    demo.add_argument("--requests", type=int, default=5000,
                      help="number of requests (ledger creates, replaces and checks)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the generated scenario")
    demo.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    add_progress_argument(demo)
    demo.set_defaults(func=cmd_demo)

    from .alert_consumer import add_parser as add_alerts_parser

    add_alerts_parser(sub)
    from .check_conf import add_parser as add_check_conf_parser

    add_check_conf_parser(sub)
    from .compare import add_parser as add_compare_parser

    add_compare_parser(sub)
    from .produce import add_parser as add_produce_parser

    add_produce_parser(sub)
    from .topics import add_parser as add_topics_parser

    add_topics_parser(sub)
    from .status_command import add_parser as add_status_parser

    add_status_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.WARNING)   # kafka-python (`alerts`) logs each connection step
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"placement-engine: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # `run` handles its own signals (streaming.shutdown); this is replay, demo, alerts
        print(f"placement-engine: {args.command} interrupted; anything it was writing is incomplete",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
