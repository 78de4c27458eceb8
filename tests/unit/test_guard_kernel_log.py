"""The replica guard hears the kernel as the journal receives it (roles/sglang_service/files/replica_guard.py's
KernelLog, run as installed): an NVIDIA event of its GPUs wakes it at once, one of another GPU or a line that merely
quotes the driver does not; its follower is started again from the cursor; a fatal event decides without a canary.
The follower here is a stand-in for ``journalctl -k -f -o json`` that says what each test gives it."""
import json
import subprocess
import sys

FATAL = {"MESSAGE": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", "SYSLOG_IDENTIFIER": "kernel"}
OTHER_GPU = dict(FATAL, MESSAGE=FATAL["MESSAGE"].replace("3b:00", "5e:00"))
QUOTING = {"MESSAGE": "EXT4-fs (sdb1): mount failed: 'NVRM: Xid (PCI:0000:3b:00): 79'", "SYSLOG_IDENTIFIER": "kernel"}

# The stand-in: each start appends its argv to calls.json, then follows the plan for that start (the last plan
# serves every later start): ["say", entry] prints it as a journal entry with the next cursor, ["sleep", s], ["end"].
FOLLOWER = """
import json, sys, time
folder = sys.argv[1]
calls = json.load(open(folder + '/calls.json')) if __import__('os').path.exists(folder + '/calls.json') else []
calls.append(sys.argv[2:])
json.dump(calls, open(folder + '/calls.json', 'w'))
plans = json.load(open(folder + '/plans.json'))
for step in plans[min(len(calls), len(plans)) - 1]:
    if step[0] == 'say':
        print(json.dumps(dict(step[1], __CURSOR='c%d' % step[2])), flush=True)
    elif step[0] == 'sleep':
        time.sleep(step[1])
    else:
        sys.exit(0)
time.sleep(60)
"""

# The guard's side: a KernelLog on the stand-in; listen()s as the main loop does, printing what each gave.
LISTENER = """
import json, sys
import replica_guard
folder, cursor, waits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
guard = replica_guard.Guard.__new__(replica_guard.Guard)
guard.config = {'gpu_bus_ids': ['00000000:3B:00.0']}
guard.kernel = replica_guard.KernelLog(cursor, [sys.executable, folder + '/follower.py', folder])
seen = []
for seconds in waits:
    woken = guard.kernel.wait(seconds, wakes=lambda messages: bool(guard.events_of(messages)))
    seen.append({'woken': woken, 'messages': guard.kernel.take(), 'cursor': guard.kernel.cursor})
if guard.kernel.proc:
    guard.kernel.proc.kill()
json.dump(seen, sys.stdout)
"""


def listen(guard_dir, plans, waits, cursor=""):
    (guard_dir / "follower.py").write_text(FOLLOWER)
    (guard_dir / "plans.json").write_text(json.dumps(plans))
    proc = subprocess.run([sys.executable, "-c", LISTENER, str(guard_dir), cursor, json.dumps(waits)], cwd=guard_dir,
                          capture_output=True, text=True, check=False, timeout=120, env={"PYTHONPATH": str(guard_dir)})
    assert proc.returncode == 0, proc.stderr
    calls = json.loads((guard_dir / "calls.json").read_text())
    return json.loads(proc.stdout), calls


def test_a_fatal_event_of_its_gpu_wakes_the_guard_before_its_tick(guard_dir):
    # the wait is 90 s: had the event not woken it, the test would run past pytest's patience and fail on "woken"
    seen, calls = listen(guard_dir, [[["sleep", 0.3], ["say", QUOTING, 1], ["say", OTHER_GPU, 2],
                                      ["sleep", 0.2], ["say", FATAL, 3]]], [90])
    assert seen[0]["woken"] is True
    assert seen[0]["messages"] == [QUOTING["MESSAGE"], OTHER_GPU["MESSAGE"], FATAL["MESSAGE"]]
    assert seen[0]["cursor"] == "c3"
    assert calls == [["-n", "0"]]   # no cursor yet: from the newest entry on (the stand-in gets only where to start)


def test_lines_that_only_quote_the_driver_or_name_another_gpu_do_not_wake_it(guard_dir):
    seen, dummy = listen(guard_dir, [[["say", QUOTING, 1], ["say", OTHER_GPU, 2]]], [1.5])
    assert seen[0]["woken"] is False
    assert seen[0]["messages"] == [QUOTING["MESSAGE"], OTHER_GPU["MESSAGE"]]


def test_a_follower_that_ends_is_started_again_from_the_cursor(guard_dir):
    plans = [[["say", QUOTING, 7], ["end"]], [["sleep", 0.2], ["say", FATAL, 8]]]
    seen, calls = listen(guard_dir, plans, [90], cursor="c6")
    assert seen[0]["woken"] is True and seen[0]["cursor"] == "c8"
    assert calls == [["--after-cursor", "c6"], ["--after-cursor", "c7"]]


def test_a_cursor_the_journal_no_longer_holds_is_dropped(guard_dir):
    # journalctl ends at once, saying nothing, on a cursor it cannot seek to: the next start is from the newest entry
    seen, calls = listen(guard_dir, [[["end"]], [["say", FATAL, 1]]], [90], cursor="gone")
    assert seen[0]["woken"] is True
    assert calls == [["--after-cursor", "gone"], ["-n", "0"]]


def test_a_read_of_what_is_there_returns_at_once(guard_dir):
    seen, dummy = listen(guard_dir, [[["say", FATAL, 1]]], [1.0, 0, 0])
    assert [s["woken"] for s in seen] == [True, False, False]
    assert seen[1]["messages"] == [] and seen[2]["cursor"] == "c1"
