"""Dead-letter topics, retry policy and the replay command (see the failures issue)."""
