"""A configuration mapping that records which keys a settings parser looks up (shared by the lint tests)."""


class RecordingConf(dict):
    """An empty configuration that records every key looked up."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key, default=None):  # noqa: ANN001 - dict.get's signature
        self.read.add(key)
        return super().get(key, default)
