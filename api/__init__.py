"""The HTTP API: a thin producer in front of the queues, and the client SDK."""
