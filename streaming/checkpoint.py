"""The start-up check of `run`'s checkpoint: are its offset and commit logs consistent?

Spark keeps a streaming query's progress in its checkpoint location (`engine.checkpointLocation`):

    metadata        the query's id (JSON), written once
    offsets/N       what micro-batch N reads (one file per batch, written before it runs)
    commits/N       micro-batch N finished (written after its outputs and state are stored)
    sources/, state/  the sources' initial offsets and every cluster's state, versioned by batch

Spark writes `offsets/N` only after `commits/N-1`, so the latest commit is the latest offsets' batch or
the one before it (a batch that was planned but not finished, which the restart runs again). A damaged
log breaks that: a deleted `offsets/N` with `commits/N` present makes Spark plan batch N again and fail
with "Multiple streaming jobs detected", which names no file and suggests another job. Old files of
both logs are purged by Spark (only the latest ones are kept), so only the latest batch of each is read.

`check_checkpoint(location)` raises `CheckpointError` (exit code 2, one line) that says what is wrong and
what the options are. Only a local location (a path or `file:` URI) is checked; others are left to Spark.

Cost: one directory listing of `offsets/` and `commits/` and a read of each one's first line.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .config import ConfigError

log = logging.getLogger(__name__)

KEY = "engine.checkpointLocation"
LOG_VERSION_PREFIX = "v"
"""Every offsets and commits file starts with its log version (`v1`)."""


class CheckpointError(ConfigError):
    """The checkpoint location is damaged; the message says what is wrong and what the options are."""


def batch_ids(folder: Path) -> list[int]:
    """The batch numbers of a Spark log folder (files named by a number; `.N.crc` and temp files skipped)."""
    if not folder.is_dir():
        return []
    return sorted(int(name) for name in os.listdir(folder) if name.isdigit())


def local_path(location: str) -> Path | None:
    """`location` as a local path, or None when it names another file system (hdfs:, s3a:, ...)."""
    if location.startswith("file://"):
        return Path(location[len("file://"):])
    if location.startswith("file:"):
        return Path(location[len("file:"):])
    scheme, sep, _ = location.partition("://")
    if sep and scheme.isalnum():
        return None
    return Path(location)


def _files(folder: str, first: int, last: int) -> str:
    return f"{folder}/{first}" if first == last else f"{folder}/{first} to {folder}/{last}"


def _options(location: str, restore: str) -> str:
    return (f"restore {restore} from a backup of {location}, or set {KEY} to a new, empty location (the job then "
            "starts without any cluster's state and reads the topics from engine.kafka.startingOffsets)")


def problem(location: str) -> str | None:
    """What is wrong with the checkpoint at `location`, with the options, or None when nothing is (a
    location that does not exist yet, or that is not local, is fine)."""
    root = local_path(location)
    if root is None or not root.exists():
        return None
    offsets, commits = batch_ids(root / "offsets"), batch_ids(root / "commits")
    where = f"{KEY} {location}"
    if not offsets and not commits:
        return None
    if not offsets:
        return (f"{where} is damaged: commits/ ends at batch {commits[-1]} but offsets/ is empty; "
                + _options(location, f"offsets/{commits[-1]}"))
    latest = offsets[-1]
    committed = commits[-1] if commits else None
    if committed is not None and committed > latest:
        missing = _files("offsets", latest + 1, committed)
        return (f"{where} is damaged: commits/ ends at batch {committed} but offsets/ at batch {latest} "
                f"({missing} missing); " + _options(location, missing))
    if committed is not None and committed not in offsets:
        missing = f"offsets/{committed}"
        return (f"{where} is damaged: batch {committed} is committed but {missing} is missing (a restart reads "
                "it to know where the next batch starts); " + _options(location, missing))
    first_missing = 0 if committed is None else committed + 1
    if first_missing < latest:
        last = "no batch" if committed is None else f"batch {committed}"
        missing = _files("commits", first_missing, latest - 1)
        return (f"{where} is damaged: offsets/ ends at batch {latest} but commits/ at {last} ({missing} missing); "
                + _options(location, missing))
    for folder, batch in (("offsets", latest), ("commits", committed)):
        if batch is None:
            continue
        path = root / folder / str(batch)
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                first = handle.readline()
        except OSError as exc:
            return (f"{where} is damaged: {folder}/{batch} cannot be read ({exc}); "
                    + _options(location, f"{folder}/{batch}"))
        if not first.startswith(LOG_VERSION_PREFIX):
            return (f"{where} is damaged: {folder}/{batch} is empty or not a Spark log file; "
                    + _options(location, f"{folder}/{batch}"))
    return None


def check_checkpoint(location: str) -> None:
    """Stop `run` before Spark starts when its checkpoint is damaged.

    Raises:
        CheckpointError: one line: what is wrong, and the options (restore the named files, or a new location).
    """
    found = problem(location)
    if found is not None:
        raise CheckpointError(found)
    if local_path(location) is None:
        log.info("checkpoint %s is not local; its logs are left to Spark to check", location)
