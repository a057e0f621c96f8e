"""The memory inspector end to end in headless Chromium (Debian's ``chromium`` driven by
Playwright, no browser download) against a real LiteLLM proxy."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support import harness
from tests.support.harness import MASTER_KEY

# -- end to end in Chromium ---------------------------------------------------------------------


def find_chromium() -> str | None:
    """The system Chromium: ``CHROMIUM_PATH``, else ``chromium`` / ``chromium-browser`` /
    ``google-chrome`` on PATH."""
    explicit = os.environ.get("CHROMIUM_PATH")
    if explicit and Path(explicit).is_file():
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def ui_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real LiteLLM proxy (the package's config.yaml, master key) with the stand-in model and
    the real Redis; yields its base URL."""
    with harness.stack(tmp_path_factory.mktemp("e2e-ui"), stem="e2u") as running:
        yield running.proxy


def _screenshot_path(tmp_path: Path) -> Path:
    folder = os.environ.get("MEMORY_UI_SCREENSHOT_DIR")
    return (Path(folder) if folder else tmp_path) / "memory-inspector.png"


def _wait_for_extracted(http: httpx.Client, base: str, user: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listing = http.get(
            f"{base}/memory/v1/memories",
            params={"user": user, "model": "demo"},
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        ).json()
        if listing["memories"]:
            return list(listing["memories"])
        time.sleep(0.3)
    pytest.fail("the flushed extraction job wrote no memories within 30 s")


def watch(page: Any, problems: list[str]) -> None:
    """Collect the page's script errors, console errors and failed loads (the wrong-key step's
    expected 401s aside)."""

    def on_console(message: Any) -> None:
        if message.type == "error" and "401" not in message.text:
            problems.append(f"console: {message.text}")

    def on_response(response: Any) -> None:
        if response.status >= 400 and "sk-wrong" not in str(response.request.headers):
            problems.append(f"{response.status} {response.url}")

    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", on_console)
    page.on("response", on_response)


def test_inspector_in_chromium(ui_proxy: str, tmp_path: Path) -> None:
    """A user's memory seen and edited through the page in headless Chromium: a wrong key is
    told apart; layers with sizes, the system message, pinned and extracted memories, the
    summary, the queue and the last turns; pin, edit, edit-as-pinned and delete; another
    conversation; every user-written string shown as text (a hostile pinned memory runs no
    script and makes no element). A screenshot is written."""
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium found: apt-get install chromium, or set CHROMIUM_PATH")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    expect = sync_api.expect

    base = ui_proxy
    user = "ui-" + uuid.uuid4().hex[:6]
    auth = {"Authorization": f"Bearer {MASTER_KEY}"}
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60)
    for text, conversation in (
        ("My cat is called Miso.", None),
        ("I live in Pune with my sister Seema.", None),
        ("We are planning a trip to Goa in May.", "trip"),
    ):
        extra = {"metadata": {"conversation_id": conversation}} if conversation else None
        client.chat.completions.create(
            model="demo",
            user=user,
            messages=[{"role": "user", "content": text}],
            extra_body=extra,
        )
    hostile = '<img src=x onerror="window.__xss=1"> Asha\'s <b>birthday</b> is 3 March & "soon"'
    with httpx.Client(timeout=30) as http:
        pinned = http.post(
            f"{base}/memory/v1/pinned",
            json={"user": user, "model": "demo", "text": hostile},
            headers=auth,
        )
        assert pinned.status_code == 201, pinned.text
        http.post(f"{base}/memory/v1/flush", json={"user": user, "model": "demo"}, headers=auth)
        extracted = _wait_for_extracted(http, base, user)

        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
            page = browser.new_page(viewport={"width": 1360, "height": 1000})
            problems: list[str] = []
            watch(page, problems)
            page.goto(f"{base}/memory/ui?user={user}&model=demo")

            # a wrong key is named as such
            page.fill("#key", "sk-wrong")
            page.click("#key-form button[type=submit]")
            expect(page.locator("#status")).to_contain_text("Key rejected (401)")

            page.fill("#key", MASTER_KEY)
            page.click("#key-form button[type=submit]")
            expect(page.locator("#status")).to_contain_text(f"Showing {user}")

            # the layers as the model receives them, with sizes
            fixed = page.locator("#layers tbody tr[data-layer=fixed_memories] td.num")
            expect(fixed).not_to_have_text("0")
            expect(page.locator("#layers tbody tr[data-layer=memories] td.num")).not_to_have_text(
                "0"
            )
            system = page.locator("#messages li.role-system pre")
            expect(system.first).to_contain_text("Asha's ‹b›birthday‹/b› is 3 March")
            expect(page.locator("#messages li").last).to_contain_text("(next message)")

            # memories exactly as stored, shown as text
            expect(page.locator("#pinned li .text")).to_have_text([hostile])
            expect(page.locator("#extracted li .text")).to_have_text([m["text"] for m in extracted])
            assert page.locator("#panels img, #panels b").count() == 0
            assert page.evaluate("window.__xss") is None

            # summary, queue, turns
            expect(page.locator("#summary-state")).to_contain_text("extracted through seq")
            expect(page.locator("#queue")).to_contain_text("position in the due queue")
            expect(page.locator("#turns tbody")).to_contain_text("My cat is called Miso.")
            expect(page.locator("#turns tbody")).to_contain_text("I live in Pune")

            # a preview for a typed message
            page.fill("#next-message", "Where does my sister live?")
            page.click("#preview-form button[type=submit]")
            expect(page.locator("#messages li").last).to_contain_text("Where does my sister")

            # pin, then edit, through the page
            page.fill("#pin-text", "Favourite food: दाल मखनी")
            page.click("#pin-form button[type=submit]")
            expect(page.locator("#pinned li .text")).to_have_text(
                [hostile, "Favourite food: दाल मखनी"]
            )
            expect(system.first).to_contain_text("दाल मखनी")
            page.locator("#pinned li", has_text="Favourite food").get_by_role(
                "button", name="Edit"
            ).click()
            page.fill("#pinned input.edit", "Favourite food: masala dosa")
            page.click("#pinned .edit-form button[type=submit]")
            expect(page.locator("#pinned li .text")).to_have_text(
                [hostile, "Favourite food: masala dosa"]
            )
            expect(system.first).to_contain_text("masala dosa")
            page.screenshot(path=str(_screenshot_path(tmp_path)), full_page=True)

            # an extracted memory corrected by the user becomes pinned
            first = page.locator("#extracted li").first
            first.get_by_role("button", name="Edit").click()
            page.fill("#extracted input.edit", "User: my cat Miso is ten years old.")
            page.click("#extracted .edit-form button[type=submit]")
            expect(page.locator("#pinned li .text")).to_contain_text(
                ["User: my cat Miso is ten years old."]
            )
            expect(page.locator("#extracted li .text")).not_to_contain_text([extracted[0]["text"]])

            # delete the hostile one (a confirm dialog)
            page.once("dialog", lambda dialog: dialog.accept())
            page.locator("#pinned li", has_text="Asha").get_by_role("button", name="Delete").click()
            expect(page.locator("#pinned li", has_text="Asha")).to_have_count(0)

            # extract now
            page.click("#flush")
            expect(page.locator("#status")).to_contain_text("Extraction requested")

            # another conversation
            page.select_option("#conversation", "trip")
            expect(page.locator("#turns tbody")).to_contain_text("trip to Goa")
            expect(page.locator("#turns tbody")).not_to_contain_text("Miso")
            assert "conversation=trip" in page.url
            browser.close()

        listing = http.get(
            f"{base}/memory/v1/memories", params={"user": user, "model": "demo"}, headers=auth
        ).json()
    assert [p["text"] for p in listing["pinned"]] == [
        "Favourite food: masala dosa",
        "User: my cat Miso is ten years old.",
    ]
    assert problems == []
    assert _screenshot_path(tmp_path).stat().st_size > 20_000
