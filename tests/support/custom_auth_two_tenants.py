"""A LiteLLM ``custom_auth`` for end-to-end tests: two keys mapped to two teams (tenants).

Copied next to the test proxy's config.yaml and named there as
``general_settings.custom_auth: custom_auth_two_tenants.user_api_key_auth``.
"""

from __future__ import annotations

from fastapi import Request
from litellm.proxy._types import UserAPIKeyAuth

KEYS = {"sk-tenant-a": "a", "sk-tenant-b": "b"}  # tenants team-a and team-b


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    """The team of a known key; any other key is rejected."""
    del request
    key = api_key.removeprefix("Bearer ").strip()
    if key not in KEYS:
        raise Exception("unknown key")
    return UserAPIKeyAuth(api_key=key, team_id=KEYS[key])
