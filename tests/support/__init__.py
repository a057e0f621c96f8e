"""The tests' shared helpers (no tests): paths, the tests' Redis, the hook's test calls, Redis
servers the tests start, the process harness, and files copied next to a test proxy's config."""
