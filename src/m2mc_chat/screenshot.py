"""Write the README screenshot: ``python -m m2mc_chat.screenshot docs/img/chat.svg``.

The demo conversation (seeds/000 Fig. 3-4) on the fake network, with a fixed
clock, so the picture only changes when the interface does.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from m2mc_chat.fake import demo_network
from m2mc_chat.testing import make_app, settle, type_text
from m2mc_chat.ui.browser import GroupBrowser

SIZE = (110, 30)


async def render(out: Path) -> None:
    net, _ = demo_network()
    with tempfile.TemporaryDirectory() as tmp:
        app = make_app(net, Path(tmp))
        async with app.run_test(size=SIZE) as pilot:
            for desc in ("lunch", "travel stories"):
                await settle(pilot)
                await pilot.press("ctrl+g")
                await settle(pilot)
                browser = app.screen
                assert isinstance(browser, GroupBrowser)
                while browser.session.groups[browser.selected_gid() or ""].desc != desc:
                    await pilot.press("down")
                await pilot.press("j")
                await settle(pilot)
            await pilot.press("down", "down", "down", "ctrl+r")   # answer Bob's "Lahori Gate"
            await type_text(pilot, "Thanks, next time I will")
            app.clear_notifications()                         # no "Joined ..." toasts
            await settle(pilot)
            out.parent.mkdir(parents=True, exist_ok=True)
            app.save_screenshot(filename=out.name, path=str(out.parent))


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("docs/img/chat.svg")
    asyncio.run(render(out))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
