"""A LiteLLM ``custom_auth`` for end-to-end tests: callers without identity beside the master key.

Copied next to the test proxy's config.yaml and named there as
``general_settings.custom_auth: custom_auth_no_identity.user_api_key_auth``. With a
``custom_auth``, LiteLLM hands every key to it (its own master-key check never runs), so the
master key is answered as LiteLLM answers it: the master-key alias, the proxy-admin role and the
admin user id. The two anonymous keys get a bare ``UserAPIKeyAuth()``: no team, user or key.
"""

from __future__ import annotations

from fastapi import Request
from litellm.constants import LITELLM_PROXY_MASTER_KEY_ALIAS
from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth

MASTER_KEY = "sk-memory-demo"
ANONYMOUS = ("sk-anon-1", "sk-anon-2")


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    """The master key as LiteLLM's own check answers it; an anonymous key as no one; any other
    key is rejected."""
    del request
    key = api_key.removeprefix("Bearer ").strip()
    if key == MASTER_KEY:
        return UserAPIKeyAuth(
            api_key=LITELLM_PROXY_MASTER_KEY_ALIAS,
            user_role=LitellmUserRoles.PROXY_ADMIN,
            user_id="default_user_id",
        )
    if key in ANONYMOUS:
        return UserAPIKeyAuth()
    raise Exception("unknown key")
