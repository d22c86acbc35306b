"""A memory cgroup of a given limit for the processes a benchmark or test
starts (cgroup v1's memory controller, or v2's memory.max), the way a
container runtime limits a task: make one, start a child in it (the
preexec function), drop it. Root only; None where none can be made."""

import os


class MemCgroup:
    def __init__(self, path, limit_file):
        self.path = path
        self.limit_file = limit_file  # what strata's refusal line names

    def enter(self):
        """For subprocess's preexec_fn: the child joins the cgroup."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def peak(self):
        """The cgroup's peak memory in bytes (v1 max_usage_in_bytes, v2
        memory.peak where the kernel has it), or None."""
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            try:
                with open(os.path.join(self.path, name)) as f:
                    return int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return None

    def drop(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def make(name, limit_bytes):
    """A new cgroup NAME limited to limit_bytes, or None."""
    for base, lim, probe in (
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes",
             "memory.limit_in_bytes"),
            ("/sys/fs/cgroup", "memory.max", "cgroup.controllers")):
        if not os.path.exists(os.path.join(base, probe)):
            continue
        cg = MemCgroup(os.path.join(base, name),
                       os.path.join(base, name, lim))
        try:
            os.mkdir(cg.path)
            with open(cg.limit_file, "w") as f:
                f.write(str(limit_bytes))
            return cg
        except OSError:
            cg.drop()
    return None
