"""The threaded chat of seeds/000 section II, as a Textual TUI and a headless scripted client.

Layers, each in its own module:

- :mod:`m2mc_chat.model`: the thread tree (pure data, no I/O);
- :mod:`m2mc_chat.presence`: who is in a group and when we last heard from them;
- :mod:`m2mc_chat.backend`: the :class:`~m2mc_chat.backend.ChatBackend` protocol and its events;
- :mod:`m2mc_chat.fake`: an in-process, deterministic backend for tests and ``--demo``;
- :mod:`m2mc_chat.backend_m2mc`: the adapter to the real group layer (:mod:`m2mc.api`);
- :mod:`m2mc_chat.session`: glue between a backend and the models, shared by both front ends;
- :mod:`m2mc_chat.script`: the headless scripted participant;
- :mod:`m2mc_chat.app`: the Textual application (imports textual; nothing else here does).
"""

from __future__ import annotations
