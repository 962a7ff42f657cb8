"""Bots in a real browser: the login QR code as SVG (decoded), then the bot running."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import segno

from .conftest import LLM_SECRET, base_env, write_bots
from .test_browser_chat import shot

TRUSTED_QR = "https://liteapp.weixin.qq.com/q/7GiQu1?qrcode=fixture&bot_type=3"


def decode_png(png: bytes) -> list[str]:
    import zxingcpp
    from PIL import Image

    return [r.text for r in zxingcpp.read_barcodes(Image.open(io.BytesIO(png)).convert("L"))]


def test_bot_from_qr_to_running(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> None:
    cfg = write_bots(tmp_path)
    srv = server_factory(base_env(tmp_path, agent, AGENTRT_BOTS_CONFIG=str(cfg)))
    page = browser.new_page()
    dialogs: list[str] = []

    def accept(d: Any) -> None:
        dialogs.append(d.message)
        d.accept()

    page.on("dialog", accept)
    page.goto(srv.url + "/bots")
    row = page.locator('#bot-table tr[data-bot="b1"]')
    assert row.locator('[data-field="status"]').inner_text() == "stopped"
    page.goto(srv.url + "/bots/b1")
    page.click('button[data-action="start"]')
    assert dialogs == ["Start b1?"]  # behind a confirmation

    # waiting_for_qr: the QR code is on the page, as an SVG drawn by the server.
    img = page.locator("#qr-img")
    img.wait_for()
    page.wait_for_function("() => document.getElementById('qr-img').complete && "
                           "document.getElementById('qr-img').naturalWidth > 0")
    assert page.locator("#bot-status").inner_text() == "waiting_for_qr"
    assert decode_png(img.screenshot()) == [TRUSTED_QR]
    resp = page.request.get(srv.url + "/bots/b1/qr.svg")
    assert resp.status == 200
    assert resp.headers["content-type"].startswith("image/svg+xml")
    assert resp.headers["cache-control"] == "no-store"
    expected = io.BytesIO()
    segno.make_qr(TRUSTED_QR, error="m").save(expected, kind="svg", scale=6, border=4, dark="#000",
                                              light="#fff", xmldecl=True)
    assert resp.body() == expected.getvalue()
    assert TRUSTED_QR not in page.content()  # the URL is drawn, never written out
    shot(page, "bot-qr.png")

    # The user scans it: the fixture finds a login state file and comes up running on restart.
    data = tmp_path / "instances" / "b1" / "data"
    (data / "accounts-runtime.jsonl").write_text("{}\n")
    page.click('button[data-action="restart"]')
    page.wait_for_function("() => document.getElementById('bot-status').textContent === 'running'")
    assert page.locator("#qr-img").count() == 0
    assert page.request.get(srv.url + "/bots/b1/qr.svg").status == 404
    page.reload()  # the timeline (paged, from the database) has the applied lifecycle events
    page.locator("#timeline td", has_text="qr_code").first.wait_for()
    assert page.locator("#timeline td", has_text="running").count() >= 1

    # The list is live: its badge and counts follow without a reload.
    page.goto(srv.url + "/bots")
    assert row.locator('[data-field="status"]').inner_text() == "running"
    assert page.locator('#bot-counts [data-state="running"]').inner_text() == "1 running"
    shot(page, "bots.png")
    # Stopped from elsewhere (a script with this session): the open list follows, no reload.
    page.evaluate("window.__marker = 1")
    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content")
    r = page.request.post(srv.url + "/bots/b1/stop", headers={"x-csrf-token": csrf, "accept": "application/json"})
    assert r.status == 200
    page.wait_for_function("() => document.querySelector('#bot-table [data-field=status]').textContent === 'stopped'")
    page.wait_for_selector('#bot-counts [data-state="stopped"]')
    assert page.evaluate("window.__marker") == 1  # the same document: updated live
    for url in ("/bots", "/bots/b1", "/api/bots"):
        assert LLM_SECRET not in page.request.get(srv.url + url).text()


def test_reissue_qr_clears_the_login(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> None:
    cfg = write_bots(tmp_path)
    data = tmp_path / "instances" / "b1" / "data"
    srv = server_factory(base_env(tmp_path, agent, AGENTRT_BOTS_CONFIG=str(cfg)))
    page = browser.new_page()
    page.on("dialog", lambda d: d.accept())
    page.goto(srv.url + "/bots/b1")
    data.mkdir(parents=True, exist_ok=True)
    (data / "accounts-runtime.jsonl").write_text("{}\n")
    page.click('button[data-action="start"]')
    page.wait_for_function("() => document.getElementById('bot-status').textContent === 'running'")
    page.click('button[data-action="reissue-qr"]')
    page.wait_for_function("() => document.getElementById('bot-status').textContent === 'waiting_for_qr'")
    page.locator("#qr-img").wait_for()
    assert not (data / "accounts-runtime.jsonl").exists()
