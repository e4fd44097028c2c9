"""Live grounded captions: clips predicted as a stream arrives, entities linked online, one JSON line per clip."""
