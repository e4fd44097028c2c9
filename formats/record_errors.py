"""The error every annotation reader raises for malformed input (its message names the file, the
record or line, and the field); apart so that the readers of every layout can raise it."""


class RecordError(ValueError):
    """An annotation record is malformed; the message names file, key and field."""
