"""The router's list of workers every 0.2 s until STOP_FILE exists, one JSON object a sample on stdout:
{"sent": monotonic seconds, "answered": monotonic seconds, "workers": [URLs]}, or "error" in place of "workers" where
the router did not answer (roll_check.py fails on it). Both times are kept because the router answers with its list
as it was at some moment between them: under load an answer can take longer than a replica's restart.
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
        sample = {"sent": time.monotonic()}
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:
                sample["workers"] = [worker["url"] for worker in json.load(reply)["workers"]]
        except Exception as exc:  # pylint: disable=broad-except
            sample["error"] = "%s: %s" % (type(exc).__name__, exc)
        sample["answered"] = time.monotonic()
        print(json.dumps(sample), flush=True)
        time.sleep(0.2)


if __name__ == "__main__":
    main(*sys.argv[1:4])
