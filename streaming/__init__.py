"""The Spark adapter around the pure engine: configuration, the streaming query, Kafka I/O, replay.

Modules, from the command line down (imports flow one way, with no circle):

* `cli` (`placement-engine run | replay | demo | alerts`), `demo`, `alert_consumer`: the commands;
* `config` (properties files, `--set`) and `settings` (the parsed, frozen `EngineSettings`);
* `session` (the SparkSession), `job` (the query: sources -> groups -> state function -> sinks),
  `replay` (the job over recorded files) with `packed` (its rows and routing), `shutdown` (stopping `run`);
* `stateful` (the state function around `state.step`), `worker_gc` (a Python worker's collector);
* `kafka_source`, `kafka_sink` (the ``placement-kafka`` data source) with `kafka_options`;
* `schemas`: every Spark schema and type name the others use.
"""
