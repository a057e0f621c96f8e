"""Integration tests: a real Redis (REDIS_URL, or a server, Cluster or Sentinel the test
starts), in-process: the hook, the store, the worker, the CLI and the HTTP routes."""
