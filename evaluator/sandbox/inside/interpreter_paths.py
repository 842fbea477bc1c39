"""Print, as JSON, this interpreter's module path and its site folders (to be hidden)."""

import json
import sys
import sysconfig

if __name__ == "__main__":
    site = {sysconfig.get_path(name) for name in ("purelib", "platlib")}
    print(json.dumps({"path": sys.path[1:], "site": sorted(site)}))
