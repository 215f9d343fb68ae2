"""Read-ahead: the next blocks of a file are read by a background thread while the caller works
on the current one (h5py and numpy release the interpreter while they copy)."""

import queue
import threading

#: blocks held ready ahead of the one in use
DEPTH = 2
_END = object()


def read_ahead(blocks, depth=DEPTH):
    """Yield the items of the iterable ``blocks``, produced by a background thread up to ``depth``
    ahead. An exception raised while producing is raised here, at the item it replaces; closing
    the generator (or leaving a loop over it) stops the thread."""
    q = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce():
        try:
            for item in blocks:
                if stop.is_set():
                    return
                q.put(item)
            q.put(_END)
        except BaseException as exc:  # handed to the consumer
            q.put(exc)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                thread.join(0.01)
