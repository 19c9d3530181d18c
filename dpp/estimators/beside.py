"""Work started in a thread beside the caller's, its result waited for where it is needed.

What :meth:`dpp.estimators.search.CandidateSearch.beside` runs: an embedded member's fits on
a second core while the paper's model's candidates compile and fit on the first.
"""

from __future__ import annotations

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
    """Calls run one after another in a daemon thread: :meth:`result` waits for one.

    The thread says its warnings at ``caller`` (the user's line, as a joblib worker does); a
    call's failure is raised by :meth:`result` in the thread that waits, and the calls after
    it do not run. A daemon, so that an interrupted run's process exits without waiting.
    """

    def __init__(self, calls: list, caller=None):
        self._out: list = [None] * len(calls)
        self._done = [threading.Event() for _ in calls]

        def run():
            with warnings_attributed_to(caller):
                for i, (fn, *args) in enumerate(calls):
                    try:
                        self._out[i] = (fn(*args), None)
                    except BaseException as err:  # raised where result() is called
                        self._out[i:] = [(None, err)] * (len(calls) - i)
                        for event in self._done[i:]:
                            event.set()
                        return
                    self._done[i].set()

        threading.Thread(target=run, daemon=True, name="dpp-beside").start()

    def result(self, i: int = 0):
        """Call ``i``'s return value, once it has finished; its exception, raised here."""
        self._done[i].wait()
        value, error = self._out[i]
        if error is not None:
            raise error
        return value
