"""Build the SparkSession the engine and its tests run on (spec/spark-kafka-facts.md §1, §6).

:func:`build_session` applies settings that suit a small machine (:data:`DEFAULT_CONF`), makes sure Spark's
Python workers run this interpreter and can import the project's packages, and registers the
``placement-kafka`` data source. :func:`engine_session` is the session a command builds from its
`EngineSettings`.
"""

from __future__ import annotations

import importlib.resources
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from .kafka_source import KafkaDataSource
from .settings import EngineSettings

#: Defaults applied before the caller's ``conf`` (facts §1 "Session config used everywhere").
DEFAULT_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    # Stateful operators keep per-cluster state; RocksDB keeps it off the JVM heap and is required by
    # transformWithStateInPandas (facts §2). Changing the provider of an existing checkpoint is not allowed.
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    # A commit uploads the batch's changed rows instead of a RocksDB checkpoint (snapshots follow in the
    # background), which roughly halves a micro-batch's state commit and so its latency. Cost: the
    # commit writes O(changed groups) rows. Spark reads checkpoints written either way, so it can be
    # switched on or off for an existing query.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}

DEFAULT_LOG_LEVEL = "WARN"

LOCAL_TASK_ATTEMPTS = 4
"""Attempts per task under a ``local`` master (Spark's default for a cluster's ``spark.task.maxFailures``).

A plain ``local[N]`` master runs each task once: one failed task (a Python worker that dies, a broker
that drops a connection mid-read) fails the micro-batch and stops ``run``. :func:`with_task_retries`
turns it into ``local[N,F]``, which retries like a cluster does."""

_LOCAL_MASTER = re.compile(r"local(?:\[(?P<threads>[^,\]]+)\])?")

SHORT_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""JVM flags for a short local run (a replay): compile with C1 only. The JVM only coordinates a
replay (the records travel packed and Python does the work), so C2's optimising compiler would spend
about half of the JVM's CPU time in a small replay on compiling code that then hardly runs."""

CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
LOCAL_CHECKPOINT_FILE_MANAGER = \
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
"""How Spark writes a checkpoint on the local file system (`use_local_checkpoint_writer`).

Spark's default writes each checkpoint file (offsets, commits, state changelogs, their checksums) to a
temporary file and renames it through Hadoop's `FileContext`. On the local file system, without
Hadoop's native library (pip's pyspark ships none), that rename asks for the file's link status by
starting a `readlink` process: 11-12 processes per micro-batch, on the batch's critical path. The
older `FileSystem` API renames with one system call; the local file system's rename is atomic either way.
Cost: one rename per checkpoint file, instead of a process started per file."""

_LOG4J_CONF = Path(__file__).resolve().parent / "log4j2.properties"

SPARK_DEFAULT_LOG_PROFILES = ("org/apache/spark/log4j2-defaults.properties",
                              "org/apache/spark/log4j2-json-layout.properties")
"""The log4j2 profiles Spark falls back to when its JVM was given no log configuration (INFO to the console)."""

# The directory holding the project's top-level packages (policies/, events/, state/, streaming/).
_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)


def _prepare_python_workers() -> None:
    """Environment for Spark's Python workers, read when the JVM starts.

    Workers run ``PYSPARK_PYTHON`` (pyspark's default is whatever ``python3`` is on PATH, which may lack
    pyarrow and confluent-kafka), so it defaults to this interpreter. They must import ``streaming`` to
    unpickle the data source, so the project root is appended to ``PYTHONPATH`` when it is not installed.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _PROJECT_ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, _PROJECT_ROOT])


def use_engine_log_config() -> bool:
    """Switch a running driver JVM that logs with Spark's default profile to the engine's ``log4j2.properties``.

    ``spark-submit`` starts the driver's JVM before this code runs, so the ``-Dlog4j2.configurationFile`` that
    :func:`build_session` sets never reaches it: without a log configuration of the operator's (in
    ``SPARK_CONF_DIR`` or ``--driver-java-options``), the JVM logs INFO, some forty lines as the SparkContext
    starts. Called before the SparkContext starts, this loads the shipped file into the JVM's log4j2 (read
    as a package resource, so a ``--py-files`` zip works too). Spark's logging is initialized first, silently:
    left for later, it would load its default profile again as the SparkContext starts. A JVM with any
    other configuration, the operator's or the engine's, is left as it is.

    Returns:
        Whether the configuration was replaced (False as well when no JVM runs yet, or the JVM refused).
    """
    if SparkContext._gateway is None:
        return False
    jvm = SparkContext._jvm
    try:
        context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
        location = context.getConfigLocation()
        if location is None or not str(location.toString()).endswith(SPARK_DEFAULT_LOG_PROFILES):
            return False
        jvm.org.apache.spark.SparkConf(False).initializeLogIfNecessary(False, True)
        text = importlib.resources.files(__package__).joinpath("log4j2.properties").read_bytes()
        log4j = jvm.org.apache.logging.log4j.core.config
        source = log4j.ConfigurationSource(jvm.java.io.ByteArrayInputStream(bytearray(text)))
        context.reconfigure(log4j.properties.PropertiesConfigurationFactory().getConfiguration(context, source))
    except Exception:      # noqa: BLE001 - py4j's errors: another Spark or log4j2 than this was written for
        return False       # (a missing class or method); its own logging stays
    return True


def with_task_retries(master: str) -> str:
    """``master`` with :data:`LOCAL_TASK_ATTEMPTS` attempts per task when it is ``local`` or ``local[N]``
    (``local[*]`` too); a master that states its attempts (``local[N,F]``) or is not local is returned as is.

    >>> with_task_retries("local[2]"), with_task_retries("local[2,1]"), with_task_retries("yarn")
    ('local[2,4]', 'local[2,1]', 'yarn')
    """
    match = _LOCAL_MASTER.fullmatch(master.strip())
    if match is None:
        return master
    return f"local[{match.group('threads') or 1},{LOCAL_TASK_ATTEMPTS}]"


def submitted_master() -> str | None:
    """The master ``spark-submit`` (or a running SparkContext) has set, or None for a plain Python start.

    Under ``spark-submit`` the JVM is already running (``PYSPARK_GATEWAY_PORT`` is set) and holds
    ``spark.master`` as a system property; reading it starts no JVM. Without a JVM there is nothing to
    read: starting one here would start it without this module's settings (driver memory, JVM options).
    """
    if SparkContext._gateway is None:
        if "PYSPARK_GATEWAY_PORT" not in os.environ:
            return None
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM; without it SparkConf reads nothing
    conf = SparkConf()
    return conf.get("spark.master") if conf.contains("spark.master") else None


def build_session(master: str = "local[2]", app_name: str = "placement-engine",
                  conf: Mapping[str, str] | None = None, log_level: str = DEFAULT_LOG_LEVEL,
                  java_options: str = "") -> SparkSession:
    """Return the active SparkSession, creating it if needed, with ``placement-kafka`` registered.

    Idempotent: a second call returns the running session (``getOrCreate``); settings that only take effect
    at start-up (master, driver memory) are then not changed.

    Args:
        master: Spark master URL, used only when ``spark-submit`` has not set one (:func:`submitted_master`,
            which wins). A ``local`` master gets task retries (:func:`with_task_retries`). For ``local``
            masters ``SPARK_LOCAL_IP`` defaults to 127.0.0.1, so Spark binds to loopback only.
        app_name: the application name shown by Spark.
        conf: Spark settings applied over :data:`DEFAULT_CONF`.
        log_level: Spark's log level (``WARN`` or ``ERROR`` keep test output quiet).
        java_options: JVM flags added to the driver's (read only when this call starts the JVM;
            see :data:`SHORT_RUN_JAVA_OPTIONS`).

    Returns:
        The SparkSession.
    """
    submitted = submitted_master()
    if submitted is None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    use_engine_log_config()
    _prepare_python_workers()
    builder = SparkSession.builder.appName(app_name)
    if submitted is None:
        builder = builder.master(with_task_retries(master))
    settings = {**DEFAULT_CONF, **(conf or {})}
    if "spark.driver.extraJavaOptions" not in settings:
        # The shipped log configuration, read by a JVM this call starts (spark-submit's: `use_engine_log_config`).
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{_LOG4J_CONF}"
    if java_options:
        settings["spark.driver.extraJavaOptions"] = f"{settings['spark.driver.extraJavaOptions']} {java_options}"
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    spark.dataSource.register(KafkaDataSource)
    return spark


def engine_session(settings: EngineSettings, app_name: str, java_options: str = "") -> SparkSession:
    """:func:`build_session` as a command configures it: the master (unless `spark-submit` set one) and
    shuffle partitions from `settings`; `java_options` apply to a local master only (a cluster's driver is
    configured by its operator)."""
    return build_session(master=settings.spark_master, app_name=app_name,
                         conf={"spark.sql.shuffle.partitions": str(settings.shuffle_partitions)},
                         java_options=java_options if settings.spark_master.startswith("local") else "")


def use_local_checkpoint_writer(spark: SparkSession, checkpoint_location: str) -> bool:
    """Write a checkpoint on the local file system through the `FileSystem` API (see
    :data:`LOCAL_CHECKPOINT_FILE_MANAGER`); call before the query starts.

    This takes the processes that Spark's default starts per renamed file off each micro-batch's offsets
    and commit log writes. A checkpoint elsewhere (HDFS, S3, ...), or a session where
    `spark.sql.streaming.checkpointFileManagerClass` is already set, is left to Spark.

    Returns:
        Whether the setting was applied.
    """
    scheme = urlparse(checkpoint_location).scheme
    if scheme not in ("", "file") or spark.conf.get(CHECKPOINT_FILE_MANAGER, None):
        return False
    spark.conf.set(CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER)
    return True
