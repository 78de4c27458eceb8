"""molecule/fleet/files/roll_check.py: the verdict on a rolling change from samples of the router's workers."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[2] / "molecule" / "fleet" / "files" / "roll_check.py"
URL = "http://{name}:30000"
ALL = ["http://a:30000", "http://b:30000", "http://c:30000"]


def identities(*windows):
    return {name: {"InactiveEnterTimestampMonotonic": int(stop * 1e6), "ExecMainStartTimestampMonotonic": int(start * 1e6)}
            for name, (stop, start) in zip("abc", windows)}


def samples_of(listing):
    """listing(t) -> URLs, sampled every 0.2 s from 0 to 40 s, each answered in 0.05 s."""
    return [{"sent": t / 5, "answered": t / 5 + 0.05, "workers": listing(t / 5)} for t in range(0, 200)]


def verdict(samples, ids, serial=1):
    payload = {"samples": samples, "replicas": ["a", "b", "c"], "serial": serial, "identities": ids, "url": URL}
    proc = subprocess.run([sys.executable, str(CHECK)], input=json.dumps(payload), capture_output=True, text=True,
                          check=False)
    return proc.returncode, proc.stdout


def rolled(t):
    """a out from 5 to 12, b from 15 to 22, c from 25 to 32."""
    return [url for url, (leave, back) in zip(ALL, [(5, 12), (15, 22), (25, 32)]) if not leave <= t < back]


def test_a_drained_roll_one_at_a_time_passes():
    rc, out = verdict(samples_of(rolled), identities((5.5, 6), (15.5, 16), (25.5, 26)))
    assert rc == 0, out
    assert "drained and rolled batch by batch, in order: a then b then c" in out


def two_at_a_time(t):
    """a and b out from 5 to 12, c from 15 to 22."""
    return [url for url, (leave, back) in zip(ALL, [(5, 12), (5, 12), (15, 22)]) if not leave <= t < back]


def test_a_roll_two_at_a_time_passes_as_batches_and_fails_as_one_at_a_time():
    ids = identities((5.5, 6), (5.6, 6.1), (15.5, 16))
    rc, out = verdict(samples_of(two_at_a_time), ids, serial=2)
    assert rc == 0 and "a+b then c" in out, out
    rc, out = verdict(samples_of(two_at_a_time), ids)
    assert rc == 1 and "b stopped before a had started again" in out, out


def test_the_batches_follow_the_run_not_the_inventory():
    """c and a first, then b (the order of the run's group): still two at a time."""
    def listing(t):
        return [url for url, (leave, back) in zip(ALL, [(5, 12), (15, 22), (5, 12)]) if not leave <= t < back]
    rc, out = verdict(samples_of(listing), identities((5.6, 6.1), (15.5, 16), (5.5, 6)), serial=2)
    assert rc == 0 and "c+a then b" in out, out


@pytest.mark.parametrize("listing, ids, problem", [
    (lambda t: ALL, identities((5.5, 6), (15.5, 16), (25.5, 26)), "a: the router listed it while it restarted"),
    (rolled, identities((5.5, 6), (5.7, 16), (25.5, 26)), "b stopped before a had started again"),
    (lambda t: [u for u in rolled(t) if u != "http://a:30000" or t < 5], identities((5.5, 6), (15.5, 16), (25.5, 26)),
     "a: not listed again before the next batch stopped"),
    (lambda t: [u for u in rolled(t) if u != "http://c:30000" or t < 25], identities((5.5, 6), (15.5, 16), (25.5, 26)),
     "the last batch is not listed in the last sample"),
    (rolled, identities((5.5, 6), (15.5, 16), (60, 61)), "c: no sample of the router's workers showed it out while it restarted"),
], ids=["never left", "overlap", "never rejoined", "last never rejoined", "no sample"])
def test_a_roll_that_breaks_a_promise_fails_with_the_reason(listing, ids, problem):
    rc, out = verdict(samples_of(listing), ids)
    assert rc == 1 and problem in out, out


def test_a_sample_the_router_did_not_answer_fails_the_roll():
    samples = samples_of(rolled)
    del samples[30]["workers"]
    samples[30]["error"] = "URLError: <urlopen error [Errno 111] Connection refused>"
    rc, out = verdict(samples, identities((5.5, 6), (15.5, 16), (25.5, 26)))
    assert rc == 1 and "the router did not answer 1 of 200 samples (the first sent at 6.00: URLError" in out, out


def slow_over(samples, begin, end, listing):
    """The samples sent from begin to end replaced by one answer that took that long, with listing(end)."""
    kept = [sample for sample in samples if not begin <= sample["sent"] <= end]
    return sorted(kept + [{"sent": begin, "answered": end, "workers": listing(end)}], key=lambda sample: sample["sent"])


def test_an_answer_slower_than_the_restart_counts_for_the_restart():
    """The router answered one request over all of a's restart (seen on a loaded CI machine): it showed a out."""
    samples = slow_over(samples_of(rolled), 5.1, 8.5, rolled)
    rc, out = verdict(samples, identities((5.5, 6), (15.5, 16), (25.5, 26)))
    assert rc == 0, out
    assert "a: out of the router from 5.50 to 8.00: 1 samples, 0 listing it" in out
    assert "the router's slowest answer: 3.40 s" in out


def test_a_slow_answer_that_still_lists_the_replica_is_not_a_sample_of_it_out():
    samples = slow_over(samples_of(rolled), 5.1, 8.5, lambda t: ALL)
    rc, out = verdict(samples, identities((5.5, 6), (15.5, 16), (25.5, 26)))
    assert rc == 1 and "a: no sample of the router's workers showed it out while it restarted" in out, out
    assert "a: the router listed it while it restarted" not in out
