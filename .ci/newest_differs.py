"""Exit 0 when an environment's installed versions differ from the lock, 1 when they equal it.

CI runs the self-tests against the lock (constraints.txt) and again against the newest releases
(tox -e latest). On the day the newest releases are exactly the lock, that second run would
repeat the first; this tells CI so. Usage: python .ci/newest_differs.py constraints.txt FREEZE
(FREEZE: `pip freeze` of the newest-release environment).
"""

import re
import sys


def versions(path: str) -> dict:
    out = {}
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[re.sub(r"[-_.]+", "-", name).lower()] = version.split("+", 1)[0].strip()
    return out


lock, newest = versions(sys.argv[1]), versions(sys.argv[2])
changed = {name: (lock.get(name), v) for name, v in newest.items() if lock.get(name) != v}
for name, (old, new) in sorted(changed.items()):
    print(f"  {name}: lock {old or '-'} -> newest {new}")
sys.exit(0 if changed else 1)
