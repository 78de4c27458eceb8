"""The router's list of workers every 0.2 s until STOP_FILE exists, one JSON line a sample on stdout:
[monotonic seconds, [URLs]], or [seconds, null, error] where the router did not answer (roll_check.py fails on it).
Run on the router's host: sample_workers.py ROUTER_URL KEY_FILE STOP_FILE (the key, the router's control-plane
key, is read from its file, never given in argv). Used by Molecule fleet and tests/integration/fleet.py."""
import json
import os
import sys
import time
import urllib.request


def main(router_url, key_file, stop_file):
    with open(key_file) as handle:
        request = urllib.request.Request(router_url + "/workers",
                                         headers={"Authorization": "Bearer " + handle.read().strip()})
    while not os.path.exists(stop_file):
        when = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:
                workers = json.load(reply)["workers"]
        except Exception as exc:  # pylint: disable=broad-except
            print(json.dumps([when, None, "%s: %s" % (type(exc).__name__, exc)]), flush=True)
        else:
            print(json.dumps([when, [worker["url"] for worker in workers]]), flush=True)
        time.sleep(0.2)


if __name__ == "__main__":
    main(*sys.argv[1:4])
