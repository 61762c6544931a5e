"""Cyclic garbage collection on the GUI thread only.

Python's cyclic collector runs in whichever thread happens to allocate when a threshold is crossed. When that is a
worker thread (training loads a corpus: millions of allocations) and the garbage holds Qt objects (a closed window's
widgets, a finished session's signals), their C++ destructors run off the GUI thread and the process can crash; CI saw
a segmentation fault in the training thread this way. So the app turns automatic collection off and collects from a
timer on the GUI thread, generation by generation, with Python's own thresholds. Reference counting still frees
everything that is not in a cycle at once, in any thread.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer, Slot


class MainThreadCollector(QObject):
    """While it exists (and until ``stop``), cyclic garbage is only collected on the thread that created it."""

    NAME = "attnviz-main-thread-collector"

    def __init__(self, parent: QObject | None = None, interval_ms: int = 500):
        super().__init__(parent)
        self.setObjectName(self.NAME)
        self._thresholds = gc.get_threshold()
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect_due)
        self._timer.start()

    @Slot()
    def collect_due(self) -> int:
        """Collect the generations whose counters passed their thresholds, as Python would have; returns how many
        unreachable objects were found."""
        counts, thresholds = gc.get_count(), self._thresholds
        if counts[0] <= thresholds[0]:
            return 0
        oldest_due = max(g for g in range(3) if g == 0 or counts[g] > thresholds[g])
        return gc.collect(oldest_due)

    def stop(self) -> None:
        """Hand collection back to Python (as it was before)."""
        self._timer.stop()
        if self._was_enabled:
            gc.enable()


def install(app: QObject) -> MainThreadCollector:
    """The app's collector, owned by ``app`` (one per application; a second call returns the first)."""
    existing = app.findChild(QObject, MainThreadCollector.NAME)
    return existing if isinstance(existing, MainThreadCollector) else MainThreadCollector(app)
