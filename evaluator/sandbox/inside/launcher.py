"""Join the cgroup in argv[1] (if any), set the rlimits in argv[2] (NAME=VALUE,…), exec argv[3:]."""

import os
import resource
import sys

if __name__ == "__main__":
    if sys.argv[1]:
        with open(os.path.join(sys.argv[1], "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))
    for name, value in (pair.split("=") for pair in sys.argv[2].split(",")):
        resource.setrlimit(getattr(resource, name), (int(value), int(value)))
    os.execvp(sys.argv[3], sys.argv[3:])
