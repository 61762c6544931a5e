"""Cyclic garbage is collected on the GUI thread, never in a worker thread that happens to allocate."""

import gc
import threading
import weakref

from attnviz.gui import collector


class _Cyclic:
    def __init__(self, finalized_in: list):
        self.me, self.finalized_in = self, finalized_in

    def __del__(self):
        self.finalized_in.append(threading.current_thread())


def test_garbage_made_in_the_gui_thread_is_collected_there_even_when_a_worker_allocates(qtbot, qapp,
                                                                                        main_thread_gc):
    assert not gc.isenabled() and collector.install(qapp) is main_thread_gc  # one collector per application
    finalized_in: list = []
    alive = weakref.ref(_Cyclic(finalized_in))
    assert alive() is not None  # a cycle: reference counting alone cannot free it

    kept: list = []

    def allocate():  # like loading a corpus: crosses every generation's threshold many times over
        kept.extend([i] for i in range(200_000))

    worker = threading.Thread(target=allocate)
    worker.start()
    worker.join()
    assert alive() is not None and finalized_in == []  # the worker did not collect it
    qtbot.waitUntil(lambda: alive() is None, timeout=5000)
    assert finalized_in == [threading.main_thread()]
    kept.clear()


def test_collect_due_follows_pythons_thresholds(main_thread_gc):
    gc.collect()
    assert main_thread_gc.collect_due() == 0  # nothing allocated since: nothing due
    for _ in range(3):
        _Cyclic([])  # garbage in cycles
    keep = [[i] for i in range(gc.get_threshold()[0] + 10)]
    assert main_thread_gc.collect_due() >= 3
    assert gc.get_count()[0] < gc.get_threshold()[0]
    del keep


def test_stop_hands_collection_back(qapp):
    standalone = collector.MainThreadCollector()
    assert not gc.isenabled()
    standalone.stop()
    assert not gc.isenabled()  # the app's collector (installed first) still owns collection
