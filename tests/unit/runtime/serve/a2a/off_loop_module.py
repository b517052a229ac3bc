"""Imported by tests/unit/runtime/serve/a2a/test_mount.py as the A2A routes' module: it keeps
whether its import ran on the main thread (where the test's event loop runs)."""

import threading

ON_MAIN_THREAD = threading.current_thread() is threading.main_thread()
