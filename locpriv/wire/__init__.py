"""The wire format: messages, topics and their JSON Schemas (pure, no I/O)."""
