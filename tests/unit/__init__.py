"""Unit tests: pure functions, and fakeredis where Redis is incidental (no real Redis, no
process, no socket)."""
