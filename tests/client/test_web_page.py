"""The static page in headless chromium against a real scripted server: streaming, errors, busy retries."""

from __future__ import annotations

import datetime
from typing import Any

from tests.support.scripted_service import Reply, ScriptedService

BUSY = Reply(503, {"error": {"code": "overloaded", "message": "busy"}}, {"Retry-After": "1"})


def open_page(page: Any, service: ScriptedService) -> None:
    page.goto(service.url + "/")
    page.wait_for_function("document.querySelectorAll('#target option').length > 0")


def test_languages_fill_the_pickers_and_a_translation_shows(page: Any, service: ScriptedService) -> None:
    open_page(page, service)
    assert page.eval_on_selector_all("#target option", "os => os.map(o => o.value)") == ["en", "zh", "fr"]
    assert page.eval_on_selector_all("#source option", "os => os.map(o => o.value)") == ["en", "zh", "fr"]
    assert (page.input_value("#source"), page.input_value("#target")) == ("en", "zh")
    page.fill("#text", "Hello world")
    page.select_option("#source", "en")
    page.select_option("#target", "fr")
    page.click("#translate")
    page.wait_for_function("document.querySelector('#result').textContent.length > 0")
    assert page.text_content("#result") == "[fr] Hello world"
    assert "ms" in page.text_content("#latency")
    assert page.is_hidden("#error")
    sent = {"text": "Hello world", "target_lang": "fr", "source_lang": "en", "stream": True}
    assert service.state.requests == [sent]


def test_partial_text_shows_while_the_rest_is_generated(page: Any, service: ScriptedService) -> None:
    open_page(page, service)
    service.state.stream_gate.clear()  # the server sends the first half, then waits for the test
    page.fill("#text", "Hello streaming world")
    page.click("#translate")
    full = "[zh] Hello streaming world"
    first = full[: len(full) // 2]
    page.wait_for_function(f"document.querySelector('#result').textContent === {first!r}")
    assert page.is_disabled("#translate")  # still translating: the rest is held by the server
    assert page.text_content("#latency") == ""
    service.state.stream_gate.set()
    page.wait_for_function(f"document.querySelector('#result').textContent === {full!r}")
    page.wait_for_selector("#translate:enabled")
    assert "ms" in page.text_content("#latency")
    assert page.is_hidden("#error")


def test_unsupported_language_is_explained(page: Any, service: ScriptedService) -> None:
    open_page(page, service)
    service.state.script.append(
        Reply(
            400, {"error": {"code": "unsupported_language", "message": "target_lang 'xx' is not supported"}}
        )
    )
    page.fill("#text", "Hello")
    page.click("#translate")
    page.wait_for_selector("#error:not([hidden])")
    assert page.text_content("#error") == "Cannot translate this request: target_lang 'xx' is not supported"
    assert page.text_content("#result") == ""
    assert page.is_enabled("#translate")


# Counts the page's POSTs as it makes them: the count is exact the moment the page's clock moves.
COUNT_POSTS = """
window.hsPosts = 0;
const hsFetch = window.fetch;
window.fetch = (url, options) => {
  if (options && options.method === "POST") window.hsPosts += 1;
  return hsFetch(url, options);
};
"""


def test_overload_is_retried_after_retry_after(page: Any, service: ScriptedService) -> None:
    # The page's clock is the test's: the retry must wait Retry-After on it, whatever the machine's pace.
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    page.clock.install(time=start)
    page.add_init_script(COUNT_POSTS)
    open_page(page, service)
    page.clock.pause_at(start + datetime.timedelta(minutes=1))
    service.state.script.append(BUSY)
    page.fill("#text", "Hello")
    page.click("#translate")
    page.wait_for_selector("#error:not([hidden])")
    assert "The service is busy. Retrying in 1 s (attempt 1 of 3)" in page.text_content("#error")
    page.clock.run_for(999)
    assert page.evaluate("window.hsPosts") == 1 and page.text_content("#result") == ""
    page.clock.run_for(1)  # Retry-After: 1 s has passed on the page's clock
    page.wait_for_function("document.querySelector('#result').textContent.length > 0")
    assert page.text_content("#result") == "[zh] Hello"
    assert page.is_hidden("#error")
    assert page.evaluate("window.hsPosts") == 2 and len(service.state.requests) == 2


def test_overload_that_persists_asks_to_try_later(page: Any, service: ScriptedService) -> None:
    open_page(page, service)
    service.state.script.extend(
        [Reply(503, {"error": {"code": "overloaded", "message": "busy"}}, {"Retry-After": "0"})] * 4
    )
    page.fill("#text", "Hello")
    page.click("#translate")
    page.wait_for_function("document.querySelector('#error').textContent.includes('right now')")
    assert page.text_content("#error") == "The service is busy right now. Please try again in a moment."
    assert len(service.state.requests) == 4
    assert page.is_enabled("#translate")


def test_empty_text_is_not_sent(page: Any, service: ScriptedService) -> None:
    open_page(page, service)
    page.click("#translate")
    assert page.text_content("#error") == "Type some text to translate first."
    assert service.state.requests == []


def test_a_token_in_the_page_address_is_sent_as_a_bearer_key(page: Any, service: ScriptedService) -> None:
    page.goto(service.url + "/?token=k-123")
    page.wait_for_function("document.querySelectorAll('#target option').length > 0")
    page.fill("#text", "Hello")
    page.click("#translate")
    page.wait_for_function("document.querySelector('#result').textContent.length > 0")
    # GET /languages, then the POST /translate: both carry the key; without ?token= none is sent.
    assert service.state.authorizations == ["Bearer k-123", "Bearer k-123"]


def test_without_a_token_the_page_sends_no_key(page: Any, service: ScriptedService) -> None:
    open_page(page, service)
    page.fill("#text", "Hello")
    page.click("#translate")
    page.wait_for_function("document.querySelector('#result').textContent.length > 0")
    assert service.state.authorizations == [None, None]
