"""Peak memory of a process tree, polled from /proc (Linux): for the benchmarks, which
watch the Spark JVM and the Python workers it starts."""
from __future__ import annotations

import os
import threading
import time


class PeakRss:
    """Polls the memory of a process tree (the Spark JVM and its Python workers): peak RSS
    of the JVM, peak summed RSS of the tree, and peak summed PSS of the tree (PSS splits
    pages shared between processes, such as those of Python workers forked from one
    daemon, so the tree's PSS is what it really holds; summed RSS counts them repeatedly)."""

    def __init__(self, pid: int):
        self.pid, self.peak_total, self.peak_root, self.peak_pss, self._stop = pid, 0, 0, 0, False
        self.peak_children_pss = 0   # the tree without its root: the Python workers of a JVM
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _tree(self):
        kids = {}
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
                    kids.setdefault(ppid, []).append(int(p))
                except OSError:
                    pass
        todo, seen = [self.pid], []
        while todo:
            p = todo.pop()
            seen.append(p)
            todo += [k for k in kids.get(p, []) if not self._unexeced_jvm_child(p, k)]
        return seen

    @staticmethod
    def _unexeced_jvm_child(parent: int, child: int) -> bool:
        """A JVM's child still running the JVM's binary: a process launch (Hadoop's `chmod`,
        ...) caught between its vfork/posix_spawn and its exec. It shares the JVM's memory, and
        /proc reports that memory again for it, so counting it would double the JVM."""
        try:
            exe = os.readlink(f"/proc/{parent}/exe")
            return os.path.basename(exe) == "java" and os.readlink(f"/proc/{child}/exe") == exe
        except OSError:
            return False

    @staticmethod
    def _kib_field(path: str, name: str) -> int:
        """Bytes of a `name: <n> kB` line of a /proc file; 0 when the process is gone."""
        try:
            for line in open(path):
                if line.startswith(name):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _rss(self, pid):
        return self._kib_field(f"/proc/{pid}/status", "VmRSS:")

    def _pss(self, pid):
        return self._kib_field(f"/proc/{pid}/smaps_rollup", "Pss:")

    def _run(self):
        while not self._stop:
            pids = self._tree()
            self.peak_root = max(self.peak_root, self._rss(self.pid))
            self.peak_total = max(self.peak_total, sum(self._rss(p) for p in pids))
            pss = {p: self._pss(p) for p in pids}
            self.peak_pss = max(self.peak_pss, sum(pss.values()))
            self.peak_children_pss = max(self.peak_children_pss, sum(v for p, v in pss.items() if p != self.pid))
            time.sleep(0.5)

    def stop(self):
        self._stop = True
        self.t.join()
