"""Work started in a thread beside the caller's, its result waited for where it is needed.

What :meth:`dpp.estimators.search.CandidateSearch.beside` runs: an embedded member's fits on
a second core while the paper's model's candidates compile and fit on the first.
"""

from __future__ import annotations

import contextlib
import os
import threading

from dpp.errors import warnings_attributed_to


def cores() -> int:
    """The CPU cores this process may run on.

    Its affinity mask where the OS keeps one (Linux: a container's or ``taskset``'s share),
    else every core (``os.cpu_count``).
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


class Beside:
    """Calls run one after another in a thread of their own: :meth:`result` waits for one.

    The thread says its warnings at ``caller`` (the user's line, as a joblib worker does); a
    call's failure is raised by :meth:`result` in the thread that waits, and the calls after
    it do not run. :meth:`stop` skips the calls not yet started and waits for the one running:
    the owner calls it before it returns or raises, so no thread outlives the fit (one killed
    inside a compiled program at the interpreter's exit aborts the process).
    """

    def __init__(self, calls: list, caller=None):
        self._out: list = [None] * len(calls)
        self._done = [threading.Event() for _ in calls]
        self._stopped = threading.Event()

        def run():
            with warnings_attributed_to(caller):
                for i, (fn, *args) in enumerate(calls):
                    try:
                        if self._stopped.is_set():
                            raise RuntimeError("stopped before it ran")
                        self._out[i] = (fn(*args), None)
                    except BaseException as err:  # raised where result() is called
                        self._out[i:] = [(None, err)] * (len(calls) - i)
                        for event in self._done[i:]:
                            event.set()
                        return
                    self._done[i].set()

        self._thread = threading.Thread(target=run, name="dpp-beside")
        self._thread.start()

    def result(self, i: int = 0):
        """Call ``i``'s return value, once it has finished; its exception, raised here."""
        self._done[i].wait()
        value, error = self._out[i]
        if error is not None:
            raise error
        return value

    def stop(self) -> None:
        """Skips the calls not yet started, and waits for the thread to end."""
        self._stopped.set()
        self._thread.join()


@contextlib.contextmanager
def stopped(pending: dict):
    """On leaving the block (a return or an error), every :class:`Beside` stopped and ended.

    ``pending``: a dict whose values are the :class:`Beside` objects.
    """
    try:
        yield
    finally:
        for work in pending.values():
            work.stop()
