"""Configuration files: Java-style properties (`key=value`, `#`/`!` comments) plus `--set` overrides.

The engine reads one flat mapping: BookKeeper/Pulsar keys (CONTRACT §1) and the engine's own
`engine.*` keys (see `streaming.settings`). Values stay strings here; each settings module parses them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class ConfigError(ValueError):
    """A configuration problem found at start-up; the message names the key or file and what to do."""


def parse_properties(text: str, origin: str = "<text>") -> dict[str, str]:
    """Parse properties text: `key=value` or `key: value`, blank lines and `#`/`!` comments skipped,
    a trailing backslash continues a line. Later keys override earlier ones."""
    result: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not cut:
            raise ConfigError(f"{origin}:{number}: expected 'key=value', got {raw.strip()!r}")
        i = min(cut)
        result[line[:i].strip()] = line[i + 1:].strip()
    return result


def load_conf(path: str | Path | None, overrides: Iterable[str] = ()) -> dict[str, str]:
    """Read a properties file (if given) and apply `KEY=VALUE` overrides in order."""
    conf: dict[str, str] = {}
    if path is not None:
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--conf {file}: cannot read the configuration file ({exc.strerror}); "
                              "check the path") from exc
        conf.update(parse_properties(text, str(file)))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf
