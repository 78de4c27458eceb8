"""Did the roll drain each replica out of the router, `serial` replicas at a time, one batch after the other?

stdin: {"samples": [{"sent": monotonic seconds, "answered": monotonic seconds, "workers": [worker URLs the router
        lists]}, ...] (sample_workers.py's; an unanswered sample has "error" in place of "workers": a request the
        router failed, which fails the roll),
        "replicas": [replica names], "serial": the roll's k26_serial (the batches are the replicas in the order
        they stopped, `serial` at a time: the run, not the inventory, decides the order),
        "identities": {name: {"InactiveEnterTimestampMonotonic": usec, "ExecMainStartTimestampMonotonic": usec}},
        "url": "http://{name}:30000" (a replica's worker URL)}
The timestamps are systemd's for the replica's restart (its stop and its new process's start), on the same
CLOCK_MONOTONIC as the samples: the containers share the host's kernel.

A sample tells the router's list at some moment between its sent and answered times. Checks, for each replica: no
sample taken wholly within its stop and 2 s after its new process started (its port is still closed then: weights load
for 2 s) lists it, and a sample reaching into that time shows it out; it is listed again before the next batch stops;
the replicas of a batch were down together; a batch stops only after the one before it started
again; the last batch is listed in the last sample. Prints what it saw; exits 1 with every violation.
"""
import json
import sys

LOADING_SECONDS = 2.0


def replica(data, name):
    identity = data["identities"][name]
    return {"name": name, "url": data["url"].format(name=name),
            "stopped": int(identity["InactiveEnterTimestampMonotonic"]) / 1e6,
            "started": int(identity["ExecMainStartTimestampMonotonic"]) / 1e6}


def check_replica(samples, one, next_stop):
    """Problems with one replica's restart: listed while away, never seen out then, not listed again in time."""
    begin, end = one["stopped"], one["started"] + LOADING_SECONDS
    away = [sample for sample in samples if sample["answered"] >= begin and sample["sent"] <= end]
    listed = [sample for sample in away if begin <= sample["sent"] and sample["answered"] <= end
              and one["url"] in sample["workers"]]
    print("%s: out of the router from %.2f to %.2f: %d samples, %d listing it"
          % (one["name"], begin, end, len(away), len(listed)))
    problems = []
    if not any(one["url"] not in sample["workers"] for sample in away):
        problems.append("%s: no sample of the router's workers showed it out while it restarted" % one["name"])
    if listed:
        problems.append("%s: the router listed it while it restarted" % one["name"])
    if not any(one["started"] < sample["sent"] and sample["answered"] < next_stop and one["url"] in sample["workers"]
               for sample in samples):
        problems.append("%s: not listed again before the next batch stopped" % one["name"])
    return problems


def check_batches(batches):
    """Problems with the order: a batch down together, and only after the previous one started again."""
    problems = []
    for index, batch in enumerate(batches):
        if max(one["stopped"] for one in batch) > min(one["started"] for one in batch) + LOADING_SECONDS:
            problems.append("%s were not down together" % ", ".join(one["name"] for one in batch))
        if index:
            before = batches[index - 1]
            if min(one["stopped"] for one in batch) <= max(one["started"] for one in before):
                problems.append("%s stopped before %s had started again" % (
                    ", ".join(one["name"] for one in batch), ", ".join(one["name"] for one in before)))
    return problems


def unanswered(raw):
    """Problems with the samples the router did not answer: each is a request it failed during the roll."""
    failed = [sample for sample in raw if "error" in sample]
    if not failed:
        return []
    return ["the router did not answer %d of %d samples (the first sent at %.2f: %s)"
            % (len(failed), len(raw), failed[0]["sent"], failed[0]["error"])]


def main():
    data = json.load(sys.stdin)
    problems = unanswered(data["samples"])
    answered = [dict(sample, workers=set(sample["workers"])) for sample in data["samples"] if "error" not in sample]
    samples = sorted(answered, key=lambda sample: sample["sent"])
    if samples:
        print("the router's slowest answer: %.2f s" % max(sample["answered"] - sample["sent"] for sample in samples))
    stopped = sorted((replica(data, name) for name in data["replicas"]), key=lambda one: one["stopped"])
    batches = [stopped[index:index + data["serial"]] for index in range(0, len(stopped), data["serial"])]
    problems += check_batches(batches)
    for index, batch in enumerate(batches):
        next_stop = min(one["stopped"] for one in batches[index + 1]) if index + 1 < len(batches) else float("inf")
        for one in batch:
            problems += check_replica(samples, one, next_stop)
    if samples and batches and not all(one["url"] in samples[-1]["workers"] for one in batches[-1]):
        problems.append("the last batch is not listed in the last sample")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("drained and rolled batch by batch, in order: %s"
          % " then ".join("+".join(one["name"] for one in batch) for batch in batches))


if __name__ == "__main__":
    main()
