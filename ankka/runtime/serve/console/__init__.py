"""The console: server-rendered pages over the runtime's own read APIs, at ``/console``.

- :mod:`.views` — pure: a session's messages and summary become the values a page shows
  (turns with their messages, tool calls and token use; tokens per agent and model).
- :mod:`.charts` — pure: small inline SVG charts (a session's tokens over its turns).
- :mod:`.pages` — pure: the HTML of each page, every value escaped.
- :mod:`.tree` and :mod:`.teams_pages` — pure: a task's tree; a team's backlog and a
  moderated conversation's speakers.
- :mod:`.routes` — the Starlette routes and who may reach them (loopback only by default).

Off unless enabled (``ankka serve --console`` or ``ANKKA_CONSOLE=on``; ``ankka up`` turns it
on). Works offline: the one script is served from this package, never fetched.
"""
